import pytest
import torch

from pyg_degreembed import DegreEmbedReasoner, RuleReasoner, TypedGraph

from conftest import reference_scores


@pytest.mark.parametrize('cls', [RuleReasoner, DegreEmbedReasoner])
@pytest.mark.parametrize('mode', ['dense', 'sparse', 'auto'])
@pytest.mark.parametrize('rank,num_steps', [(1, 2), (3, 3)])
def test_forward_equals_dense_recomputation(random_graph, cls, mode, rank,
                                            num_steps, device):
    torch.manual_seed(0)
    edge_index, edge_type, N, K = random_graph
    model = cls(K // 2, num_steps=num_steps, rank=rank, embedding_dim=8,
                hidden_channels=6)
    head = torch.tensor([0, 3, 3, 7, 11])
    relation = torch.tensor([0, 1, 5, 7, 2])
    expected = reference_scores(model, edge_index, edge_type, N, head,
                                relation)
    graph = TypedGraph(*random_graph).to(device)
    scores = model.to(device)(graph, head.to(device), relation.to(device),
                              mode=mode)
    assert scores.shape == (5, N) and scores.device == graph.device
    assert torch.allclose(scores.double().cpu(), expected, atol=1e-5)


@pytest.mark.parametrize('cls', [RuleReasoner, DegreEmbedReasoner])
@pytest.mark.parametrize('mode,costs,pair_cost', [
    ('grouped', None, 1e9), ('grouped', None, 0.),
    ('auto', (0., 0., 0.), None), ('auto', (1e9, 0., 0.), None),
    ('auto', None, None)])
@pytest.mark.parametrize('rank,num_steps', [(1, 2), (3, 3)])
def test_inference_by_relation_groups_equals_dense_recomputation(
        random_graph, cls, mode, costs, pair_cost, rank, num_steps, device,
        monkeypatch):
    # In inference the queries of one relation and rank hop together
    # (propagate_groups) once that is cheaper: with the cost of the grouped
    # hop set to zero every hop is grouped, with a huge cost none is; blocks
    # of 2 columns split the groups; the groups' hop by a matrix each or
    # through the (source, type) pairs.  Queries in mixed order, relations
    # repeated.
    if costs is not None:
        monkeypatch.setattr(TypedGraph, 'GROUPED_COSTS', costs)
    if pair_cost is not None:
        monkeypatch.setattr(TypedGraph, 'PAIR_COST', pair_cost)
    monkeypatch.setattr(TypedGraph, 'GROUP_COLUMNS', 2)
    torch.manual_seed(0)
    edge_index, edge_type, N, K = random_graph
    model = cls(K // 2, num_steps=num_steps, rank=rank, embedding_dim=8,
                hidden_channels=6).eval()
    head = torch.tensor([0, 3, 3, 7, 11, 5, 2, 9, 3])
    relation = torch.tensor([5, 1, 5, 7, 1, 5, 0, 1, 6])
    expected = reference_scores(model, edge_index, edge_type, N, head,
                                relation)
    graph = TypedGraph(*random_graph).to(device)
    hops = []
    spy = graph.propagate_groups
    graph.propagate_groups = lambda *args: hops.append(1) or spy(*args)
    with torch.no_grad():
        scores = model.to(device)(graph, head.to(device),
                                  relation.to(device), mode=mode)
    assert scores.shape == (9, N) and scores.is_contiguous()
    assert torch.allclose(scores.double().cpu(), expected, atol=1e-5)
    none = head[:0].to(device)
    with torch.no_grad():
        assert model(graph, none, none, mode=mode).shape == (0, N)
    if mode == 'grouped' or costs == (0., 0., 0.):
        assert len(hops) == num_steps
    elif costs is not None:
        assert not hops


