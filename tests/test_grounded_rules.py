r"""Grounded rule confidences against a brute-force sum of explanation
contributions; explanations as networkx graphs and pictures."""
from collections import defaultdict

import pytest
import torch
from torch_geometric import seed_everything

from pyg_degreembed import (DegreEmbedReasoner, RuleReasoner, explain,
                            extract_rules, fit, from_edge_index, load_model)
from pyg_degreembed.cli import main
from pyg_degreembed.data.kg import GRAPH_SPLITS, split_triples
from pyg_degreembed.interpret.plot import plot_explanation
from pyg_degreembed.interpret.rules import rule_masses, training_queries
from pyg_degreembed.training.checkpoint import load_checkpoint

from conftest import assert_picture, brute_force_attention_rules, chain_kg


def brute_force(model, graphs, queries):
    r"""Per body, the summed contributions of the explanations of the
    queries' answers (each on its own graph), and the summed scores."""
    mass, total = defaultdict(float), 0.
    for graph, (h, q, t) in zip(graphs, queries):
        result = explain(model, graph, h, q, t)
        total += result.score
        for path in result.paths:
            mass[path.body] += path.contribution
    return mass, total


def random_kg(seed=0):
    gen = torch.Generator().manual_seed(seed)
    N, R = 10, 3
    key = torch.unique(torch.randint(0, N * R * N, (45, ), generator=gen))
    triples = torch.stack([key // (R * N), (key // N) % R, key % N])
    return from_edge_index(triples[[0, 2], :35], triples[1, :35],
                           num_nodes=N, num_relations=R,
                           splits={'test': triples[:, 35:]})


@pytest.mark.parametrize('relation', [0, 4])
def test_grounded_masses_equal_explanations_of_triples_off_the_graph(
        relation):
    kg = random_kg()
    seed_everything(0)
    model = DegreEmbedReasoner(3, num_steps=2, rank=2, embedding_dim=8,
                               hidden_channels=8).eval()
    test = split_triples(kg, 'test')
    if relation >= 3:  # head queries: the test triples turned around
        test = torch.stack([test[2], test[1] + 3, test[0]])
    queries = test[:, test[1] == relation]
    assert queries.size(1) > 0
    mass, total = rule_masses(model, kg, relation, triples=test)
    expected, expected_total = brute_force(
        model, [kg] * queries.size(1), queries.t().tolist())
    assert total == pytest.approx(expected_total, rel=1e-5)
    assert sum(mass.values()) == pytest.approx(total, rel=1e-5)
    nonzero = {b for b, v in mass.items() if v > 1e-12}
    assert nonzero == {b for b, v in expected.items() if v > 1e-12}
    for body in nonzero:
        assert mass[body] == pytest.approx(expected[body], rel=1e-5), body
    rules = extract_rules(model, relation, k=50, data=kg, triples=test)
    assert [r.confidence for r in rules] == sorted(
        (r.confidence for r in rules), reverse=True)
    for rule in rules:
        assert rule.confidence == pytest.approx(
            expected[rule.body] / expected_total, rel=1e-5)


def test_grounded_masses_leave_out_each_training_query_edge():
    # DRUM (rho = 1): a training query is answered without its own edge,
    # which is what an explanation on the graph without that edge gives.
    kg = random_kg(1)
    seed_everything(0)
    model = RuleReasoner(3, num_steps=2, rank=3, embedding_dim=8,
                         hidden_channels=8).eval()
    relation = 1
    queries = training_queries(kg, relation)
    graphs = []
    observed = torch.cat([split_triples(kg, s) for s in GRAPH_SPLITS], 1)
    for h, q, t in queries.t().tolist():
        keep = ~((observed[0] == h) & (observed[1] == q) &
                 (observed[2] == t))
        graphs.append(from_edge_index(observed[[0, 2]][:, keep],
                                      observed[1, keep], num_nodes=10,
                                      num_relations=3))
    expected, expected_total = brute_force(model, graphs,
                                           queries.t().tolist())
    mass, total = rule_masses(model, kg, relation)
    assert total == pytest.approx(expected_total, rel=1e-5)
    for body in set(mass) | set(expected):
        assert mass.get(body, 0.) == pytest.approx(expected.get(body, 0.),
                                                   rel=1e-5, abs=1e-12)
    # The query's own edge never explains it: no rule r(X,Y) <= r(X,Y).
    assert mass.get((relation, ), 0.) == pytest.approx(
        expected.get((relation, ), 0.), abs=1e-12)


def test_top_grounded_rules_hold_for_training_triples():
    data = chain_kg()
    seed_everything(0)
    model = DegreEmbedReasoner(3, embedding_dim=8, hidden_channels=8)
    fit(model, data, epochs=5, lr=0.05, progress=False, log=None)
    rules = model.rules(2, k=3, data=data)
    # r2 = r0 then r1 is the only rule with support; it carries the score.
    assert rules[0].body == (0, 1) and rules[0].confidence > 0.5
    assert all(r.confidence > 0 for r in rules)
    with pytest.raises(ValueError, match='need the KG'):
        model.rules(2, k=3)
    # The attention confidence needs no data.
    attention = model.rules(2, k=3, confidence='attention')
    expected = brute_force_attention_rules(model, 2, 3)
    assert [r.body for r in attention] == [body for body, _ in expected]
    assert [r.confidence for r in attention] == pytest.approx(
        [value for _, value in expected])


def test_explanation_as_networkx_graph_and_picture(toy_kg, tmp_path):
    seed_everything(0)
    model = DegreEmbedReasoner(3, num_steps=2, rank=2, embedding_dim=8,
                               hidden_channels=8).eval()
    result = explain(model, toy_kg, 0, 0, 3)
    names = ['ann', 'bob', 'cat', 'dan', 'eve', 'fay']
    relations = ['parentOf', 'siblingOf', 'spouseOf']
    graph = result.to_networkx(names, relations)
    assert graph.nodes[0] == {'name': 'ann', 'role': 'head'}
    assert graph.nodes[3]['role'] == 'tail'
    steps = defaultdict(float)
    for path in result.paths:
        for step in {(path.entities[i], path.entities[i + 1], k)
                     for i, k in enumerate(path.body)}:
            steps[step] += path.contribution
    assert set(graph.edges(keys=True)) == set(steps)
    for u, v, k, d in graph.edges(keys=True, data=True):
        assert d['weight'] == pytest.approx(steps[u, v, k])
        assert d['share'] == pytest.approx(steps[u, v, k] / result.score)
        assert d['name'] == (relations[k] if k < 3 else
                             'inv_' + relations[k - 3])
    assert set(graph.nodes) == {e for p in result.paths for e in p.entities}

    png = tmp_path / 'why.png'
    drawn = plot_explanation(result, str(png), names, relations)
    assert_picture(str(png))
    assert drawn.number_of_edges() == graph.number_of_edges()


def test_cli_rules_confidences_and_explain_plot(tmp_path, capsys):
    checkpoint = str(tmp_path / 'umls.pt')
    assert main(['train', '--dataset', 'umls', '--dim', '8', '--epochs',
                 '1', '--checkpoint', checkpoint, '--no-progress']) == 0
    capsys.readouterr()
    for kind in ('grounded', 'attention'):
        assert main(['rules', '--checkpoint', checkpoint, '--relation',
                     'Affects', '--k', '3', '--confidence', kind]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert len(lines) == 3 and lines[0].startswith('Affects(X,Y) <= ')
        values = [float(line.split()[-1]) for line in lines]
        assert values == sorted(values, reverse=True)
        if kind == 'attention':
            model = load_model(checkpoint)[0]
            expected = brute_force_attention_rules(
                model, model_relations(checkpoint).index('Affects'), 3)
            assert values == [round(value, 2) for _, value in expected]
    from pyg_degreembed.data.datasets import load_dataset
    data = load_dataset('umls')
    h, r, t = data.test_edge_index[0, 0], data.test_edge_type[0], \
        data.test_edge_index[1, 0]
    png = tmp_path / 'why.png'
    assert main(['explain', '--checkpoint', checkpoint, '--head',
                 data.entity_names[h], '--relation', data.relation_names[r],
                 '--tail', data.entity_names[t], '--plot', str(png)]) == 0
    assert_picture(str(png))


def model_relations(checkpoint):
    return list(load_checkpoint(checkpoint)['kg']['relation_names'])


def test_parallel_edges_are_drawn_on_arcs_of_their_own():
    # 'sister' and 'inv_sister' from one person to another, and a third
    # edge: the parallel pair gets two different arcs (networkx draws the
    # i-th edge of a pair with the i-th style).
    from pyg_degreembed.interpret.plot import parallel_arcs
    styles = parallel_arcs([(0, 1), (0, 1), (1, 2)])
    assert len(styles) == 2 and styles[0] != styles[1]
    assert parallel_arcs([(0, 1), (1, 0)]) == ['arc3,rad=0.12']
    assert parallel_arcs([]) == ['arc3,rad=0.12']
