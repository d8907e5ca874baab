import itertools

import pytest
import torch

from pyg_degreembed import TypedGraph, from_edge_index
from pyg_degreembed.interpret import paths as paths_module
from pyg_degreembed.interpret.paths import (expand_paths, path_counts,
                                            pattern_of)
from pyg_degreembed.interpret.saturation import saturation, saturation_table

from conftest import dense_operators


def brute_force_counts(edge_index, edge_type, N, K, triple, L, R):
    h, q, t = triple
    keep = ~(((edge_index[0] == h) & (edge_type == q) & (edge_index[1] == t))
             | ((edge_index[0] == t) & (edge_type == (q + R) % K) &
                (edge_index[1] == h)))
    M = dense_operators(edge_index[:, keep], edge_type[keep], N, K)
    out = {}
    for length in range(1, L + 1):
        for pattern in itertools.product(range(K), repeat=length):
            P = M[pattern[0]]
            for k in pattern[1:]:
                P = P @ M[k]
            if P[h, t] > 0:
                out[pattern] = int(P[h, t])
    return out


@pytest.mark.parametrize('L', [1, 2, 3])
def test_path_counts_equal_dense_products(random_graph, L):
    edge_index, edge_type, N, K = random_graph
    R = K // 2
    graph = TypedGraph(*random_graph)
    E = edge_type.numel() // 2
    triples = torch.stack([edge_index[0, :E], edge_type[:E],
                           edge_index[1, :E]])
    trip, pattern, count = path_counts(graph, triples, L, R, chunk_size=7)
    for i in range(E):
        got = {pattern_of(int(p), K): int(c)
               for p, c in zip(pattern[trip == i], count[trip == i])}
        expected = brute_force_counts(edge_index, edge_type, N, K,
                                      triples[:, i].tolist(), L, R)
        assert got == expected


def test_expand_paths_states_are_distinct_sorted_and_counted(random_graph):
    # query_paths reads each pair's paths as one range of the states: they
    # must come sorted by (walk, node, pattern), each once, with the count
    # of the dense product of the pattern's adjacency matrices.
    edge_index, edge_type, N, K = random_graph
    M = dense_operators(edge_index, edge_type, N, K)
    start = torch.tensor([3, 0, 7, 3])
    for step, (walk, node, pattern, count) in enumerate(
            expand_paths(TypedGraph(*random_graph), start, 3), 1):
        key = (walk * N + node) * (K + 1)**step + pattern
        assert bool((key[1:] > key[:-1]).all())
        got = {(int(w), int(v), pattern_of(int(p), K)): int(c)
               for w, v, p, c in zip(walk, node, pattern, count)}
        expected = {}
        for pat in itertools.product(range(K), repeat=step):
            product = M[pat[0]]
            for k in pat[1:]:
                product = product @ M[k]
            for w, x in enumerate(start.tolist()):
                for v in product[x].nonzero().view(-1).tolist():
                    expected[w, v, pat] = int(product[x, v])
        assert got == expected


def test_expanding_in_parts_reaches_the_same_states_in_bounded_parts(
        random_graph, monkeypatch):
    # expand_paths_in_parts: each step's states split into parts of at most
    # max_walks out-edges (or one state) and each part expanded alone;
    # merged over the parts, the states of expand_paths; each part sorted
    # and distinct.
    graph = TypedGraph(*random_graph)
    N, K = graph.num_nodes, graph.num_edge_types
    start = torch.tensor([3, 0, 7, 3, 5])
    want = [{(int(w), int(v), int(p)) for w, v, p in zip(walk, node, pattern)}
            for walk, node, pattern, _ in expand_paths(graph, start, 3)]
    out_deg = graph.node_ptr[1:] - graph.node_ptr[:-1]
    expanded = []  # (states, their out-edges) of each expansion
    real_step = paths_module._expand_step

    def step(graph, state, *args):
        expanded.append((state[1].numel(), int(out_deg[state[1]].sum())))
        return real_step(graph, state, *args)

    monkeypatch.setattr(paths_module, '_expand_step', step)
    for max_walks in (1, 4, 10**9):
        expanded.clear()
        got = [set() for _ in range(3)]
        wholes = set()
        for level, walk, node, pattern, whole in \
                paths_module.expand_paths_in_parts(graph, start, 3, 3,
                                                   max_walks=max_walks):
            wholes.add(whole)
            key = (walk * N + node) * (K + 1)**level + pattern
            assert bool((key[1:] > key[:-1]).all())
            got[level - 1] |= {(int(w), int(v), int(p))
                               for w, v, p in zip(walk, node, pattern)}
        assert got == want
        assert all(states == 1 or edges <= max_walks
                   for states, edges in expanded)
        assert (len(expanded) == 3) == (max_walks == 10**9) == \
            (wholes == {True})


