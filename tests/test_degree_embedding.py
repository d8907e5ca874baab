import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence

from pyg_degreembed import DegreeEmbedding, DegreEmbedReasoner, TypedGraph
from pyg_degreembed.data.features import degree_sets
from pyg_degreembed.training.loop import rule_loss


def toy_graph(toy_kg):
    return TypedGraph(toy_kg.edge_index, toy_kg.edge_type, toy_kg.num_nodes,
                      2 * toy_kg.num_relations)


def test_trie_lstm_equals_packed_nn_lstm(toy_kg):
    torch.manual_seed(0)
    degree = toy_graph(toy_kg).degree
    layer = DegreeEmbedding(6, embedding_dim=8, hidden_channels=5)
    packed = pack_padded_sequence(layer.embedding(degree.tokens),
                                  degree.lengths, batch_first=True,
                                  enforce_sorted=False)
    _, (h_n, _) = layer.lstm(packed)
    expected = torch.cat([h_n[0], h_n[1]], dim=-1)
    assert torch.allclose(layer.embed_sets(degree), expected, atol=1e-6)


def test_trie_lstm_gradients_equal_packed_nn_lstm_gradients():
    # Many sets sharing prefixes and suffixes, some sets requested twice.
    torch.manual_seed(0)
    types = torch.rand(60, 7) < 0.4
    types[:, 0] |= ~types.any(-1)
    edge_source, edge_type = types.nonzero().t()
    degree = degree_sets(torch.stack([edge_source, edge_source]), edge_type,
                         60, 7)
    sets = torch.tensor([3, 1, 3, 0, 5, degree.tokens.size(0) - 1])
    layer = DegreeEmbedding(7, embedding_dim=6, hidden_channels=4).double()
    weight = torch.randn(len(sets), 8, dtype=torch.double)
    (layer.embed_sets(degree, sets) * weight).sum().backward()
    grads = {n: p.grad.clone() for n, p in layer.named_parameters()
             if not n.startswith('lin')}  # lin is not used by embed_sets
    layer.zero_grad()
    packed = pack_padded_sequence(layer.embedding(degree.tokens[sets]),
                                  degree.lengths[sets], batch_first=True,
                                  enforce_sorted=False)
    _, (h_n, _) = layer.lstm(packed)
    (torch.cat([h_n[0], h_n[1]], dim=-1) * weight).sum().backward()
    for name, param in layer.named_parameters():
        if name in grads:
            assert torch.allclose(grads[name], param.grad, atol=1e-10), name


def test_rho_is_a_distribution_per_entity_and_shared_per_set(
        toy_kg, device):
    rho = DegreeEmbedding(6, 8, 5).to(device)(toy_graph(toy_kg).to(device))
    assert rho.shape == (6, 6) and rho.device.type == device.type
    rho = rho.cpu()
    assert torch.allclose(rho.sum(-1), torch.ones(6))
    assert torch.equal(rho[0], rho[1])  # entities 0 and 1 share a set
    assert not torch.equal(rho[0], rho[2])


def test_rows_for_some_nodes_equal_full_rows(toy_kg):
    graph = toy_graph(toy_kg)
    layer = DegreeEmbedding(6, 8, 5)
    full = layer(graph)
    part = layer.source_weights(graph, torch.tensor([2, 4])).to_dense()
    assert torch.allclose(part[[2, 4]], full[[2, 4]], atol=1e-6)
    assert torch.equal(part[[0, 1, 3, 5]], torch.zeros(4, 6))


def test_gradients_reach_every_degree_embedding_parameter(toy_kg):
    torch.manual_seed(0)
    graph = toy_graph(toy_kg)
    model = DegreEmbedReasoner(3, num_steps=2, rank=2, embedding_dim=8,
                               hidden_channels=5)
    head, relation, tail = torch.tensor([0, 2]), torch.tensor([0, 4]), \
        torch.tensor([2, 3])
    loss = rule_loss(model(graph, head, relation, remove_tail=tail), tail)
    loss.backward()
    for name, param in model.edge_weight.named_parameters():
        assert param.grad is not None, name
        assert param.grad.abs().sum() > 0, name
    # Rows of the tokens that occur in the graph all get a gradient.
    used = torch.unique(graph.degree.tokens[graph.degree.tokens < 6])
    grad = model.edge_weight.embedding.weight.grad
    assert (grad[used].abs().sum(-1) > 0).all()


