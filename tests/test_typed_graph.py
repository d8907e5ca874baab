import pytest
import torch

from pyg_degreembed import Signals, TypedGraph
from pyg_degreembed.data import typed_graph

from conftest import dense_operators


def random_signals(N, C, density, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(N, C, generator=gen, dtype=torch.double)
    x = x * (torch.rand(N, C, generator=gen) < density)
    return x


def hop_inputs(N, K, C, density, seed):
    # Signals x [N, C], type weights a [K, C], rho [N, K] and self weights
    # s [C], all differentiable.
    x = random_signals(N, C, density).requires_grad_()
    gen = torch.Generator().manual_seed(seed)
    a, rho, s = (torch.rand(*shape, generator=gen, dtype=torch.double,
                            requires_grad=True)
                 for shape in ((K, C), (N, K), (C, )))
    return x, a, rho, s


def assert_same_gradients(grads, expected_grads, x):
    for grad, expected_grad in zip(grads, expected_grads):
        # Entries where x == 0 are not in the signal, so their gradient
        # is not tracked; compare where the signal lives.
        if grad.shape == x.shape:
            mask = x != 0
            grad, expected_grad = grad[mask], expected_grad[mask]
        assert torch.allclose(grad, expected_grad)


def reference_hop(M, x, a, rho, s):
    # x'_{j,c} = sum_{k,i} x_{i,c} a_{k,c} rho_{i,k} M_k[i,j] + s_c x_{j,c}
    out = torch.einsum('kij,ic,kc,ik->jc', M, x, a, rho)
    return out + x * s


@pytest.mark.parametrize('mode', ['dense', 'sparse', 'auto'])
@pytest.mark.parametrize('density', [0.1, 0.9])
def test_one_hop_equals_dense_operators(random_graph, mode, density,
                                        device):
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph).to(device)
    M = dense_operators(edge_index, edge_type, N, K)
    C = 5
    x, a, rho, s = hop_inputs(N, K, C, density, seed=1)

    out = graph.propagate(Signals.from_flat(x.view(-1).to(device), C),
                          a.to(device), rho.to(device), s.to(device),
                          mode=mode).to_dense(N).cpu()
    expected = reference_hop(M, x, a, rho, s)
    assert torch.allclose(out, expected)

    weight = torch.rand(N, C, generator=torch.Generator().manual_seed(3),
                        dtype=torch.double)
    grads = torch.autograd.grad((out * weight).sum(), [x, a, rho, s])
    expected_grads = torch.autograd.grad((expected * weight).sum(),
                                         [x, a, rho, s])
    assert_same_gradients(grads, expected_grads, x)


@pytest.mark.parametrize('pair_cost', [0., 1e9])
@pytest.mark.parametrize('with_rho', [False, True])
def test_grouped_hop_equals_dense_operators(random_graph, with_rho, device,
                                            pair_cost, monkeypatch):
    # Blocks of columns that share their weights, several blocks per group
    # (as RuleReasoner's inference splits them), on a graph with duplicate
    # edges and a self-loop (the diagonal of A_g then adds to an edge); a
    # matrix per group, or one through the (source, type) pairs (in parts
    # of 3 columns).
    monkeypatch.setattr(TypedGraph, 'PAIR_COST', pair_cost)
    monkeypatch.setattr(TypedGraph, 'PAIR_COLUMNS', 3)
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph).to(device)
    M = dense_operators(edge_index, edge_type, N, K)
    x, a, rho, s = (t.detach() for t in hop_inputs(N, K, 3, 0.5, seed=2))
    widths, group = [2, 1, 3, 2], [0, 0, 1, 2]
    blocks = random_signals(N, sum(widths), 0.5, seed=4).split(widths, dim=1)
    out = graph.propagate_groups([b.contiguous().to(device) for b in blocks],
                                 group, a.to(device),
                                 rho.to(device) if with_rho else None,
                                 s.to(device))
    for block, g, got in zip(blocks, group, out):
        columns = block.size(1)
        expected = reference_hop(
            M, block, a[:, [g]].expand(K, columns),
            rho if with_rho else torch.ones(N, K, dtype=torch.double),
            s[[g]].expand(columns))
        assert got.shape == block.shape
        assert torch.allclose(got.cpu(), expected)
    # Without the identity, one block of the last of three groups.
    got, = graph.propagate_groups([blocks[3].contiguous().to(device)], [2],
                                  a.to(device))
    expected = reference_hop(M, blocks[3], a[:, [2]].expand(K, 2),
                             torch.ones(N, K, dtype=torch.double),
                             torch.zeros(2, dtype=torch.double))
    assert torch.allclose(got.cpu(), expected)


