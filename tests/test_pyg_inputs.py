r"""The PyG-native entry points: every way of passing a graph gives the
scores of the prepared TypedGraph; composition of the edge weight; old
checkpoints load."""
import os
import shutil

import pytest
import torch
from torch.nn import Linear, Module
from torch_geometric import seed_everything

from pyg_degreembed import (DegreeEmbedding, DegreEmbedReasoner, RuleReasoner,
                            TypedGraph, fit, resolve_graph, to_hetero_data)
from pyg_degreembed.data.kg import GRAPH_SPLITS, split_triples
from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                model_from_checkpoint)

from conftest import chain_kg

DATA = os.path.join(os.path.dirname(__file__), 'data')


def observed_triples(kg):
    return torch.cat([split_triples(kg, s) for s in GRAPH_SPLITS], dim=1)


def small_model(cls=DegreEmbedReasoner, **kwargs):
    seed_everything(0)
    return cls(3, embedding_dim=8, hidden_channels=8, **kwargs)


def test_every_graph_input_gives_the_scores_of_the_typed_graph(toy_kg):
    model = small_model()
    head = torch.tensor([0, 1, 2, 3, 3, 4])
    relation = torch.tensor([0, 1, 2, 3, 4, 5])
    reference = model(TypedGraph(toy_kg.edge_index, toy_kg.edge_type, 6, 6),
                      head, relation)
    assert reference.abs().sum() > 0
    triples = observed_triples(toy_kg)
    same = [
        # PyG style: the KG's triples; the inverse edges are added.
        model(triples[[0, 2]], triples[1], head, relation, num_nodes=6),
        # ... or a graph that already holds them (RelLinkPredDataset).
        model(toy_kg.edge_index, toy_kg.edge_type, head, relation,
              num_nodes=6),
        model(toy_kg, head, relation),
        model(toy_kg, head=head, relation=relation),
        model(to_hetero_data(toy_kg), head, relation),
        model(toy_kg, head.tolist(), relation.tolist()),
    ]
    for scores in same:
        assert torch.equal(scores, reference)

    tail = torch.tensor([2, 3, 1, 0, 2, 3])
    expected = model(toy_kg, head, relation, remove_tail=tail)
    for scores in (model.score(toy_kg, head, relation, tail),
                   model.score(triples[[0, 2]], triples[1], head, relation,
                               tail, num_nodes=6)):
        assert torch.allclose(scores, expected.gather(1, tail.view(-1, 1))
                              .squeeze(1), atol=1e-6)


def test_degreembed_is_rule_reasoner_with_a_degree_embedding(toy_kg):
    model = small_model()
    composed = RuleReasoner(3, embedding_dim=8, hidden_channels=8,
                            edge_weight=DegreeEmbedding(6, 8, 8))
    composed.load_state_dict(model.state_dict())
    head, relation = torch.tensor([0, 3]), torch.tensor([0, 4])
    assert torch.equal(composed(toy_kg, head, relation),
                       model(toy_kg, head, relation))
    # The degree embedding on its own, the PyG way.
    triples = observed_triples(toy_kg)
    layer = model.edge_weight
    rho = layer(triples[[0, 2]], triples[1], num_nodes=6)
    assert rho.shape == (6, 6)
    assert torch.equal(rho, layer(toy_kg))
    assert torch.equal(rho, layer.source_weights(model.graph(toy_kg))
                       .to_dense())


def test_graphs_are_prepared_once_and_again_after_a_change(toy_kg):
    model = small_model()
    graph = model.graph(toy_kg)
    assert model.graph(toy_kg) is graph
    triples = observed_triples(toy_kg)
    edge_index, edge_type = triples[[0, 2]].clone(), triples[1].clone()
    first = model.graph(edge_index, edge_type, 6)
    assert model.graph(edge_index, edge_type, 6) is first
    before = model(edge_index, edge_type, [0], [0], num_nodes=6)
    edge_index[1, 0] = 5  # in place: 0 -parent-> 5 instead of 0 -> 2
    second = model.graph(edge_index, edge_type, 6)
    assert second is not first and second.num_edges == first.num_edges
    after = model(edge_index, edge_type, [0], [0], num_nodes=6)
    assert not torch.equal(before, after)


def test_graph_errors_name_the_problem(toy_kg):
    model = small_model()
    ei, et = toy_kg.edge_index, toy_kg.edge_type
    keep = torch.arange(et.numel()) != et.numel() - 1  # drop one inverse
    with pytest.raises(ValueError, match='inverse edges already'):
        model(ei[:, keep], et[keep], [0], [0])
    # The usual mistake: RelLinkPredDataset.num_relations counts inverses.
    doubled = RuleReasoner(6, embedding_dim=8, hidden_channels=8)
    with pytest.raises(ValueError, match='build it with 3'):
        doubled(ei, et, [0], [0])
    with pytest.raises(ValueError, match='KG has 3 relations, but the model '
                       'was built for 6 .*as_kg'):
        doubled(toy_kg, [0], [0])
    with pytest.raises(TypeError, match="'edge_type' must hold integer"):
        model(ei, et.float(), [0], [0])
    with pytest.raises(TypeError, match="'head' must hold integer"):
        model(toy_kg, torch.tensor([0.5]), [0])
    with pytest.raises(TypeError, match="Missing 'relation'"):
        model(toy_kg, [0])
    with pytest.raises(TypeError, match="'edge_type' is needed"):
        model(ei, head=[0], relation=[0])
    with pytest.raises(ValueError, match="'remove_tail' must have the "
                       "shape"):
        model(toy_kg, [0, 1], [0, 0], remove_tail=[2])
    with pytest.raises(ValueError, match='12 edge types'):
        resolve_graph(TypedGraph(ei, et, 6, 12), num_relations=3)