def test_degree_embedding_gradient_matches_finite_differences(toy_kg):
    torch.manual_seed(0)
    graph = toy_graph(toy_kg)
    model = DegreEmbedReasoner(3, num_steps=2, rank=1, embedding_dim=4,
                               hidden_channels=3).double()
    head, relation, tail = torch.tensor([0]), torch.tensor([0]), \
        torch.tensor([3])
    bias = model.edge_weight.lin.bias

    def loss():
        return rule_loss(model(graph, head, relation), tail)

    loss().backward()
    assert bias.grad.abs().sum() > 1e-3
    eps = 1e-6
    for i in range(bias.numel()):
        with torch.no_grad():
            bias[i] += eps
            up = loss().item()
            bias[i] -= 2 * eps
            down = loss().item()
            bias[i] += eps
        assert abs((up - down) / (2 * eps) - bias.grad[i].item()) < 1e-6


def test_repr():
    assert repr(DegreeEmbedding(6, 8, 5)) == \
        'DegreeEmbedding(6, embedding_dim=8, hidden_channels=5)'


def test_dropout_acts_in_training_only_and_is_saved(toy_kg, tmp_path):
    from pyg_degreembed import fit
    from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                    model_from_checkpoint,
                                                    model_spec)
    graph = toy_graph(toy_kg)
    torch.manual_seed(0)
    plain = DegreeEmbedding(6, 8, 5)
    torch.manual_seed(0)
    layer = DegreeEmbedding(6, 8, 5, dropout=0.5)
    assert 'dropout=0.5' in repr(layer)
    layer.eval()  # evaluation: the same function as without dropout
    assert torch.equal(layer(graph), plain(graph))
    layer.train()  # training: H is dropped at random, rows still sum to 1
    first, second = layer(graph), layer(graph)
    assert not torch.equal(first, second)
    assert torch.allclose(first.sum(-1), torch.ones(6))
    with pytest.raises(ValueError, match="'dropout' must be in"):
        DegreeEmbedding(6, dropout=1.0)
    model = DegreEmbedReasoner(3, degree_dropout=0.25, embedding_dim=8,
                               hidden_channels=4)
    assert model.edge_weight.dropout == 0.25
    assert model_spec(model)['edge_weight']['config']['dropout'] == 0.25
    path = str(tmp_path / 'model.pt')
    fit(model, toy_kg, epochs=1, checkpoint=path, progress=False, log=None)
    rebuilt = model_from_checkpoint(load_checkpoint(path))
    assert rebuilt.edge_weight.dropout == 0.25