def test_grouped_hop_refuses_per_query_rows(random_graph):
    from pyg_degreembed import SourceWeights
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    rho = SourceWeights(torch.rand(2, K), torch.zeros(N, dtype=torch.long),
                        torch.tensor([3]), torch.tensor([1]))
    with pytest.raises(ValueError, match='per-query rows'):
        graph.propagate_groups([torch.rand(N, 1)], [0], torch.rand(K, 1),
                               rho)
    with pytest.raises(ValueError, match="'group'"):
        graph.propagate_groups([torch.rand(N, 1)], [0, 0], torch.rand(K, 1))


@pytest.mark.parametrize('mode', ['dense', 'sparse'])
def test_removed_edges_equal_graph_without_them(random_graph, mode):
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    C = 4
    x = random_signals(N, C, 1.0)
    a = torch.rand(K, C, dtype=torch.double)
    rho = torch.rand(N, K, dtype=torch.double)
    # Column c leaves out all copies of edge number c (edge 0 has
    # duplicates) and, for c = 0, also of edge 1.
    picks = [[0, 1], [2, 2], [7, 7], [40, 40]]
    src, typ, dst = edge_index[0], edge_type, edge_index[1]
    lo, hi = graph.edge_range(src[torch.tensor(picks)],
                              typ[torch.tensor(picks)],
                              dst[torch.tensor(picks)])
    out = graph.propagate(Signals.from_flat(x.view(-1), C), a, rho,
                          removed=(lo, hi), mode=mode).to_dense(N)
    for c, edges in enumerate(picks):
        keep = torch.ones(edge_type.numel(), dtype=torch.bool)
        for e in edges:
            keep &= ~((src == src[e]) & (typ == typ[e]) & (dst == dst[e]))
        M = dense_operators(edge_index[:, keep], edge_type[keep], N, K)
        expected = torch.einsum('kij,i,k,ik->j', M, x[:, c], a[:, c], rho)
        assert torch.allclose(out[:, c], expected)


@pytest.mark.parametrize('mode', ['dense', 'sparse', 'auto'])
@pytest.mark.parametrize('density', [0.1, 0.9])
def test_targets_and_totals_equal_dense_operators(random_graph, mode,
                                                  density):
    # propagate_at: the value at one target per signal and every signal's
    # total, with the left-out edges of the signals, against the dense hop
    # on graphs rebuilt without them (values and gradients).
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    C = 3
    x, a, rho, s = hop_inputs(N, K, C, density, seed=2)
    target = torch.tensor([edge_index[1, 0], 5, 0])
    picks = [[0, 0], [3, 9], [20, 20]]  # edge 0 has duplicates
    src, typ, dst = edge_index[0], edge_type, edge_index[1]
    lo, hi = graph.edge_range(*(t[torch.tensor(picks)] for t in
                                (src, typ, dst)))
    value, total = graph.propagate_at(
        Signals.from_flat(x.view(-1), C), target, a, rho, s,
        removed=(lo, hi), mode=mode)
    expected_value, expected_total = [], []
    for c, edges in enumerate(picks):
        keep = torch.ones(edge_type.numel(), dtype=torch.bool)
        for e in edges:
            keep &= ~((src == src[e]) & (typ == typ[e]) & (dst == dst[e]))
        M = dense_operators(edge_index[:, keep], edge_type[keep], N, K)
        out = reference_hop(M, x[:, c:c + 1], a[:, c:c + 1], rho,
                            s[c:c + 1])[:, 0]
        expected_value.append(out[target[c]])
        expected_total.append(out.sum())
    expected = torch.stack(expected_value), torch.stack(expected_total)
    assert torch.allclose(value, expected[0])
    assert torch.allclose(total, expected[1])

    def loss(v, t):
        return (v * torch.tensor([1., 2., 3.])).sum() - t.sum()

    grads = torch.autograd.grad(loss(value, total), [x, a, rho, s])
    expected_grads = torch.autograd.grad(loss(*expected), [x, a, rho, s])
    assert_same_gradients(grads, expected_grads, x)


