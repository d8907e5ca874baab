r"""Typed ranking: a KG with node types (HeteroData, or a folder with
entity_types.txt) ranks each answer among the entities of its type, checked
against a brute-force typed ranking."""
import re

import pytest
import torch
from torch_geometric import seed_everything
from torch_geometric.data import HeteroData

from pyg_degreembed import (RuleReasoner, as_kg, bundled_path, compute_ranks,
                            load_neural_lp, predict, scores_by_node_type)
from pyg_degreembed.cli import main
from pyg_degreembed.data.io import KGFormatError
from pyg_degreembed.data.kg import (all_triples, answer_types, entity_index,
                                    split_triples)

from conftest import brute_force_ranks


def people_companies_cities() -> HeteroData:
    h = HeteroData()
    h['person'].num_nodes = 6
    h['company'].num_nodes = 2
    h['city'].num_nodes = 2
    h['person', 'works_at', 'company'].edge_index = torch.tensor(
        [[0, 1, 2, 3, 4, 5], [0, 0, 1, 1, 0, 1]])
    h['person', 'knows', 'person'].edge_index = torch.tensor(
        [[0, 1, 2, 3, 4, 1], [1, 2, 3, 4, 5, 5]])
    h['person', 'lives_in', 'city'].edge_index = torch.tensor(
        [[0, 1, 2, 3], [0, 0, 1, 1]])
    h['person', 'lives_in', 'city'].test_edge_index = torch.tensor(
        [[4, 5], [0, 1]])
    h['person', 'works_at', 'company'].test_edge_index = torch.tensor(
        [[0], [1]])
    return h


def test_hetero_data_keeps_node_types():
    kg = as_kg(people_companies_cities())
    assert kg.node_type_names == ['person', 'company', 'city']
    assert kg.node_type.tolist() == [0] * 6 + [1] * 2 + [2] * 2
    names = list(kg.relation_names)
    node_type, answer = answer_types(kg)
    R = len(names)
    assert answer[names.index('lives_in')] == 2  # a city
    assert answer[names.index('lives_in') + R] == 0  # who lives there
    assert answer[names.index('works_at')] == 1


def test_typed_ranks_equal_a_brute_force_typed_ranking():
    kg = as_kg(people_companies_cities())
    seed_everything(0)
    model = RuleReasoner(kg.num_relations, embedding_dim=8,
                         hidden_channels=8)
    model.eval()
    with torch.no_grad():
        for typed in (True, False):
            ranks = compute_ranks(model, kg, 'test', typed=typed)
            assert ranks.typed == typed
            assert torch.equal(ranks.ranks['realistic'],
                               brute_force_ranks(model, kg, typed))
        typed = compute_ranks(model, kg, 'test').ranks['realistic']
        untyped = compute_ranks(model, kg, 'test', typed=False)
        assert (typed <= untyped.ranks['realistic']).all()
        assert (typed < untyped.ranks['realistic']).any()


def test_predict_lists_only_the_answer_type():
    kg = as_kg(people_companies_cities())
    seed_everything(0)
    model = RuleReasoner(kg.num_relations, embedding_dim=8,
                         hidden_channels=8)
    lives_in = list(kg.relation_names).index('lives_in')
    with torch.no_grad():
        typed = predict(model, kg, 4, lives_in, k=10, filter_known=False)
        untyped = predict(model, kg, 4, lives_in, k=10, filter_known=False,
                          typed=False)
    assert typed and all(kg.node_type[a.entity] == 2 for a in typed)
    assert any(kg.node_type[a.entity] != 2 for a in untyped)


def test_a_folder_with_entity_types(tmp_path, capsys):
    folder = tmp_path / 'typed'
    folder.mkdir()
    h = people_companies_cities()
    kg = as_kg(h)
    for split in ('train', 'valid', 'test'):
        triples = split_triples(kg, split if split != 'valid' else 'test')
        (folder / f'{split}.txt').write_text(''.join(
            f'{kg.entity_names[a]}\t{kg.relation_names[r]}\t'
            f'{kg.entity_names[b]}\n' for a, r, b in triples.t().tolist()
            if split != 'valid' or r == 0))
    (folder / 'valid.txt').write_text('')
    (folder / 'test.txt').write_text('person/4\tlives_in\tcity/0\n')
    (folder / 'entity_types.txt').write_text(''.join(
        f'{name}\t{name.split("/")[0]}\n' for name in kg.entity_names))
    data = load_neural_lp(str(folder))
    node_type, answer = answer_types(data)
    lives_in = list(data.relation_names).index('lives_in')
    assert data.node_type_names[int(answer[lives_in])] == 'city'
    checkpoint = str(tmp_path / 'typed.pt')
    assert main(['train', '--dataset', str(folder), '--dim', '4',
                 '--epochs', '1', '--checkpoint', checkpoint,
                 '--no-progress']) == 0
    assert 'typed: each answer ranked among the entities of its type' in \
        capsys.readouterr().out
    assert main(['evaluate', '--checkpoint', checkpoint, '--untyped']) == 0
    assert 'typed' not in capsys.readouterr().out
    # A relation joining two types of destinations is refused.
    with open(folder / 'train.txt', 'a') as f:
        f.write('person/0\tlives_in\tcompany/1\n')
    with pytest.raises(KGFormatError, match="entity_types.txt: relation "
                       "'lives_in' joins destinations of the types 'company' "
                       "and 'city'|'city' and 'company'"):
        load_neural_lp(str(folder))


