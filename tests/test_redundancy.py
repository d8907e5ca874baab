r"""Redundant rules (SAFRAN's non-redundant noisy-or): overlaps, clusters
and the scores, against brute-force definitions and a hand-worked
example."""
import math

import pytest
import torch

from pyg_degreembed import AppliedRules, RuleReasoner, resolve_graph
from pyg_degreembed.data.kg import graph_queries
from pyg_degreembed.interpret import redundancy
from pyg_degreembed.interpret.paths import pattern_of
from pyg_degreembed.interpret.redundancy import (RuleOverlap, rule_overlap,
                                                 sampled_heads)
from pyg_degreembed.training.checkpoint import CheckpointError, _check_rules

from conftest import dense_operators
from test_applied_rules import lexicographic_ranks, random_kg


def predictions(data, applied, heads):
    # Each rule's predictions (x, y), x != y, for the heads of its query
    # relation, by dense adjacency matrices.
    R, N = data.num_relations, data.num_nodes
    graph = resolve_graph(data, num_relations=R)
    M = dense_operators(torch.stack([graph.edge_src, graph.edge_dst]),
                        graph.edge_type, N, 2 * R)
    out = []
    for q in range(2 * R):
        for rule in applied.rules(q):
            reached = M[rule.body[0]]
            for k in rule.body[1:]:
                reached = reached @ M[k]
            out.append((q, rule, {(x, y) for x in heads.get(q, ())
                                  for y in range(N)
                                  if reached[x, y] > 0 and x != y}))
    return out


def union_find_clusters(num_rules, pairs):
    parent = list(range(num_rules))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j in pairs:
        a, b = root(i), root(j)
        parent[max(a, b)] = min(a, b)
    return [root(i) for i in range(num_rules)]


@pytest.mark.parametrize('seed', [0, 3])
def test_overlap_and_clusters_equal_their_definitions(seed):
    data = random_kg(seed=seed, N=12, R=3, E=60)
    applied = AppliedRules.mine(data, num_steps=2, min_support=1,
                                constants=False)
    N = data.num_nodes
    # Every head of every query relation (more heads than there are).
    head, relation = sampled_heads(graph_queries(data), N, 100)
    heads = {}
    for x, q in zip(head.tolist(), relation.tolist()):
        heads.setdefault(q, set()).add(x)
    queries = graph_queries(data)
    assert heads == {q: set(queries[0, queries[1] == q].tolist())
                     for q in queries[1].unique().tolist()}
    overlap = rule_overlap(applied, data, num_heads=100, min_jaccard=0.)
    # Rule i of the brute force is rule i of rule_key: both by relation,
    # then by pattern id (rules() sorts by confidence: order by key).
    P = applied._num_patterns
    found = predictions(data, applied, heads)
    index = {}
    for q, rule, predicted in found:
        key = q * P + sum((k + 1) * (2 * data.num_relations + 1) ** (
            len(rule.body) - 1 - i) for i, k in enumerate(rule.body))
        index[int((applied.rule_key == key).nonzero())] = (q, predicted)
    expected = {}
    for i, (q, a) in index.items():
        for j, (q2, b) in index.items():
            if i < j and q == q2 and a & b:
                expected[(i, j)] = len(a & b) / len(a | b)
    got = {tuple(p): float(v) for p, v in zip(overlap.pairs.t().tolist(),
                                              overlap.jaccard)}
    assert expected and got.keys() == expected.keys()
    for pair, value in expected.items():
        assert got[pair] == pytest.approx(value)
    # Clusters: the connected components of the pairs >= the threshold.
    applied._set_overlap(overlap)
    for threshold in (1., 0.5, 0.2):
        linked = [p for p, v in expected.items() if v >= threshold - 1e-12]
        assert applied.clusters(threshold).tolist() == union_find_clusters(
            len(index), linked)