def test_grouped_mode_is_for_inference_only(random_graph):
    model = RuleReasoner(4, num_steps=2)
    graph = TypedGraph(*random_graph)
    head, relation = torch.tensor([0]), torch.tensor([1])
    with pytest.raises(ValueError, match='inference'):
        model(graph, head, relation, mode='grouped')  # training mode
    model.eval()
    with pytest.raises(ValueError, match='inference'):
        model(graph, head, relation, mode='grouped')  # gradients on
    with torch.no_grad(), pytest.raises(ValueError, match='inference'):
        model(graph, head, relation, remove_tail=head, mode='grouped')


@pytest.mark.parametrize('cls', [RuleReasoner, DegreEmbedReasoner])
@pytest.mark.parametrize('mode', ['dense', 'sparse'])
def test_query_edge_removal_equals_graph_without_it(random_graph, cls, mode):
    torch.manual_seed(0)
    edge_index, edge_type, N, K = random_graph
    model = cls(K // 2, num_steps=2, rank=2, embedding_dim=8,
                hidden_channels=6)
    graph = TypedGraph(*random_graph)
    # Queries built from real edges (edge 0 is duplicated, 45 is the
    # self-loop), plus one whose triple is not in the graph.
    edges = torch.tensor([0, 45, 10, 3])
    head, relation = edge_index[0, edges], edge_type[edges]
    tail = edge_index[1, edges].clone()
    tail[3] = (tail[3] + 1) % N
    scores = model(graph, head, relation, remove_tail=tail, mode=mode)
    for b in range(4):
        expected = reference_scores(model, edge_index, edge_type, N,
                                    head[b:b + 1], relation[b:b + 1],
                                    tail[b:b + 1])
        assert torch.allclose(scores[b].double(), expected[0], atol=1e-5)
    # The removal matters: without it the scores differ.
    assert not torch.allclose(scores, model(graph, head, relation))


def test_rank_one_without_degree_embedding_is_neural_lp_form(random_graph):
    model = RuleReasoner(4, num_steps=2, rank=1)
    graph = TypedGraph(*random_graph)
    assert model.source_weights(graph) is None
    edge_index, edge_type, N, K = random_graph
    head, relation = torch.tensor([0, 5, 9]), torch.tensor([0, 3, 6])
    scores = model(graph, head, relation)
    # Neural LP's form: one attention vector per step over the operators
    # M_k and the identity, the signal normalised after every step.
    expected = reference_scores(model, edge_index, edge_type, N, head,
                                relation)
    assert torch.allclose(scores.double(), expected, atol=1e-6)
    # One rank of L1-normalised steps sums to one (the heads have edges).
    assert torch.allclose(scores.sum(1), torch.ones(3))


def test_input_checks(random_graph):
    graph = TypedGraph(*random_graph)
    with pytest.raises(ValueError, match='8 edge types'):
        RuleReasoner(3)(graph, torch.tensor([0]), torch.tensor([0]))
    model = RuleReasoner(4)
    with pytest.raises(ValueError, match='entity ids outside'):
        model(graph, torch.tensor([12]), torch.tensor([0]))
    with pytest.raises(ValueError, match='ids outside \\[0, 8\\)'):
        model(graph, torch.tensor([0]), torch.tensor([8]))
    with pytest.raises(ValueError, match='one length'):
        model(graph, torch.tensor([0, 1]), torch.tensor([0]))


def test_entity_without_edges_is_scored(toy_kg):
    graph = TypedGraph(toy_kg.edge_index, toy_kg.edge_type, 6, 6)
    model = DegreEmbedReasoner(3, embedding_dim=8, hidden_channels=4)
    scores = model(graph, torch.tensor([5]), torch.tensor([1]))
    # Only the identity path keeps the signal at entity 5.
    assert scores[0, 5] > 0 and scores[0, :5].sum() == 0


def test_repr():
    assert repr(RuleReasoner(5)) == 'RuleReasoner(5, num_steps=2, rank=3)'
    assert repr(DegreEmbedReasoner(5, num_steps=3, rank=1)) == \
        'DegreEmbedReasoner(5, num_steps=3, rank=1)'