def test_a_head_of_the_wrong_type_is_refused(tmp_path, capsys):
    from conftest import one_line_error
    kg = as_kg(people_companies_cities())
    model = RuleReasoner(kg.num_relations, embedding_dim=4,
                         hidden_channels=4)
    works_at = list(kg.relation_names).index('works_at')
    city = kg.entity_names.index('city/1')
    with pytest.raises(ValueError, match="entity 'city/1' is of node type "
                       "'city', but the query relation 'works_at' asks "
                       "about a 'person'"):
        predict(model, kg, city, works_at)
    # The inverse query asks about a company; untyped, anything goes.
    company = kg.entity_names.index('company/0')
    assert all(kg.node_type[a.entity] == 0 for a in predict(
        model, kg, company, works_at + kg.num_relations, filter_known=False))
    predict(model, kg, city, works_at, typed=False)
    # The command line, on a typed folder.
    folder = tmp_path / 'typed'
    folder.mkdir()
    lines = ''.join(f'{kg.entity_names[a]}\t{kg.relation_names[r]}\t'
                    f'{kg.entity_names[b]}\n' for a, r, b in
                    all_triples(kg).t().tolist())
    (folder / 'train.txt').write_text(lines)
    (folder / 'valid.txt').write_text('')
    (folder / 'test.txt').write_text('')
    (folder / 'entity_types.txt').write_text(''.join(
        f'{name}\t{name.split("/")[0]}\n' for name in kg.entity_names))
    checkpoint = str(tmp_path / 'typed.pt')
    assert main(['train', '--dataset', str(folder), '--dim', '4',
                 '--epochs', '1', '--scorer', 'model', '--checkpoint',
                 checkpoint, '--no-progress']) == 0
    capsys.readouterr()
    for command in (['predict'], ['explain', '--tail', 'company/0']):
        one_line_error(capsys, command + [
            '--checkpoint', checkpoint, '--head', 'city/1', '--relation',
            'works_at'], "is of node type 'city', but the query relation "
            "'works_at' asks about a 'person'")


@pytest.mark.parametrize('edit,message', [
    (lambda h: h['person', 'knows', 'person'].edge_index.__setitem__(
        (0, 0), 6), "('person', 'knows', 'person') edge_index[0]: node id 6 "
     "is outside [0, 6) of node type 'person' (column 0)"),
    (lambda h: h['person', 'works_at', 'company'].edge_index.__setitem__(
        (1, 2), -1), "edge_index[1]: node id -1 is outside [0, 2) of node "
     "type 'company'"),
    (lambda h: h['person', 'lives_in', 'city'].test_edge_index.__setitem__(
        (1, 0), 2), "test_edge_index[1]: node id 2 is outside [0, 2)"),
    (lambda h: h['person', 'owns', 'car'].__setattr__(
        'edge_index', torch.tensor([[0], [0]])),
     "names the node type 'car', which has no node store"),
    (lambda h: h['city'].__setattr__('names', ['Paris', 'Paris']),
     "data['city'].names holds 'Paris' twice"),
    (lambda h: h['city'].__setattr__('names', ['Paris', 7]),
     "data['city'].names must hold strings, got 7"),
    (lambda h: h['city'].__setattr__('names', ['Paris']),
     "data['city'].names must be a list of 2 names"),
    (lambda h: h['person', 'inv_likes', 'city'].__setattr__(
        'edge_index', torch.tensor([[0], [0]])),
     "relation names starting with 'inv_' are reserved"),
])
def test_hetero_data_indices_and_names_are_checked(edit, message):
    h = people_companies_cities()
    edit(h)
    with pytest.raises(ValueError, match=re.escape(message)):
        as_kg(h)


def test_hetero_data_names_of_several_node_types():
    h = people_companies_cities()
    h['city'].names = ['Paris', 'Lyon']
    kg = as_kg(h)
    assert kg.entity_names[-2:] == ['city/Paris', 'city/Lyon']


