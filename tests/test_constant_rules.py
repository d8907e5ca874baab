import pytest
import torch

from pyg_degreembed import compute_ranks, from_edge_index, resolve_graph
from pyg_degreembed.data.kg import all_triples, query_edges, split_triples
from pyg_degreembed.interpret.applied_rules import AppliedRules
from pyg_degreembed.interpret.constant_rules import (ANY, ConstantRules,
                                                     constant_rule_counts)

from conftest import brute_force_ranks, known_queries


def random_kg(seed, N=9, R=2, E=40):
    # Self-loops included.
    gen = torch.Generator().manual_seed(seed)
    triples = torch.stack([torch.randint(0, N, (E, ), generator=gen),
                           torch.randint(0, R, (E, ), generator=gen),
                           torch.randint(0, N, (E, ), generator=gen)])
    triples = torch.unique(torch.cat([triples, torch.tensor([[0], [0], [0]])],
                                     dim=1), dim=1)
    triples = triples[:, torch.randperm(triples.size(1), generator=gen)]
    half = triples.size(1) // 2
    facts = triples[:, :half]
    train = triples[:, half:]
    return from_edge_index(train[[0, 2]], train[1], num_nodes=N,
                           num_relations=R, splits={'facts': facts})


def observed_edges(data):
    graph = resolve_graph(data, num_relations=data.num_relations)
    return {(s, k, d) for s, k, d in zip(graph.edge_src.tolist(),
                                         graph.edge_type.tolist(),
                                         graph.edge_dst.tolist()) if s != d}


def body_holds(edges, x, b, d, c, K):
    # The body of q(X, c) <= b(X, d) / b(X, A) / (empty) for X = x, read
    # literally, with X, c, d, A pairwise distinct.
    if b == K:
        return x != c
    if d == ANY:
        return x != c and any((x, b, a) in edges for a in range(100)
                              if a not in (x, c))
    return len({x, c, d}) == 3 and (x, b, d) in edges


def brute_force(data):
    N, K = data.num_nodes, 2 * data.num_relations
    edges, queries = observed_edges(data), known_queries(data)
    out = {}
    for q in range(K):
        for b in range(K + 1):
            for d in ([ANY] if b == K else [ANY] + list(range(N))):
                for c in range(N):
                    heads = [x for x in range(N)
                             if body_holds(edges, x, b, d, c, K)]
                    support = sum((x, q, c) in queries for x in heads)
                    if support:
                        out[q, b, d, c] = (support, len(heads))
    return out


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_counts_against_brute_force(seed):
    data = random_kg(seed)
    counts = constant_rule_counts(data, chunk_size=7)
    found = {key: value for key, value in zip(
        zip(*(t.tolist() for t in counts[:4])),
        zip(counts.support.tolist(), counts.groundings.tolist()))}
    assert found == brute_force(data)


@pytest.mark.parametrize('seed', [0, 1])
@pytest.mark.parametrize('leave_out', [False, True])
def test_fired_rules_against_brute_force(seed, leave_out):
    data = random_kg(seed)
    R = data.num_relations
    K = 2 * R
    rules = ConstantRules.mine(data, min_support=1)
    graph = resolve_graph(data, num_relations=R)
    train = data.train_edge_index, data.train_edge_type
    head = torch.cat([train[0][0], train[0][1]])
    relation = torch.cat([train[1], train[1] + R])
    tail = torch.cat([train[0][1], train[0][0]])
    removed = graph.edge_range(*query_edges(head, relation, tail, R)[:3]) \
        if leave_out else None
    query, node, _, rule = rules.fire(graph, head, relation, removed,
                                      with_rule=True)
    found = sorted(zip(query.tolist(), node.tolist(), rule.tolist()))
    edges = observed_edges(data)
    expected = []
    for i, (h, q, t) in enumerate(zip(head.tolist(), relation.tolist(),
                                      tail.tolist())):
        seen = edges - ({(h, q, t), (t, (q + R) % K, h)} if leave_out
                        else set())
        for j in range(len(rules)):
            r = rules.rule(j)
            if r.head == q and r.answer != h and body_holds(
                    seen, h, r.body_type, r.body_node, r.answer, K):
                expected.append((i, r.answer, j))
            # Read backwards: q'(X, h) <= b(X, d) answers (h, q, ?) with
            # every X whose body holds.
            if r.head == (q + R) % K and r.answer == h and \
                    r.body_node != ANY and r.body_type < K:
                expected += [(i, x, j) for x in range(data.num_nodes)
                             if body_holds(seen, x, r.body_type,
                                           r.body_node, h, K)]
    assert found == sorted(expected)
    backwards = [(i, x, j) for i, x, j in found
                 if rules.rule(j).head != relation[i]]
    assert len(backwards) > 0 and len(found) > len(backwards)