def test_hand_worked_saturation():
    # Relations: 0 = sister, 1 = father, 2 = aunt.
    # aunt(x, y) for (a, c) and (a, d); paths a -sister-> b -father-> c and
    # a -sister-> b -father-> d, plus a second path a -sister-> e
    # -father-> d.  A third aunt triple (f, g) has no path at all.
    a, b, c, d, e, f, g = range(7)
    triples = torch.tensor([[a, 0, b], [b, 1, c], [b, 1, d], [a, 0, e],
                            [e, 1, d], [a, 2, c], [a, 2, d], [f, 2, g]]).t()
    data = from_edge_index(triples[[0, 2]], triples[1], num_nodes=7,
                           num_relations=3)
    sats = {(s.relation, s.pattern): s
            for s in saturation(data, 2, inverse=False)}
    rule = sats[(2, (0, 1))]
    assert rule.macro == pytest.approx(2 / 3)  # 2 of 3 aunt triples
    # (a, c): 1 of 1 path; (a, d): 2 of 2 paths; (f, g): 0 paths -> 0.
    assert rule.micro == pytest.approx((1 + 1 + 0) / 3)
    assert rule.comprehensive == pytest.approx(4 / 9)
    # Inverse edges add no other path of length <= 2 from a to c or d.
    sats = {(s.relation, s.pattern): s
            for s in saturation(data, 2, inverse=True)}
    assert sats[(2, (0, 1))].micro == pytest.approx(2 / 3)
    table = saturation_table(saturation(data, 2, inverse=False),
                             ['sister', 'father', 'aunt'])
    assert '| aunt(X,Y) <= sister(X,Z), father(Z,Y) | 0.67 | 0.67 | 0.44 |' \
        in table


def test_bad_graph_option(toy_kg):
    with pytest.raises(ValueError, match="'graph'"):
        saturation(toy_kg, graph='test')


def test_family_reproduces_the_papers_tables_2_and_6():
    from pyg_degreembed import bundled_path, load_neural_lp
    data = load_neural_lp(bundled_path('family'))
    names = data.relation_names
    paper = {  # (query, body): (macro, micro, comprehensive)
        ('brother', ('brother', 'brother')): (.86, .14, .12),
        ('brother', ('nephew', 'uncle')): (.77, .13, .10),
        ('brother', ('brother', 'sister')): (.81, .13, .10),
        ('brother', ('son', 'father')): (1.0, .08, .08),
        ('brother', ('nephew', 'aunt')): (.68, .11, .08),
        ('brother', ('son', 'mother')): (.98, .07, .07),
        ('nephew', ('nephew', 'brother')): (.86, .25, .21),
        ('nephew', ('nephew', 'sister')): (.79, .22, .17),
        ('nephew', ('brother', 'nephew')): (.79, .21, .16),
    }
    # The paper's convention: every split is the graph, no inverse edges.
    sats = saturation(data, 2, graph='all', inverse=False,
                      relations=[names.index('brother'),
                                 names.index('nephew')])
    got = {(names[s.relation], tuple(names[k] for k in s.pattern)):
           (s.macro, s.micro, s.comprehensive) for s in sats}
    for key, values in paper.items():
        assert got[key] == pytest.approx(values, abs=0.005 + 1e-9), key


@pytest.mark.parametrize('L', [1, 2, 3])
def test_walk_chunks_bound_the_walks(random_graph, L):
    from pyg_degreembed.interpret.paths import walk_chunks
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    M = dense_operators(edge_index, edge_type, N, K).sum(0)
    walks = torch.linalg.matrix_power(M, L).sum(1)  # walks out of each node
    start = torch.tensor([3, 0, 11, 5, 5, 7, 2])
    budget = float(walks.max()) * 1.5
    chunks = walk_chunks(graph, start, L, max_size=3, max_walks=budget)
    assert [b for b, _ in chunks] == [0] + [e for _, e in chunks[:-1]]
    assert chunks[-1][1] == start.numel()
    for begin, end in chunks:
        assert 0 < end - begin <= 3
        assert walks[start[begin:end]].sum() <= budget or end - begin == 1
        # Maximal: the next entity would not have fitted.
        if end < start.numel() and end - begin < 3:
            assert walks[start[begin:end + 1]].sum() > budget


def test_rule_counts_do_not_depend_on_the_chunks(monkeypatch):
    import pyg_degreembed.interpret.paths
    from pyg_degreembed.interpret.applied_rules import rule_counts

    from conftest import chain_kg
    data = chain_kg()
    expected = rule_counts(data, 2)
    monkeypatch.setattr(pyg_degreembed.interpret.paths, 'MAX_WALKS', 5)
    for a, b in zip(rule_counts(data, 2), expected):
        assert torch.equal(a, b)
