import itertools

import pytest
import torch

from pyg_degreembed import TypedGraph
from pyg_degreembed.interpret import paths as paths_module
from pyg_degreembed.interpret import target_paths
from pyg_degreembed.interpret.paths import pattern_of
from pyg_degreembed.interpret.target_paths import (forward_depths,
                                                   paths_to_targets,
                                                   reversed_patterns,
                                                   suffix_keys)

from conftest import dense_operators


def pattern_id(pattern, K):
    out = 0
    for k in pattern:
        out = out * (K + 1) + k + 1
    return out


def test_reversed_patterns_read_the_edges_backwards():
    K = 8
    patterns = [p for length in (1, 2, 3)
                for p in itertools.product(range(K), repeat=length)]
    for length in (1, 2, 3):
        mine = [p for p in patterns if len(p) == length]
        ids = torch.tensor([pattern_id(p, K) for p in mine])
        back = reversed_patterns(ids, length, K)
        assert [pattern_of(int(i), K) for i in back] == \
            [tuple((k + K // 2) % K for k in reversed(p)) for p in mine]
        assert torch.equal(reversed_patterns(back, length, K), ids)


def random_rules(K, L, gen, per_relation=6):
    # {relation: [pattern, ...]} with patterns of 1..L edges.
    rules = {}
    for q in range(K):
        found = set()
        while len(found) < per_relation:
            length = int(torch.randint(1, L + 1, (1,), generator=gen))
            found.add(tuple(torch.randint(0, K, (length,),
                                          generator=gen).tolist()))
        rules[q] = sorted(found)
    return rules


def test_suffix_keys_are_the_backward_suffixes_and_their_prefixes():
    K, L = 6, 3
    rules = random_rules(K, L, torch.Generator().manual_seed(1))
    P = (K + 1)**L
    key = torch.tensor(sorted(q * P + pattern_id(p, K)
                              for q, ps in rules.items() for p in ps))
    want = {q * P + pattern_id(tuple((k + K // 2) % K
                                     for k in reversed(p[-j:])), K)
            for q, ps in rules.items() for p in ps
            for j in range(1, len(p) + 1)}
    assert suffix_keys(key, K, L).tolist() == sorted(want)


def dense_walks(M, last, L):
    # [L + 1, N]: per entity, sum over l' <= l of (M^(l' - 1) last): with
    # last = M 1, its walks of at most l edges; by matrix products.
    out, power = [torch.zeros_like(last), last], last
    for _ in range(L - 1):
        power = M @ power
        out.append(out[-1] + power)
    return torch.stack(out[:L + 1])


@pytest.mark.parametrize('L', [1, 2, 3])
@pytest.mark.parametrize('hub', [2, 1000])
def test_forward_depths_take_the_fewest_walks(random_graph, L, hub,
                                              monkeypatch):
    monkeypatch.setattr(target_paths, 'HUB_DEGREE', hub)
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    gen = torch.Generator().manual_seed(L)
    head = torch.randint(0, N, (9,), generator=gen)
    targets = torch.rand(9, N, generator=gen) < 0.3
    targets[0] = False  # a query with no target
    walks, depth = forward_depths(graph, head, targets.view(-1).nonzero()
                                  .view(-1), L)
    M = dense_operators(edge_index, edge_type, N, K).sum(0)
    within = dense_walks(M, M.sum(1), L)
    capped = dense_walks(M, M.sum(1).clamp(max=hub), L)
    for b in range(9):
        # Backward: the targets' walks of up to L - a edges; forward: the
        # head's of a - 1 edges, then those of a with at most `hub` last
        # edges out of each entity.
        h = head[b]
        cost = [float(within[L - a][targets[b]].sum()) + (
            float(within[a - 1, h] + capped[a, h] - capped[a - 1, h])
            if a else 0.) for a in range(L)]
        assert float(walks[b]) == pytest.approx(min(cost))
        assert cost[int(depth[b])] == pytest.approx(min(cost))


@pytest.mark.parametrize('L', [1, 2, 3])
@pytest.mark.parametrize('depths', ['each', 'mixed', 'chosen', 'parts',
                                    'forwards', 'backwards'])
@pytest.mark.parametrize('max_meeting', [10**7, 0])
def test_paths_met_in_the_middle_equal_dense_products(random_graph, L,
                                                      depths, max_meeting,
                                                      monkeypatch):
    # The (query, target, rule pattern) triples reached by the paths met
    # at every forward depth (all at one, mixed, as forward_depths chooses,
    # with the hubs' states expanded and met in parts, and with the last
    # forward edge read forwards or backwards from the targets' paths whatever
    # their costs; kept where the backward paths complete them to a rule,
    # or, past MAX_MEETING keys, where they are prefixes of rules) are those
    # of the dense products of the patterns' adjacency matrices.
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    M = dense_operators(edge_index, edge_type, N, K) > 0
    gen = torch.Generator().manual_seed(7 * L)
    rules = random_rules(K, L, gen)
    B = 3 * K
    head = torch.randint(0, N, (B,), generator=gen)
    relation = torch.arange(K).repeat(3)
    targets = torch.rand(B, N, generator=gen) < 0.35
    target = targets.view(-1).nonzero().view(-1)
    P = (K + 1)**L
    rule_key = torch.tensor(sorted(q * P + pattern_id(p, K)
                                   for q, ps in rules.items() for p in ps))
    prefix_key = torch.tensor(sorted({
        q * P + pattern_id(p[:j], K) for q, ps in rules.items()
        for p in ps for j in range(1, len(p) + 1)}))
    want = set()
    for b in range(B):
        for p in rules[int(relation[b])]:
            reach = M[p[0]][head[b]]
            for k in p[1:]:
                reach = (reach.double() @ M[k].double()) > 0
            want |= {(b, int(y), p)
                     for y in (reach & targets[b]).nonzero().view(-1)}
    if depths == 'parts':  # expanded and met in parts
        monkeypatch.setattr(paths_module, 'MAX_WALKS', 3)
        monkeypatch.setattr(target_paths, 'MAX_PAIRS', 3)
    monkeypatch.setattr(target_paths, 'MAX_MEETING', max_meeting)
    if depths.endswith('wards'):
        monkeypatch.setattr(target_paths, 'BACKWARD_COST', 0. if depths ==
                            'backwards' else float('inf'))
    runs = [torch.full((B,), a) for a in range(L)] \
        if depths in ('each', 'forwards', 'backwards') \
        else [torch.randint(0, L, (B,), generator=gen)] \
        if depths == 'mixed' else [forward_depths(graph, head, target, L)[1]]
    for depth in runs:
        got = set()
        for walk, node, pattern in paths_to_targets(
                graph, head, target, depth, L, (relation, prefix_key),
                (relation, suffix_keys(rule_key, K, L)), rule_key):
            keep = targets[walk, node] & torch.isin(
                relation[walk] * P + pattern, rule_key)
            got |= {(int(w), int(y), pattern_of(int(p), K)) for w, y, p in
                    zip(walk[keep], node[keep], pattern[keep])}
        assert got == want