def test_constant_rules_overlap_and_carry_to_rules_of_another_u():
    # With constant rules: each rule's predictions read one (x, q, y) at a
    # time from the rules that explain y for x; the overlap is the Jaccard
    # index of those sets. Rules mined with a larger u (fewer constant rules)
    # take the overlaps of the rules they hold, by identity.
    data = random_kg(seed=2, N=12, R=3, E=60)
    applied = AppliedRules.mine(data, num_steps=2, min_support=1, unseen=1.)
    assert len(applied.constant_rules) > 0
    applied.measure_overlap(data, num_heads=100, min_jaccard=0.)
    graph = resolve_graph(data, num_relations=data.num_relations)
    head, relation = sampled_heads(graph_queries(data), data.num_nodes,
                                   100)
    predicted = {}
    for x, q in zip(head.tolist(), relation.tolist()):
        for y in range(data.num_nodes):
            for _, i in applied._reaching(graph, x, q, y):
                predicted.setdefault(i, set()).add((x, q, y))
    expected = {(i, j): len(predicted[i] & predicted[j]) /
                len(predicted[i] | predicted[j])
                for i in predicted for j in predicted
                if i < j and predicted[i] & predicted[j]}
    got = {tuple(p): float(v) for p, v in zip(
        applied.overlap.pairs.t().tolist(), applied.overlap.jaccard)}
    M = applied.rule_key.numel()
    assert any(j >= M for _, j in expected)  # constant rules among them
    assert got.keys() == expected.keys()
    assert all(got[p] == pytest.approx(v) for p, v in expected.items())
    fewer = AppliedRules.mine(data, num_steps=2, min_support=1,
                              unseen=20000.)
    assert len(fewer.constant_rules) < len(applied.constant_rules)
    fewer.take_overlap(applied)
    source = {tuple(applied._identities()[p].tolist()): float(v) for p, v in
              zip(applied.overlap.pairs.t(), applied.overlap.jaccard)}
    carried = {tuple(fewer._identities()[p].tolist()): float(v) for p, v in
               zip(fewer.overlap.pairs.t(), fewer.overlap.jaccard)}
    held = set(fewer._identities().tolist())
    assert carried == {p: v for p, v in source.items()
                       if p[0] in held and p[1] in held}
    # Without the constant rules, the path rules' overlaps stay.
    paths = applied.without_constants().overlap
    assert {tuple(p) for p in paths.pairs.t().tolist()} == \
        {p for p in got if p[1] < M}


def test_a_query_with_too_many_pairs_keeps_a_share_of_its_answers(
        monkeypatch):
    # With a tiny pair limit each query keeps some answers, the same for all
    # its rules: the indices are those of the kept predictions, so two rules
    # with equal predictions still overlap exactly 1.
    data = random_kg(seed=0, N=12, R=3, E=60)
    applied = AppliedRules.mine(data, num_steps=2, min_support=1,
                                constants=False)
    full = rule_overlap(applied, data, num_heads=100, min_jaccard=0.)
    monkeypatch.setattr(redundancy, 'MAX_QUERY_PAIRS', 3)
    bounded = rule_overlap(applied, data, num_heads=100, min_jaccard=0.)
    assert bounded.pairs.size(1) < full.pairs.size(1)
    same = {tuple(p) for p, v in zip(full.pairs.t().tolist(), full.jaccard)
            if v == 1}
    kept = {tuple(p): float(v) for p, v in zip(bounded.pairs.t().tolist(),
                                               bounded.jaccard)}
    assert all(kept[p] == 1 for p in same if p in kept)


def hand_worked():
    # Query r0 from entity 0. Rules (1,) and (2,) predict the same answers
    # {1, 2} (redundant: Jaccard 1), rule (3,) predicts {2, 3}
    # (Jaccard 1/3 with each), rule (4,) predicts {3}.
    edge_index = torch.tensor([[0, 0, 0, 0, 0, 0, 0], [1, 2, 1, 2, 2, 3, 3]])
    edge_type = torch.tensor([1, 1, 2, 2, 3, 3, 4])
    rules = dict(num_relations=5, num_steps=1,
                 relation=torch.zeros(4, dtype=torch.long),
                 pattern=torch.tensor([1, 2, 3, 4]) + 1,
                 confidence=torch.tensor([0.5, 0.4, 0.3, 0.6]),
                 aggregation='noisy-or', num_keys=10)
    overlap = RuleOverlap(torch.tensor([[0, 0, 1, 2], [1, 2, 2, 3]]),
                          torch.tensor([1., 1 / 3, 1 / 3, 0.5]))
    return edge_index, edge_type, rules, overlap