def test_edge_range_counts_duplicates(random_graph):
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    lo, hi = graph.edge_range(edge_index[0], edge_type, edge_index[1])
    M = dense_operators(edge_index, edge_type, N, K)
    assert torch.equal((hi - lo).double(),
                       M[edge_type, edge_index[0], edge_index[1]])
    absent = graph.edge_range(torch.tensor([0]), torch.tensor([0]),
                              torch.tensor([0]))
    assert int(absent[1] - absent[0]) == int(M[0, 0, 0])


@pytest.mark.parametrize('table', [True, False])
def test_type_range_holds_the_edges_of_each_source_and_type(random_graph,
                                                            table,
                                                            monkeypatch):
    # With the dense (entity, type) table and, on a graph too large for
    # it, with the search over the sorted pairs.
    edge_index, edge_type, N, K = random_graph
    monkeypatch.setattr(TypedGraph, 'PAIR_TABLE_SIZE', N * K if table else 0)
    graph = TypedGraph(*random_graph)
    assert graph.pair_table.numel() == (N * K if table else 0)
    src = torch.arange(N).repeat_interleave(K)
    typ = torch.arange(K).repeat(N)
    lo, hi = graph.type_range(src, typ)
    M = dense_operators(edge_index, edge_type, N, K)
    assert torch.equal((hi - lo).double(), M[typ, src].sum(-1))
    for i in range(src.numel()):
        edge = torch.arange(int(lo[i]), int(hi[i]))
        assert bool((graph.edge_src[edge] == src[i]).all())
        assert bool((graph.edge_type[edge] == typ[i]).all())


def test_neighborhood(random_graph):
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    start = torch.tensor([2])
    one_hop = set(edge_index[1, edge_index[0] == 2].tolist()) | {2}
    assert graph.neighborhood(start, 1).tolist() == sorted(one_hop)
    assert graph.neighborhood(start, 0).tolist() == [2]


def test_signals_round_trip_and_normalize():
    x = torch.tensor([[0., 2.], [3., 0.], [1., 0.]])
    signals = Signals.from_flat(x.view(-1), 2)
    assert torch.equal(signals.to_dense(3), x)
    assert torch.allclose(signals.normalize(1e-20).to_dense(3),
                          x / x.sum(0))
    one_hot = Signals.one_hot(torch.tensor([2, 0]), torch.ones(2))
    assert one_hot.to_dense(3).tolist() == [[0, 1], [0, 0], [1, 0]]


def test_bad_graph_input_is_rejected():
    with pytest.raises(ValueError, match=r"shape \[2, E\]"):
        TypedGraph(torch.zeros(3, 2, dtype=torch.long),
                   torch.zeros(2, dtype=torch.long), 4, 2)
    with pytest.raises(ValueError, match='outside \\[0, 4\\)'):
        TypedGraph(torch.tensor([[0], [4]]), torch.tensor([0]), 4, 2)
    with pytest.raises(ValueError, match='types in'):
        TypedGraph(torch.tensor([[0], [1]]), torch.tensor([2]), 4, 2)
    graph = TypedGraph(torch.tensor([[0], [1]]), torch.tensor([0]), 4, 2)
    with pytest.raises(ValueError, match="'mode'"):
        graph.propagate(Signals.one_hot(torch.tensor([0]), torch.ones(1)),
                        torch.ones(2, 1), mode='fast')
    with pytest.raises(ValueError, match="'mode'"):
        graph.propagate_at(
            Signals.one_hot(torch.tensor([0]), torch.ones(1)),
            torch.tensor([1]), torch.ones(2, 1), mode='fast')


def test_sorted_accumulation_equals_dense_accumulation(random_graph,
                                                       monkeypatch):
    graph = TypedGraph(*random_graph)
    N, K, C = 12, 8, 5
    x = Signals.from_flat(random_signals(N, C, 0.3).view(-1), C)
    a = torch.rand(K, C, dtype=torch.double)
    s = torch.rand(C, dtype=torch.double)
    dense = graph.propagate(x, a, None, s, mode='sparse')
    monkeypatch.setattr(typed_graph, 'SIGNALS_DENSE_LIMIT', 0)
    compact = graph.propagate(x, a, None, s, mode='sparse')
    assert torch.equal(compact.node, dense.node)
    assert torch.equal(compact.column, dense.column)
    assert torch.allclose(compact.value, dense.value)