def citizens_kg():
    # Everyone with a `lives` edge is a citizen of entity 9; no path from a
    # new person 8 (who lives somewhere) reaches 9.
    lives = [(p, 4 + p % 2) for p in range(4)] + [(8, 4)]
    citizen = [(p, 9) for p in range(4)]
    edges = torch.tensor([[h for h, _ in lives + citizen],
                          [t for _, t in lives + citizen]])
    relation = torch.tensor([0] * len(lives) + [1] * len(citizen))
    return from_edge_index(edges, relation, num_nodes=10, num_relations=2,
                           relation_names=['lives', 'citizen'],
                           entity_names=[f'e{i}' for i in range(10)])


def test_constant_rule_ranks_what_no_path_reaches():
    data = citizens_kg()
    plain = AppliedRules.mine(data, num_steps=2, min_support=1,
                              constants=False)
    applied = AppliedRules.mine(data, num_steps=2, min_support=1)
    query = (data, torch.tensor([8]), torch.tensor([1]))
    assert plain(*query)[0, 9] == plain(*query)[0, 7]
    score = applied(*query)[0]
    assert (score[9] > score[torch.arange(10) != 9]).all()
    # citizen(X, e9) <= lives(X, A): 4 of the 5 people with a `lives` edge.
    rules, _ = applied.explain(data, 8, 1, 9)
    texts = [rule.format(data.relation_names, data.entity_names)
             for rule in rules]
    assert texts[0] == 'citizen(X,e9) <= lives(X,A)  %.3g' % (4 / 205)
    assert 'citizen(X,e9) <= true  %.3g' % (4 / 209) in texts
    assert applied.constant_rules_of(1)[0].confidence == pytest.approx(
        4 / 205)


def test_constant_rules_travel_and_stay_on_their_graph():
    data = random_kg(1)
    applied = AppliedRules.mine(data, num_steps=2, min_support=1)
    again = AppliedRules.from_payload(applied.to_payload())
    head, relation = torch.arange(4), torch.tensor([0, 1, 2, 3])
    assert torch.equal(applied(data, head, relation),
                       again(data, head, relation))
    assert torch.equal(applied.double()(data, head, relation),
                       applied(data, head, relation))
    bigger = from_edge_index(data.train_edge_index, data.train_edge_type,
                             num_nodes=data.num_nodes + 1,
                             num_relations=data.num_relations)
    with pytest.raises(ValueError, match='without_constants'):
        applied(bigger, head, relation)
    plain = AppliedRules.mine(data, num_steps=2, min_support=1,
                              constants=False)
    assert torch.equal(applied.without_constants()(bigger, head, relation),
                       plain(bigger, head, relation))
    # The ranks of held-out triples are those of the rules' own scores,
    # counted by hand.
    gen = torch.Generator().manual_seed(5)
    test = torch.stack([torch.randint(0, 9, (12, ), generator=gen),
                        torch.randint(0, 2, (12, ), generator=gen),
                        torch.randint(0, 9, (12, ), generator=gen)])
    known = {tuple(t) for t in all_triples(data).t().tolist()}
    test = torch.tensor([t for t in dict.fromkeys(map(tuple, test.t()
                                                      .tolist()))
                         if t not in known]).t()
    held_out = from_edge_index(data.train_edge_index, data.train_edge_type,
                               num_nodes=9, num_relations=2, splits={
                                   'facts': split_triples(data, 'facts'),
                                   'test': test})
    ranks = compute_ranks(applied, held_out, 'test').ranks['realistic']
    assert torch.equal(ranks, brute_force_ranks(applied, held_out))
    assert not torch.equal(ranks, compute_ranks(
        plain, held_out, 'test').ranks['realistic'])  # the constants count


def test_keys_are_the_best_of_path_and_constant_rules():
    data = random_kg(4)
    R, N = data.num_relations, data.num_nodes
    graph = resolve_graph(data, num_relations=R)
    every_path = AppliedRules.mine(data, num_steps=2, min_support=1,
                                   num_keys=64, constants=False)
    applied = AppliedRules.mine(data, num_steps=2, min_support=1,
                                num_keys=3)
    head = torch.arange(N).repeat_interleave(2 * R)
    relation = torch.arange(2 * R).repeat(N)
    paths = every_path.rule_keys(graph, head, relation)
    assert (paths[..., -1] == 0).all()  # 64 keys hold every path rule
    query, node, confidence = applied.constant_rules.fire(
        graph, head, relation)
    keys = applied.rule_keys(graph, head, relation)
    for b in range(head.numel()):
        for y in range(N):
            mine = confidence[(query == b) & (node == y)].tolist()
            every = sorted(paths[b, y][paths[b, y] > 0].tolist() + mine,
                           reverse=True)[:3]
            expected = torch.tensor(every + [0.] * (3 - len(every)),
                                    dtype=torch.double)
            assert torch.equal(keys[b, y], expected)