def test_redundant_rules_counted_once_on_a_hand_worked_example():
    # Without clusters: 1 <- 0.5, 0.4 (0.7); 2 <- 0.5, 0.4, 0.3 (0.79);
    # 3 <- 0.3, 0.6 (0.72): 2 > 3 > 1. Redundancy 0.9: rules 0 and 1 are
    # one cluster, counted by 0.5: 1 = 0.5; 2 = 1 - 0.5 * 0.7 = 0.65;
    # 3 = 0.72: 3 > 2 > 1. Redundancy 0.3: {0, 1, 2, 3} one cluster: each
    # answer by its best rule, 3 (0.6) > 1 = 2 (0.5; tie broken by the
    # next rules, whichever cluster: 2's 0.4 and 0.3 beat 1's 0.4).
    edge_index, edge_type, rules, overlap = hand_worked()
    head, relation = torch.tensor([0]), torch.tensor([0])
    graph = resolve_graph(edge_index, edge_type, 5, num_relations=5)

    def order(redundancy):
        applied = AppliedRules(**rules, overlap=overlap,
                               redundancy=redundancy)
        scores = applied(graph, head, relation)[0]
        return sorted((1, 2, 3), key=lambda e: -float(scores[e])), applied

    assert order(None)[0] == [2, 3, 1]
    ranked, applied = order(0.9)
    assert ranked == [3, 2, 1]
    keys = applied.rule_keys(graph, head, relation)[0]
    assert (1 - (1 - keys).prod(dim=-1))[[1, 2, 3]].tolist() == \
        pytest.approx([0.5, 0.65, 0.72])
    # The evidence shown is what the score counts: 2's parts are rules 0
    # (0.5, its cluster's best) and 2 (0.3), not rule 1.
    evidence = applied.evidence(graph, 0, 0, 2)
    assert [p for _, p in evidence.parts] == pytest.approx([0.5, 0.3])
    assert evidence.score == pytest.approx(0.65)
    assert sum(evidence.weights) == pytest.approx(-math.log(0.35))
    ranked, applied = order(0.3)
    assert ranked[0] == 3
    assert applied.clusters(0.3).tolist() == [0, 0, 0, 0]
    # Kept by a payload; refused without an overlap or outside (0, 1].
    again = AppliedRules.from_payload(order(0.9)[1].to_payload())
    assert again.redundancy == 0.9 and torch.equal(
        again(graph, head, relation), order(0.9)[1](graph, head, relation))
    with pytest.raises(ValueError, match='give an .overlap.'):
        AppliedRules(**rules, redundancy=0.5)
    for bad in (0, 1.5, True, '0.5'):
        with pytest.raises(ValueError, match="'redundancy' must be"):
            AppliedRules(**rules, overlap=overlap, redundancy=bad)