def test_load_model_with_the_hetero_data_in_memory(tmp_path):
    from pyg_degreembed import fit, load_model
    from pyg_degreembed.training.checkpoint import CheckpointError
    h = people_companies_cities()
    path = str(tmp_path / 'typed.pt')
    model = RuleReasoner(as_kg(h).num_relations, embedding_dim=4,
                         hidden_channels=4)
    fit(model, h, epochs=1, progress=False, log=None, checkpoint=path)
    loaded, kg = load_model(path, dataset=h)
    assert kg.node_type_names == ['person', 'company', 'city']
    assert torch.equal(loaded(kg, [0], [0]), model(kg, [0], [0]))
    with pytest.raises(CheckpointError, match='does not record its dataset'):
        load_model(path)
    h['person', 'knows', 'person'].edge_index[1, 0] = 3  # another KG
    with pytest.raises(CheckpointError, match='trained on another KG'):
        load_model(path, dataset=h)


def test_to_hetero_data_restores_the_node_types():
    from pyg_degreembed import from_hetero_data, to_hetero_data
    h = people_companies_cities()
    h['city'].names = ['Paris', 'Lyon']
    kg = as_kg(h)
    back = to_hetero_data(kg)
    assert back.node_types == ['person', 'company', 'city']
    assert back['city'].names == ['city/Paris', 'city/Lyon']
    assert torch.equal(back['person', 'lives_in', 'city'].edge_index,
                       h['person', 'lives_in', 'city'].edge_index)
    assert torch.equal(back['person', 'works_at', 'company'].test_edge_index,
                       h['person', 'works_at', 'company'].test_edge_index)
    again = from_hetero_data(back)  # the same KG
    assert again.entity_names == kg.entity_names
    assert list(again.relation_names) == list(kg.relation_names)
    assert torch.equal(again.node_type, kg.node_type)
    assert torch.equal(again.relation_types, kg.relation_types)
    for split in ('train', 'test'):
        assert torch.equal(split_triples(again, split),
                           split_triples(kg, split))


def test_entities_addressed_by_node_type_and_local_id():
    kg = as_kg(people_companies_cities())
    model = RuleReasoner(kg.num_relations, embedding_dim=4,
                         hidden_channels=4).eval()
    lives_in = list(kg.relation_names).index('lives_in')
    by_pair = predict(model, kg, ('person', 4), 'lives_in', k=3,
                      filter_known=False)
    by_id = predict(model, kg, 4, lives_in, k=3, filter_known=False)
    assert [a.entity for a in by_pair] == [a.entity for a in by_id]
    assert [a.entity for a in predict(model, kg, ('city', 1),
                                      'inv_lives_in', k=3)] == \
        [a.entity for a in predict(model, kg, 'city/1', 'inv_lives_in',
                                   k=3)]
    with pytest.raises(ValueError, match=r"node type 'city' has ids in "
                       r"\[0, 2\)"):
        predict(model, kg, ('city', 2), 'inv_lives_in')
    with pytest.raises(ValueError, match='node types: person, company'):
        predict(model, kg, ('planet', 0), 'lives_in')


def test_scores_and_answers_by_node_type():
    data = people_companies_cities()
    kg = as_kg(data)
    seed_everything(0)
    model = RuleReasoner(kg.num_relations, embedding_dim=4,
                         hidden_channels=4).eval()
    lives_in = list(kg.relation_names).index('lives_in')
    with torch.no_grad():
        scores = model(kg, [0, 1], [lives_in, lives_in])
    parts = scores_by_node_type(kg, scores)
    assert list(parts) == ['person', 'company', 'city']
    # Column j of a type's block is that type's local node j.
    for node_type, part in parts.items():
        assert part.shape == (2, data[node_type].num_nodes)
        for j in range(data[node_type].num_nodes):
            e = entity_index(kg, (node_type, j))
            assert torch.equal(part[:, j], scores[:, e])
    answers = predict(model, kg, ('person', 4), 'lives_in', k=2,
                      filter_known=False)
    assert answers
    for a in answers:
        assert a.node[0] == 'city'
        assert entity_index(kg, a.node) == a.entity
        assert parts['city'].shape[1] > a.node[1]
    # An untyped KG: one block, no typed answers.
    untyped = load_neural_lp(bundled_path('family'))
    model = RuleReasoner(untyped.num_relations, embedding_dim=4,
                         hidden_channels=4).eval()
    with torch.no_grad():
        scores = model(untyped, [0], [0])
    assert list(scores_by_node_type(untyped, scores)) == ['entity']
    assert predict(model, untyped, 0, 0, k=1,
                   filter_known=False)[0].node is None
    with pytest.raises(ValueError, match=r'3007 columns .* got 3$'):
        scores_by_node_type(untyped, scores[:, :3])