def test_counts_under_a_time_limit_are_on_the_scale_of_a_sample():
    # A limit passed at once: one chunk of 120 queries (in a seeded order) is
    # joined; the rules with a body are among the exact ones, answer at
    # least 2 of the joined queries (and no more than in all), and their
    # groundings are the exact ones scaled by 120 / the candidate queries
    # (at least the support); the empty-body rules stay exact.
    data = random_kg(1, N=30, R=3, E=400)
    full = constant_rule_counts(data)
    sample = constant_rule_counts(data, chunk_size=120, time_limit=1e-9,
                                  seed=3, min_support=2)
    K, N = 6, 30

    def keys(counts):
        body = (counts.relation * (K + 1) + counts.body_type) * (N + 1) + \
            counts.body_node + 1
        return body * N + counts.answer

    at = torch.searchsorted(keys(full), keys(sample))
    assert torch.equal(keys(full)[at], keys(sample))
    empty = sample.body_type == K
    assert torch.equal(sample.support[empty], full.support[at][empty])
    assert torch.equal(sample.groundings[empty], full.groundings[at][empty])
    # The queries that can support a rule with a body (their (relation,
    # answer) shared by min_support = 2 queries) are the ones sampled.
    from collections import Counter
    queries = known_queries(data)
    shared = Counter((q, c) for _, q, c in queries)
    candidates = sum(shared[q, c] >= 2 for _, q, c in queries)
    assert 120 < candidates < len(queries)
    support = sample.support[~empty]
    assert bool((support >= 2).all())
    assert bool((support <= full.support[at][~empty]).all())
    scaled = torch.round(full.groundings[at][~empty] * 120 / candidates)
    assert torch.equal(sample.groundings[~empty],
                       torch.maximum(scaled.long(), support))
    assert bool((support < full.support[at][~empty]).any())
    assert 0 < int((~empty).sum()) < int((full.body_type < K).sum())


def test_pruned_and_chunked_counts_equal_the_full_ones(monkeypatch):
    # min_support = 2 leaves out the queries whose (relation, answer) no
    # other query shares, and small join parts merge their counts: the same
    # rules and counts as the full join, filtered.
    import pyg_degreembed.interpret.constant_rules as module
    data = random_kg(2, N=30, R=3, E=400)
    full = constant_rule_counts(data)
    monkeypatch.setattr(module, 'JOIN_ROWS', 7)
    chunked = constant_rule_counts(data, chunk_size=5)
    for a, b in zip(full, chunked):
        assert torch.equal(a, b)
    pruned = constant_rule_counts(data, min_support=2)
    keep = full.support >= 2
    for a, b in zip(full, pruned):
        assert torch.equal(a[keep], b)


def test_constant_rules_in_anyburls_syntax():
    # The KG above: citizen(X,e9) <= lives(X,A) has 5 body groundings (5
    # people live somewhere), 4 correct; the empty-body rule is left out.
    from pyg_degreembed.interpret.anyburl import anyburl_lines
    data = citizens_kg()
    names = data.entity_names
    applied = AppliedRules.mine(data, num_steps=2, min_support=1)
    lines = anyburl_lines(applied, data.relation_names, entity_names=names)
    assert f'5\t4\t{4 / 5!r}\tcitizen(X,e9) <= lives(X,A)' in lines
    assert not any(line.endswith('<= ') or 'true' in line for line in lines)
    # Inverse queries' rules read r(c,Y): who is a citizen of e9 lives in
    # e4 or e5 ...
    constant = [line.split('\t')[3] for line in lines
                if 'X,Y' not in line and 'Y,X' not in line]
    assert all(rule.startswith(('citizen(X,e', 'citizen(e', 'lives(X,e',
                                'lives(e')) for rule in constant)
    assert any(rule.startswith('lives(e') and ',Y) <= ' in rule
               for rule in constant)
    # Each constant line's counts are the rule's (support / groundings).
    expected = {(r.head, r.body_type, r.body_node, r.answer)
                for r in (applied.constant_rules.rule(i)
                          for i in range(len(applied.constant_rules)))
                if r.body_type < 4}
    assert len(constant) == len(expected)
    # The path rules alone without entity names.
    assert len(anyburl_lines(applied, data.relation_names)) == \
        len(lines) - len(constant)