def test_scores_under_redundancy_order_candidates_by_cluster_noisy_or():
    # On a random KG, each candidate's noisy-or over the best rule of each
    # cluster that reaches it (brute force) orders it as forward() does,
    # and score_with_unseen gives the same order for each redundancy.
    data = random_kg(seed=1, N=12, R=3, E=60)
    applied = AppliedRules.mine(data, num_steps=2, min_support=1,
                                unseen=7., constants=False,
                                aggregation='noisy-or', num_keys=50,
                                redundancy=0.5)
    N, R = data.num_nodes, data.num_relations
    graph = resolve_graph(data, num_relations=R)
    M = dense_operators(torch.stack([graph.edge_src, graph.edge_dst]),
                        graph.edge_type, N, 2 * R)
    cluster = applied.clusters(0.5)
    P = applied._num_patterns
    head = torch.arange(N).repeat_interleave(2 * R)
    relation = torch.arange(2 * R).repeat(N)
    scores = applied(graph, head, relation)
    for b in range(head.numel()):
        q, x = int(relation[b]), int(head[b])
        best = [{} for _ in range(N)]
        for i in (applied.rule_key // P == q).nonzero().view(-1).tolist():
            body = pattern_of(int(applied.rule_key[i]) % P, 2 * R)
            reached = M[body[0]][x]
            for k in body[1:]:
                reached = reached @ M[k]
            for y in (reached > 0).nonzero().view(-1).tolist():
                if y != x:
                    c = int(cluster[i])
                    best[y][c] = max(best[y].get(c, 0.),
                                     float(applied.confidence[i]))
        noisy = torch.tensor([1 - math.prod(1 - v for v in d.values())
                              for d in best], dtype=torch.double)
        top = torch.tensor([sorted(d.values(), reverse=True)[:3] +
                            [0.] * (3 - min(len(d), 3)) for d in best],
                           dtype=torch.double)
        order = torch.cat([noisy.round(decimals=12).view(-1, 1), top], 1)
        assert torch.equal(lexicographic_ranks(order),
                           lexicographic_ranks(scores[b].view(-1, 1)))
    # Under several redundancies at once: each as forward() alone (the
    # rules' own u, a model breaking the ties alike).
    applied.tie_break = RuleReasoner(R, num_steps=2)
    both = applied.score_with_unseen(
        graph, head, relation, [7.],
        aggregations=[('noisy-or', 50, 0., 0.5), ('noisy-or', 50, 0.)])
    for scores, threshold in zip(both[:2], (0.5, None)):
        applied.redundancy = threshold
        alone = applied(graph, head, relation)
        for b in range(head.numel()):
            assert torch.equal(lexicographic_ranks(alone[b].view(-1, 1)),
                               lexicographic_ranks(scores[b].view(-1, 1)))


def test_a_checkpoint_with_a_bad_overlap_is_refused():
    edge_index, edge_type, rules, overlap = hand_worked()
    applied = AppliedRules(**rules, overlap=overlap, redundancy=0.5)
    payload = applied.to_payload()
    for change, field in (({'overlap_pairs': overlap.pairs + 3},
                           'overlap_pairs'),
                          ({'overlap_jaccard': overlap.jaccard * 4},
                           'overlap_jaccard'),
                          ({'overlap_pairs': None, 'overlap_jaccard': None},
                           'redundancy')):
        with pytest.raises(CheckpointError, match=field):
            _check_rules({**payload, **change}, 5, 5, 'x.pt')
    _check_rules(payload, 5, 5, 'x.pt')


def test_shortened_rules_cluster_among_themselves():
    # Cut at 2 edges, rules of up to 3 edges keep the overlaps between the
    # rules kept: their clusters are those of clusters(_, 2), and
    # score_with_unseen scores the cut as the shortened rules do (a longer
    # rule linking two shorter ones no longer joins them).
    data = random_kg(seed=1, N=12, R=3, E=60)
    R = data.num_relations
    applied = AppliedRules.mine(data, num_steps=3, min_support=1, unseen=7.,
                                aggregation='noisy-or', num_keys=50,
                                redundancy=0.3,
                                tie_break=RuleReasoner(R, num_steps=2))
    kept = applied.rule_length <= 2
    index = kept.long().cumsum(0) - 1
    cut = applied.shortened(2)
    assert cut.redundancy == 0.3
    for name in ('relation', 'pattern', 'confidence'):
        assert torch.equal(cut.to_payload()[name],
                           applied.to_payload()[name][kept])
    # The same partition of the rules kept (each cluster named by its
    # smallest index, in each numbering).
    assert torch.equal(index[applied.clusters(0.3, 2)[:kept.numel()][kept]],
                       cut.clusters(0.3)[:cut.rule_key.numel()])
    assert not torch.equal(applied.clusters(0.3, 2), applied.clusters(0.3))
    graph = resolve_graph(data, num_relations=R)
    N = data.num_nodes
    head = torch.arange(N).repeat_interleave(2 * R)
    relation = torch.arange(2 * R).repeat(N)
    scores = applied.score_with_unseen(
        graph, head, relation, [7.], max_lengths=[2],
        aggregations=[('noisy-or', 50, 0., 0.3)])
    assert torch.equal(scores[0], cut(graph, head, relation))
