r"""query_paths (paths between the ends of training queries, each without
its own edges, from one expansion per entity) against path_counts, which
expands every query separately on the graph without its edges."""
import itertools

import pytest
import torch

from pyg_degreembed import resolve_graph
from pyg_degreembed.interpret import query_paths as query_paths_module
from pyg_degreembed.interpret.paths import path_counts
from pyg_degreembed.interpret.query_paths import query_paths


def dense_multigraph(seed, N=7, R=2, E=40):
    # A typed graph with self-loops and parallel edges, some of the same
    # type (two copies of an edge), and its queries: every edge x -> y,
    # x != y, in both directions.
    gen = torch.Generator().manual_seed(seed)
    triples = torch.stack([torch.randint(0, N, (E, ), generator=gen),
                           torch.randint(0, R, (E, ), generator=gen),
                           torch.randint(0, N, (E, ), generator=gen)])
    triples = torch.cat([triples, triples[:, :5]], dim=1)
    graph = resolve_graph(triples[[0, 2]], triples[1], num_nodes=N,
                          num_relations=R)
    h, r, t = triples
    queries = torch.stack([torch.cat([h, t]), torch.cat([r, r + R]),
                           torch.cat([t, h])])
    return graph, torch.unique(queries[:, queries[0] != queries[2]], dim=1)


def per_query(graph, queries, L, R):
    # (query, pattern) -> paths avoiding its edges, expanding each query on
    # its own.
    trip, pattern, count = path_counts(graph, queries, L, R)
    return dict(zip(zip(trip.tolist(), pattern.tolist()), count.tolist()))


@pytest.mark.parametrize('seed', range(4))
@pytest.mark.parametrize('L', [1, 2, 3])
def test_query_paths_against_per_query_expansion(seed, L):
    graph, queries = dense_multigraph(seed)
    R = graph.num_edge_types // 2
    lo, hi = graph.edge_range(*queries)
    assert int((hi - lo).max()) >= 2  # some edges have copies
    found = query_paths(graph, queries, L, R, chunk_size=2)
    keys = list(zip(found.query.tolist(), found.pattern.tolist()))
    assert len(set(keys)) == len(keys)
    avoiding = {k: v for k, v in zip(keys, found.avoiding.tolist()) if v}
    assert avoiding == per_query(graph, queries, L, R)
    # The paths in the whole graph: at length 1, the edges x -> y.
    if L == 1:
        direct = {(j, int(k) + 1): 0 for j in range(queries.size(1))
                  for k in range(2 * R)}
        for j, (x, y) in enumerate(queries[[0, 2]].t().tolist()):
            for k in graph.edge_type[(graph.edge_src == x) &
                                     (graph.edge_dst == y)].tolist():
                direct[(j, k + 1)] += 1
        assert dict(zip(keys, found.paths.tolist())) == \
            {k: v for k, v in direct.items() if v}
    assert (found.avoiding <= found.paths).all()
    assert (found.avoiding >= 0).all()


def test_paths_through_the_own_edge_are_subtracted_once_each():
    # x -q-> y -q'-> x -q-> y uses the query's edge twice and its inverse
    # once; with two copies of the edge it is 2 * 2 * 2 paths of pattern
    # (q, q', q), none of which avoids them.
    graph = resolve_graph(torch.tensor([[0, 0], [1, 1]]),
                          torch.tensor([0, 0]), num_nodes=2, num_relations=1)
    queries = torch.tensor([[0], [0], [1]])
    found = query_paths(graph, queries, 3, 1)
    q, inverse = 0, 1
    got = dict(zip(found.pattern.tolist(), zip(found.paths.tolist(),
                                               found.avoiding.tolist())))
    assert got == {pattern_id([q]): (2, 0),
                   pattern_id([q, inverse, q]): (8, 0)}


def pattern_id(edge_types, K=2):
    return sum((k + 1) * (K + 1)**(len(edge_types) - 1 - i)
               for i, k in enumerate(edge_types))


@pytest.mark.parametrize('seed', range(3))
@pytest.mark.parametrize('dense', [True, False])
def test_pairs_each_pattern_joins_against_matrix_products(
        seed, dense, monkeypatch):
    # The bodies' pairs x != y, counted in a dense array or by sorting,
    # against boolean products of the typed adjacency matrices.
    if not dense:
        monkeypatch.setattr(query_paths_module, 'MAX_DENSE_PATTERNS', 0)
    graph, queries = dense_multigraph(seed)
    K, N, L = graph.num_edge_types, graph.num_nodes, 3
    found = query_paths(graph, queries, L, K // 2)
    adjacency = torch.zeros(K, N, N)
    adjacency[graph.edge_type, graph.edge_src, graph.edge_dst] = 1
    off_diagonal = ~torch.eye(N, dtype=torch.bool)
    expected = {}
    for length in range(1, L + 1):
        for types in itertools.product(range(K), repeat=length):
            reach = torch.eye(N)
            for k in types:
                reach = ((reach @ adjacency[k]) > 0).float()
            pairs = int(((reach > 0) & off_diagonal).sum())
            if pairs:
                expected[pattern_id(list(types), K)] = pairs
    assert dict(zip(found.body.tolist(), found.body_pairs.tolist())) == \
        expected