def test_per_query_rows_for_some_nodes_equal_full_rows(random_graph):
    from pyg_degreembed.data.kg import query_edges
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    layer = DegreeEmbedding(K, 8, 5)
    edges = torch.tensor([0, 45, 10, 17])
    head, relation = edge_index[0, edges], edge_type[edges]
    left_out = query_edges(head, relation, edge_index[1, edges], K // 2)
    full = layer.source_weights(graph, left_out=left_out)
    nodes = torch.tensor([3, 8, 5])
    part = layer.source_weights(graph, nodes, left_out=left_out)
    assert full.override_key.numel() > 0
    assert torch.equal(part.override_key, full.override_key)
    # Every (query, node in `nodes`, type): the same weight both ways.
    query = torch.arange(4).repeat_interleave(3 * K)
    src = nodes.repeat_interleave(K).repeat(4)
    typ = torch.arange(K).repeat(12)
    assert torch.allclose(part.at(src, typ, query), full.at(src, typ, query),
                          atol=1e-6)
    # ... and a changed set reads another row than the shared one.
    assert not torch.allclose(full.at(src, typ, query), full.at(src, typ))


def test_edge_weight_is_rho_of_each_edge_for_pyg_layers(toy_kg):
    from torch_geometric.nn import GraphConv
    torch.manual_seed(0)
    layer = DegreeEmbedding(6, 8, 5)
    edge_index, edge_type = toy_kg.edge_index, toy_kg.edge_type  # inverses
    weight = layer.edge_weight(edge_index, edge_type, 6)
    rho = layer(edge_index, edge_type, 6)
    assert weight.shape == (edge_type.numel(), )
    for e, (i, k) in enumerate(zip(edge_index[0].tolist(),
                                   edge_type.tolist())):
        assert weight[e] == rho[i, k]
    # At the target: the weight j gives the inverse edge j -> i (types k and
    # k + 3 are inverses), times K with scale.
    at_target = layer.edge_weight(edge_index, edge_type, 6, at='target',
                                  scale=True)
    for e, (i, k, j) in enumerate(zip(edge_index[0].tolist(),
                                      edge_type.tolist(),
                                      edge_index[1].tolist())):
        assert at_target[e] == 6 * rho[j, (k + 3) % 6]
        back = ((edge_index[0] == j) & (edge_index[1] == i) &
                (edge_type == (k + 3) % 6)).nonzero().view(-1)
        assert back.numel() > 0
        assert torch.equal(at_target[e].expand(back.numel()), 6 * weight[back])
    with pytest.raises(ValueError, match="'at' must be 'source' or 'target'"):
        layer.edge_weight(edge_index, edge_type, 6, at='dst')
    # Given the KG's triples only (types < R), the inverses are added for
    # rho, and the weights are those of the given edges.
    forward = edge_type < 3
    assert torch.equal(layer.edge_weight(edge_index[:, forward],
                                         edge_type[forward], 6),
                       weight[forward])
    # In a PyG layer: out_j = W1 x_j + W2 sum_i w_(i,k,j) x_i; gradients
    # reach the degree embedding.
    conv = GraphConv(4, 3)
    x = torch.randn(6, 4)
    out = conv(x, edge_index, weight)
    by_hand = conv.lin_root(x) + conv.lin_rel(torch.zeros(6, 4).index_add_(
        0, edge_index[1], weight.unsqueeze(-1) * x[edge_index[0]]))
    assert torch.allclose(out, by_hand, atol=1e-6)
    out.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0
               for p in layer.lin.parameters())


def test_the_layer_speaks_of_edge_types():
    layer = DegreeEmbedding(6, 8, 5)
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    with pytest.raises(ValueError, match=r'outside \[0, 6\): this '
                       'DegreeEmbedding was built for 6 edge types '
                       r'\(3 relations and their inverses\)'):
        layer(edge_index, torch.tensor([0, 1, 7]))
    with pytest.raises(ValueError, match="half of this DegreeEmbedding's 6 "
                       'edge types'):
        layer.edge_weight(edge_index, torch.tensor([0, 4, 5]))