@pytest.mark.parametrize('cls', [RuleReasoner, DegreEmbedReasoner])
@pytest.mark.parametrize('num_steps,remove', [(1, True), (2, True),
                                              (3, False), (3, True)])
@pytest.mark.parametrize('mode', ['dense', 'sparse'])
def test_score_of_answers_equals_forward(random_graph, cls, num_steps,
                                         remove, mode):
    torch.manual_seed(0)
    edge_index, edge_type, N, K = random_graph
    model = cls(K // 2, num_steps=num_steps, rank=2, embedding_dim=8,
                hidden_channels=6)
    graph = TypedGraph(*random_graph)
    edges = torch.tensor([0, 45, 10, 3, 17])
    head, relation = edge_index[0, edges], edge_type[edges]
    tail = edge_index[1, edges].clone()
    tail[3] = (tail[3] + 1) % N  # not an edge
    full = model(graph, head, relation,
                 remove_tail=tail if remove else None)
    expected = full[torch.arange(5), tail]
    scores = model.score(graph, head, relation, tail, remove_edge=remove,
                         mode=mode)
    assert torch.allclose(scores, expected, atol=1e-6)
    # Same gradients as the full computation.
    params = [p for p in model.parameters()]
    g1 = torch.autograd.grad(torch.log(scores).sum(), params,
                             allow_unused=True)
    g2 = torch.autograd.grad(torch.log(expected).sum(), params,
                             allow_unused=True)
    for a, b in zip(g1, g2):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize('cls', [RuleReasoner, DegreEmbedReasoner])
def test_recompute_gives_the_same_values_and_gradients(random_graph, cls):
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    edges = torch.tensor([0, 45, 10, 3, 17])
    head, relation = edge_index[0, edges], edge_type[edges]
    tail = edge_index[1, edges]
    results = []
    for recompute in (False, True):
        torch.manual_seed(0)
        model = cls(K // 2, num_steps=3, rank=2, embedding_dim=8,
                    hidden_channels=6, recompute=recompute)
        assert model.config()['recompute'] == recompute
        saved = []  # bytes kept for the backward pass

        def pack(t):
            saved.append(t.numel() * t.element_size())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            score = model.score(graph, head, relation, tail)
            full = model(graph, head, relation, remove_tail=tail)
        (torch.log(score).sum() + full.square().sum()).backward()
        results.append((sum(saved), score, full,
                        [p.grad.clone() for p in model.parameters()
                         if p.grad is not None]))
    (m1, s1, f1, g1), (m2, s2, f2, g2) = results
    assert m2 < m1
    assert torch.equal(s1, s2) and torch.equal(f1, f2)
    assert len(g1) == len(g2) > 0
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b, atol=1e-6)


class ConstantWeight(torch.nn.Module):
    r"""rho = c for every entity and edge type."""
    def __init__(self, c: float):
        super().__init__()
        self.c = c

    def source_weights(self, graph, nodes=None):
        return torch.full((graph.num_nodes, graph.num_edge_types), self.c)


@pytest.mark.parametrize('mode', ['dense', 'sparse'])
def test_every_step_is_normalised(random_graph, mode):
    # Edge weights of 1e12 over 4 steps: the signals stay in float32's range
    # only because every step is normalised (1e48 is not), and the scores
    # match the float64 re-computation that normalises each step.
    torch.manual_seed(0)
    edge_index, edge_type, N, K = random_graph
    model = RuleReasoner(K // 2, num_steps=4, rank=2, embedding_dim=8,
                         hidden_channels=6, edge_weight=ConstantWeight(1e12))
    head = torch.tensor([0, 3, 7, 11])
    relation = torch.tensor([0, 5, 7, 2])
    expected = reference_scores(model, edge_index, edge_type, N, head,
                                relation)
    graph = TypedGraph(*random_graph)
    scores = model(graph, head, relation, mode=mode)
    assert torch.allclose(scores.double(), expected, rtol=1e-4, atol=1e-6)
    tail = expected.argmax(dim=1)
    assert torch.allclose(model.score(graph, head, relation, tail,
                                      remove_edge=False, mode=mode).double(),
                          expected[torch.arange(4), tail], rtol=1e-4)


