import pytest
import torch

from pyg_degreembed import DegreEmbedReasoner, RuleReasoner, TypedGraph
from pyg_degreembed.interpret.explain import explain

from conftest import reference_scores


@pytest.mark.parametrize('cls', [RuleReasoner, DegreEmbedReasoner])
@pytest.mark.parametrize('num_steps,rank', [(2, 3), (3, 2)])
def test_contributions_add_up_to_the_score(random_graph, cls, num_steps,
                                           rank, device):
    torch.manual_seed(0)
    edge_index, edge_type, N, K = random_graph
    model = cls(K // 2, num_steps=num_steps, rank=rank, embedding_dim=8,
                hidden_channels=6).to(device)
    graph = TypedGraph(*random_graph).to(device)
    for head, relation in [(0, 1), (3, 6)]:
        # The dense re-computation, not the model's own forward.
        scores = reference_scores(model.cpu(), edge_index, edge_type, N,
                                  torch.tensor([head]),
                                  torch.tensor([relation]))
        model.to(device)
        for tail in range(N):
            result = explain(model, graph, head, relation, tail)
            assert result.score == pytest.approx(float(scores[0, tail]),
                                                 abs=1e-6)
            total = sum(p.contribution for p in result.paths)
            assert total == pytest.approx(float(scores[0, tail]), abs=1e-5)
            if float(scores[0, tail]) == 0:
                assert result.paths == []


@pytest.mark.parametrize('cls', [RuleReasoner, DegreEmbedReasoner])
def test_removed_edge_explains_like_the_graph_without_it(random_graph, cls):
    # Reference: the explanation on a graph rebuilt without the query's
    # edge and its inverse (all copies), degree features included.
    torch.manual_seed(0)
    edge_index, edge_type, N, K = random_graph
    R = K // 2
    model = cls(R, num_steps=2, rank=3, embedding_dim=8, hidden_channels=6)
    graph = TypedGraph(*random_graph)
    # A duplicated edge, the self-loop, and the inverse of an edge.
    queries = [(int(edge_index[0, 0]), int(edge_type[0]),
                int(edge_index[1, 0])), (3, 1, 3),
               (int(edge_index[1, 7]), int(edge_type[7]) + R,
                int(edge_index[0, 7]))]
    for head, relation, tail in queries:
        inverse = (relation + R) % K
        keep = ~(((edge_index[0] == head) & (edge_type == relation) &
                  (edge_index[1] == tail)) |
                 ((edge_index[0] == tail) & (edge_type == inverse) &
                  (edge_index[1] == head)))
        assert (~keep).sum() >= 2
        rebuilt = TypedGraph(edge_index[:, keep], edge_type[keep], N, K)
        result = explain(model, graph, head, relation, tail,
                         remove_edge=True)
        expected = explain(model, rebuilt, head, relation, tail)
        assert result.score == pytest.approx(expected.score, abs=1e-6)
        assert [(p.body, p.entities) for p in result.paths] == \
            [(p.body, p.entities) for p in expected.paths]
        for p, q in zip(result.paths, expected.paths):
            assert p.contribution == pytest.approx(q.contribution, abs=1e-6)
        # The edge itself explains the fact when it is kept.
        kept = explain(model, graph, head, relation, tail)
        assert ((relation, ), (head, tail)) in \
            [(p.body, p.entities) for p in kept.paths]
        assert ((relation, ), (head, tail)) not in \
            [(p.body, p.entities) for p in result.paths]


def test_paths_follow_real_edges_and_merge_identity_paddings(toy_kg):
    torch.manual_seed(0)
    graph = TypedGraph(toy_kg.edge_index, toy_kg.edge_type, 6, 6)
    model = RuleReasoner(3, num_steps=2, rank=2, embedding_dim=8,
                         hidden_channels=6)
    edges = set(zip(toy_kg.edge_index[0].tolist(),
                    toy_kg.edge_type.tolist(),
                    toy_kg.edge_index[1].tolist()))
    result = explain(model, graph, head=0, relation=0, tail=3)
    keys = [(p.body, p.entities) for p in result.paths]
    assert len(keys) == len(set(keys))  # [r, id] and [id, r] merged
    for path in result.paths:
        assert path.entities[0] == 0 and path.entities[-1] == 3
        for i, k in enumerate(path.body):
            assert (path.entities[i], k, path.entities[i + 1]) in edges
    # 0 -parentOf-> 3 is a one-step path.
    assert ((0, ), (0, 3)) in keys
    names = ['ann', 'bob', 'cat', 'dan', 'eve', 'fay']
    text = [p.format(names, ['parentOf', 'siblingOf', 'spouseOf'])
            for p in result.paths]
    assert any(t.startswith('parentOf(ann,dan)') for t in text)


def test_bad_query_is_rejected(toy_kg):
    graph = TypedGraph(toy_kg.edge_index, toy_kg.edge_type, 6, 6)
    model = RuleReasoner(3)
    with pytest.raises(ValueError, match="'tail' must be in"):
        explain(model, graph, 0, 0, 6)


def test_names_and_applied_rules():
    # Names where ids are accepted; applied rules explained by their rules.
    from pyg_degreembed import AppliedRules
    from conftest import chain_kg
    data = chain_kg()
    model = DegreEmbedReasoner(data.num_relations, embedding_dim=4,
                               hidden_channels=4).eval()
    h, t = int(data.train_edge_index[0, 0]), int(data.train_edge_index[1, 0])
    by_id = explain(model, data, h, 2, t)
    by_name = explain(model, data, data.entity_names[h], 'r2',
                      data.entity_names[t])
    assert by_name.score == by_id.score and by_id.score > 0
    assert [p.contribution for p in by_name.paths] == \
        [p.contribution for p in by_id.paths]
    inverse = explain(model, data, data.entity_names[t], 'inv_r2',
                      data.entity_names[h])
    assert inverse.score == explain(model, data, t, 2 + 3, h).score
    with pytest.raises(ValueError, match="Unknown entity 'nobody'"):
        explain(model, data, 'nobody', 'r2', t)
    applied = AppliedRules.mine(data, 2)
    rules, answer_type = explain(applied, data, data.entity_names[h], 'r2',
                                 t)
    expected, expected_type = applied.explain(data, h, 2, t)
    assert [r.body for r in rules] == [r.body for r in expected] and rules
    assert answer_type == expected_type
    with pytest.raises(TypeError, match='RuleReasoner or applied rules'):
        explain(torch.nn.Linear(2, 2), data, h, 2, t)
