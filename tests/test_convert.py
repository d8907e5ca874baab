import pytest
import torch
from torch_geometric.data import HeteroData

from pyg_degreembed import from_edge_index, from_hetero_data, to_hetero_data
from pyg_degreembed.data.kg import SPLITS, split_triples


def test_from_edge_index_builds_graph_with_inverses():
    data = from_edge_index(torch.tensor([[0, 1], [1, 2]]),
                           torch.tensor([0, 1]))
    assert data.num_nodes == 3 and data.num_relations == 2
    assert data.edge_index.tolist() == [[0, 1, 1, 2], [1, 2, 0, 1]]
    assert data.edge_type.tolist() == [0, 1, 2, 3]
    assert data.relation_names == ['r0', 'r1']


def test_from_edge_index_rejects_bad_input():
    with pytest.raises(ValueError, match='shape'):
        from_edge_index(torch.tensor([0, 1]), torch.tensor([0]))
    with pytest.raises(ValueError, match=r'train triple 0 \(0, 0, 5\) has '
                       r'tail entity id 5 outside \[0, 3\)'):
        from_edge_index(torch.tensor([[0], [5]]), torch.tensor([0]),
                        num_nodes=3)
    with pytest.raises(ValueError, match='head entity id -1'):
        from_edge_index(torch.tensor([[-1], [0]]), torch.tensor([0]))
    with pytest.raises(ValueError, match='relation id 2 outside'):
        from_edge_index(torch.tensor([[0], [1]]), torch.tensor([2]),
                        num_relations=2)
    with pytest.raises(ValueError, match=r'The triple \(0, 0, 1\) is twice '
                       r'in train \(positions 0 and 2\)'):
        from_edge_index(torch.tensor([[0, 1, 0], [1, 2, 1]]),
                        torch.tensor([0, 0, 0]))
    with pytest.raises(ValueError, match=r'in both train \(position 1\) '
                       r'and test \(position 0\)'):
        from_edge_index(torch.tensor([[0, 1], [1, 2]]), torch.tensor([0, 0]),
                        splits={'test': torch.tensor([[1], [0], [2]])})
    with pytest.raises(ValueError, match=r'shape \[3, n\]'):
        from_edge_index(torch.tensor([[0], [1]]), torch.tensor([0]),
                        splits={'test': torch.tensor([[1, 0, 2]])})


def test_hetero_round_trip(toy_kg):
    hetero = to_hetero_data(toy_kg)
    assert ('entity', 'r0', 'entity') in hetero.edge_types
    assert hetero['entity', 'r0', 'entity'].edge_index.size(1) == 5
    back = from_hetero_data(hetero)
    assert back.num_nodes == toy_kg.num_nodes
    assert back.relation_names == toy_kg.relation_names
    for split in SPLITS:
        a = split_triples(toy_kg, split)
        b = split_triples(back, split)
        key = lambda t: sorted(map(tuple, t.t().tolist()))  # noqa: E731
        assert key(a) == key(b)


def test_from_plain_hetero_data_with_two_node_types():
    hetero = HeteroData()
    hetero['paper'].num_nodes = 2
    hetero['author'].num_nodes = 3
    hetero['author', 'writes', 'paper'].edge_index = torch.tensor([[0, 2],
                                                                   [1, 0]])
    data = from_hetero_data(hetero)
    assert data.num_nodes == 5
    assert data.entity_names[2:] == ['author/0', 'author/1', 'author/2']
    # author i is entity 2 + i, paper j is entity j.
    assert data.train_edge_index.tolist() == [[2, 4], [1, 0]]
    assert data.relation_names == ['writes']