def test_inference_reuses_rho_until_the_parameters_change(random_graph):
    # In inference rho is computed once per graph and parameters: scores of
    # two batches equal those of the training-mode forward (rho of the
    # batch's neighbourhood, computed afresh), and an optimizer step (an
    # in-place change of the degree embedding) is seen at once.
    torch.manual_seed(0)
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    model = DegreEmbedReasoner(K // 2, num_steps=3, rank=2, embedding_dim=8,
                               hidden_channels=6)
    calls = []
    compute = model.edge_weight.source_weights
    model.edge_weight.source_weights = \
        lambda *args, **kwargs: calls.append(1) or compute(*args, **kwargs)
    batches = [(torch.tensor([0, 3, 7]), torch.tensor([0, 1, 5])),
               (torch.tensor([11, 2]), torch.tensor([2, 7]))]

    def scores(training):
        model.train(training)
        with torch.no_grad():
            return [model(graph, h, r) for h, r in batches]

    for _ in range(2):
        fresh = scores(True)
        calls.clear()
        cached = scores(False)
        assert len(calls) == 1
        for a, b in zip(fresh, cached):
            assert torch.allclose(a, b, atol=1e-6)
        with torch.no_grad():
            model.edge_weight.lin.bias.add_(torch.linspace(-2, 2, K))


def test_models_pickle_after_inference(random_graph, tmp_path):
    # The inference caches hold weak references to the graph; a whole
    # module saved after an evaluation (torch.save of the module) drops
    # them and scores alike once loaded.
    import copy
    import pickle

    from pyg_degreembed import AppliedRules
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    model = DegreEmbedReasoner(K // 2, num_steps=2, embedding_dim=8,
                               hidden_channels=6).eval()
    rules = AppliedRules(K // 2, 1, relation=torch.tensor([0]),
                         pattern=torch.tensor([2]),
                         confidence=torch.tensor([0.5]),
                         type_confidence=torch.rand(K, K))
    head, relation = torch.tensor([0, 3]), torch.tensor([0, 1])
    with torch.no_grad():
        for module in (model, rules):
            before = module(graph, head, relation)
            loaded = pickle.loads(pickle.dumps(module))
            assert torch.equal(loaded(graph, head, relation), before)
            assert torch.equal(copy.deepcopy(module)(graph, head, relation),
                               before)


@pytest.mark.parametrize('cls', [RuleReasoner, DegreEmbedReasoner])
@pytest.mark.parametrize('remove', [False, True])
def test_dense_last_hop_has_the_values_and_gradients_of_the_sparse_one(
        random_graph, cls, remove):
    # The last hop taken densely (propagate_dense, normalised and summed
    # over the ranks as a matrix) against the sparse hop's entries.
    torch.manual_seed(0)
    edge_index, edge_type, N, K = random_graph
    model = cls(K // 2, num_steps=3, rank=2, embedding_dim=8,
                hidden_channels=6)
    graph = TypedGraph(*random_graph)
    edges = torch.tensor([0, 45, 10, 3, 17])
    head, relation = edge_index[0, edges], edge_type[edges]
    tail = edge_index[1, edges] if remove else None
    params = [p for p in model.parameters()]
    weight = torch.rand(5, N)
    out = {}
    for mode in ('dense', 'sparse'):
        scores = model(graph, head, relation, remove_tail=tail, mode=mode)
        grads = torch.autograd.grad((scores * weight).sum(), params,
                                    allow_unused=True)
        out[mode] = scores, grads
    assert torch.allclose(out['dense'][0], out['sparse'][0], atol=1e-6)
    for a, b in zip(out['dense'][1], out['sparse'][1]):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)