def test_packed_lstm_path_equals_trie_path_with_changed_sets(random_graph):
    # What a GPU computes (nn.LSTM on packed sequences) against what the CPU
    # computes (the tries, extended by the sets that single queries change):
    # values and gradients, some sets asked for twice.
    from pyg_degreembed.data.kg import query_edges
    edge_index, edge_type, N, K = random_graph
    graph = TypedGraph(*random_graph)
    degree = graph.degree
    edges = torch.tensor([0, 45, 10, 17])
    left_out = query_edges(edge_index[0, edges], edge_type[edges],
                           edge_index[1, edges], K // 2)
    keys, base, rows, lengths = graph.degree_without(*left_out)
    assert keys.numel() > 0
    sets = torch.tensor([2, 0, 2, degree.tokens.size(0) - 1])
    torch.manual_seed(0)
    layer = DegreeEmbedding(K, embedding_dim=6, hidden_channels=4).double()
    weight = torch.randn(sets.numel() + keys.numel(), 8, dtype=torch.double)
    results = []
    for packed in (False, True):
        layer.zero_grad()
        if packed:
            hidden = layer._embed_packed(
                torch.cat([degree.tokens[sets], rows]),
                torch.cat([degree.lengths[sets], lengths]))
        else:
            hidden = layer._embed_trie(degree, sets, (base, rows, lengths))
        (hidden * weight).sum().backward()
        results.append((hidden.detach(), {
            n: p.grad.clone() for n, p in layer.named_parameters()
            if p.grad is not None}))
    (trie, trie_grads), (packed, packed_grads) = results
    assert torch.allclose(trie, packed, atol=1e-10)
    assert trie_grads.keys() == packed_grads.keys() and len(trie_grads) == 9
    for name, grad in trie_grads.items():
        assert torch.allclose(grad, packed_grads[name], atol=1e-10), name


def _many_sets():
    # 60 entities with random sets of 7 edge types: many distinct sets.
    torch.manual_seed(0)
    types = torch.rand(60, 7) < 0.4
    types[:, 0] |= ~types.any(-1)
    edge_source, edge_type = types.nonzero().t()
    return degree_sets(torch.stack([edge_source, edge_source]), edge_type,
                       60, 7)


def test_large_graphs_embed_in_parts_without_gradients(monkeypatch):
    import pyg_degreembed.nn.degree_embedding as module
    degree = _many_sets()
    U = degree.tokens.size(0)
    layer = DegreeEmbedding(7, embedding_dim=6, hidden_channels=4).double()
    sets = torch.tensor([3, 1, 3, 0, 5, U - 1])
    with torch.no_grad():
        whole = layer.weights_of_sets(degree).table
        some = layer.weights_of_sets(degree, torch.tensor([1, 4])).table
        calls = []
        embed = layer.embed_sets
        monkeypatch.setattr(layer, 'embed_sets', lambda d, s=None, c=None:
                            calls.append(s.numel()) or embed(d, s, c))
        monkeypatch.setattr(module, 'MAX_TRIE_NODES', 10)
        parts = layer.weights_of_sets(degree).table
        assert len(calls) > 4 and max(calls) < U  # in parts
        assert torch.allclose(parts, whole, atol=1e-12)
        assert torch.allclose(
            layer.weights_of_sets(degree, torch.tensor([1, 4])).table, some,
            atol=1e-12)
        assert torch.allclose(layer._embed_bounded(degree, sets, None),
                              embed(degree, sets), atol=1e-12)


def test_large_graphs_train_on_a_sample_of_sets_with_history(monkeypatch):
    # Where the sets lead to more than MAX_TRIE_NODES trie nodes, a training
    # step embeds a random sample of them with gradients (written to the
    # history) and the others read their last embedding: the exact values
    # before any update; after one, the sampled rows are the new
    # parameters' embedding and the others the old one's.
    import pyg_degreembed.nn.degree_embedding as module
    degree = _many_sets()
    U = degree.tokens.size(0)
    layer = DegreeEmbedding(7, embedding_dim=6, hidden_channels=4).double()
    monkeypatch.setattr(module, 'MAX_TRIE_NODES', 40)
    sets = torch.arange(U)
    exact = layer.embed_sets(degree, sets).detach()
    layer.train()
    assert layer.history is None
    torch.manual_seed(1)
    hidden = layer._embed_bounded(degree, sets, None)
    assert torch.allclose(hidden, exact, atol=1e-12)
    assert torch.allclose(layer.history, exact, atol=1e-12)
    # Gradients flow through the sampled rows only: the loss of the other
    # rows gives none.
    weight = torch.randn(U, 8, dtype=torch.double)
    hidden.mul(weight).sum().backward()
    grad = torch.cat([p.grad.view(-1) for p in layer.parameters()
                      if p.grad is not None])
    assert grad.abs().sum() > 0
    torch.manual_seed(1)
    sampled = torch.randperm(U)[:module._sample_size(degree, sets)]
    assert 0 < sampled.numel() < U
    layer.zero_grad()
    reference = layer.embed_sets(degree, sets)
    mask = torch.zeros(U, 1, dtype=torch.double)
    mask[sampled] = 1.
    (reference * mask * weight).sum().backward()
    want = torch.cat([p.grad.view(-1) for p in layer.parameters()
                      if p.grad is not None])
    assert torch.allclose(grad, want, atol=1e-10)
    # An update, then a step: fresh rows where sampled, the history
    # elsewhere.
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.1)
    after = layer.embed_sets(degree, sets).detach()
    torch.manual_seed(2)
    fresh = torch.randperm(U)[:sampled.numel()]
    torch.manual_seed(2)
    hidden = layer._embed_bounded(degree, sets, None).detach()
    stale = torch.ones(U, dtype=torch.bool)
    stale[fresh] = False
    assert torch.allclose(hidden[fresh], after[fresh], atol=1e-12)
    assert torch.allclose(hidden[stale], exact[stale], atol=1e-12)
    assert not torch.allclose(hidden[stale], after[stale], atol=1e-6)
    assert torch.allclose(layer.history, hidden, atol=1e-12)
    # A new mode starts from a whole, fresh embedding.
    layer.eval()
    assert layer.history is None