class FeatureWeights(Module):
    r"""An edge weight from fixed entity features (as in the pre-trained
    embedding ablation)."""
    def __init__(self, features, num_edge_types):
        super().__init__()
        self.register_buffer('features', features)
        self.lin = Linear(features.size(1), num_edge_types)

    def source_weights(self, graph, nodes=None):
        return torch.softmax(self.lin(self.features), dim=-1)


def test_frozen_and_custom_edge_weights():
    data = chain_kg()
    frozen = DegreeEmbedding(6, 8, 8).requires_grad_(False)
    before = {k: v.clone() for k, v in frozen.state_dict().items()}
    model = small_model(RuleReasoner, edge_weight=frozen)
    # The constructor keeps the given layer's weights.
    assert all(torch.equal(v, before[k])
               for k, v in frozen.state_dict().items())
    attention = model.attention.weight.clone()
    fit(model, data, epochs=1, lr=0.05, progress=False, log=None)
    assert all(torch.equal(v, before[k])
               for k, v in model.edge_weight.state_dict().items())
    assert not torch.equal(model.attention.weight, attention)

    custom = small_model(RuleReasoner, edge_weight=FeatureWeights(
        torch.randn(data.num_nodes, 4), 6))
    fit(custom, data, epochs=1, progress=False, log=None)
    assert custom.edge_weight.lin.weight.grad is not None
    with pytest.raises(TypeError, match='source_weights'):
        RuleReasoner(3, edge_weight=Linear(2, 2))
    with pytest.raises(TypeError, match='builds its own'):
        DegreEmbedReasoner(3, edge_weight=frozen)


def test_reset_parameters_resets_the_edge_weight():
    model = small_model()
    weight = model.edge_weight.lin.weight.clone()
    model.reset_parameters()
    assert not torch.equal(model.edge_weight.lin.weight, weight)


def test_frozen_flag_survives_a_checkpoint(tmp_path):
    path = str(tmp_path / 'run.pt')
    model = small_model(RuleReasoner, edge_weight=DegreeEmbedding(
        6, 8, 8).requires_grad_(False))
    fit(model, chain_kg(), epochs=1, progress=False, log=None,
        checkpoint=path)
    payload = load_checkpoint(path)
    assert payload['format'] == 3
    assert payload['model']['edge_weight'] == {
        'class': 'DegreeEmbedding', 'trainable': False,
        'config': dict(num_edge_types=6, embedding_dim=8,
                       hidden_channels=8)}
    rebuilt = model_from_checkpoint(payload)
    assert not any(p.requires_grad for p in rebuilt.edge_weight.parameters())
    # Resuming into a model with a trainable layer is refused.
    other = small_model()
    with pytest.raises(ValueError, match='not this one'):
        fit(other, chain_kg(), epochs=2, progress=False, log=None,
            checkpoint=path, resume=True)


def test_format_1_checkpoints_load_with_the_old_scores(toy_kg, tmp_path):
    # Written by version 0.1.0 (DegreEmbedReasoner with its layer as
    # `degree_embedding`), with the scores that version computed.
    path = str(tmp_path / 'old.pt')
    shutil.copy(os.path.join(DATA, 'degreembed_format1.pt'), path)
    old = torch.load(os.path.join(DATA, 'degreembed_format1_scores.pt'))
    payload = load_checkpoint(path)
    model = model_from_checkpoint(payload)
    assert isinstance(model.edge_weight, DegreeEmbedding)
    with torch.no_grad():
        scores = model(toy_kg, old['head'], old['relation'])
    # Equal up to float32 rounding (other torch versions sum in another
    # order; a mapping error would change the scores entirely).
    assert torch.allclose(scores, old['scores'], atol=1e-6, rtol=0)
    # ... and a run continues from it, with its settings: one learning rate
    # and no weight decay (the defaults before edge_weight_lr and
    # edge_weight_decay; other settings are refused).
    seed_everything(0)
    model = DegreEmbedReasoner(3, embedding_dim=4, hidden_channels=4)
    with pytest.raises(ValueError, match='edge_weight_lr None -> 0.0001'):
        fit(model, toy_kg, epochs=3, progress=False, log=None,
            checkpoint=path, resume=True)
    result = fit(model, toy_kg, epochs=3, progress=False, log=None,
                 checkpoint=path, resume=True, edge_weight_lr=None,
                 edge_weight_decay=0.)
    assert [h['epoch'] for h in result.history] == [1, 2, 3]
    assert load_checkpoint(path)['format'] == 3
