r"""Degree weights in relational PyG layers: WeightedRGCNConv against a
loop-by-hand RGCN and PyG's own RGCNConv; DegreeEmbedding.edge_weight on
parts of a graph (dropout_edge, k_hop_subgraph) against the full graph's
weights."""
import pytest
import torch
from torch_geometric.nn.conv import RGCNConv
from torch_geometric.utils import dropout_edge, k_hop_subgraph

from pyg_degreembed import DegreeEmbedding
from pyg_degreembed.nn import WeightedRGCNConv


def graph(seed=0, N=7, K=4, E=30):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randint(0, N, (2, E), generator=gen),
            torch.randint(0, K, (E, ), generator=gen))


@pytest.mark.parametrize('aggr', ['mean', 'add'])
def test_weighted_rgcn_against_a_hand_computation(aggr):
    torch.manual_seed(0)
    edge_index, edge_type = graph()
    x = torch.randn(7, 3, dtype=torch.double)
    conv = WeightedRGCNConv(3, 2, num_relations=4, aggr=aggr).double()
    weight = torch.rand(edge_type.numel(), dtype=torch.double)
    out = conv(x, edge_index, edge_type, weight)
    expected = x @ conv.root + conv.bias
    for i in range(7):
        for r in range(4):
            into = ((edge_index[1] == i) & (edge_type == r)).nonzero()
            for e in into.view(-1).tolist():
                norm = into.numel() if aggr == 'mean' else 1
                expected[i] += weight[e] / norm * (
                    x[edge_index[0, e]] @ conv.weight[r])
    assert torch.allclose(out, expected)
    # Without weights (or weights 1): PyG's RGCNConv, the same parameters.
    plain = RGCNConv(3, 2, num_relations=4, aggr=aggr).double()
    plain.load_state_dict(conv.state_dict())
    assert torch.allclose(conv(x, edge_index, edge_type),
                          plain(x, edge_index, edge_type))
    assert torch.allclose(conv(x, edge_index, edge_type,
                               torch.ones_like(weight)),
                          plain(x, edge_index, edge_type))
    with pytest.raises(ValueError, match="'edge_weight' must have shape"):
        conv(x, edge_index, edge_type, weight[:3])
    # The basis decomposition: weights 1 give RGCNConv's result.
    bases = WeightedRGCNConv(3, 2, num_relations=4, num_bases=2,
                             aggr=aggr).double()
    plain = RGCNConv(3, 2, num_relations=4, num_bases=2, aggr=aggr).double()
    plain.load_state_dict(bases.state_dict())
    assert torch.allclose(bases(x, edge_index, edge_type,
                                torch.ones_like(weight)),
                          plain(x, edge_index, edge_type))


def test_weights_of_a_part_are_the_full_graphs():
    torch.manual_seed(0)
    edge_index, edge_type = graph(N=12, E=40)  # types 0..3 of R = 4
    layer = DegreeEmbedding(8, 8, 5).eval()
    full = layer.edge_weight(edge_index, edge_type, 12)
    # dropout_edge: the kept edges carry their weights in the full graph.
    kept_index, mask = dropout_edge(edge_index, p=0.5, training=True)
    part = layer.edge_weight(kept_index, edge_type[mask], 12,
                             graph=(edge_index, edge_type))
    assert torch.equal(part, full[mask])
    # Without the full graph, rho is the part's own (other degree sets).
    own = layer.edge_weight(kept_index, edge_type[mask], 12)
    assert not torch.allclose(own, part)
    # k_hop_subgraph in the full graph's ids.
    _, sub_index, _, sub_mask = k_hop_subgraph(0, 1, edge_index,
                                               num_nodes=12)
    assert torch.equal(layer.edge_weight(sub_index, edge_type[sub_mask], 12,
                                         graph=(edge_index, edge_type)),
                       full[sub_mask])
    # Scaled by K: a uniform rho gives weight 1.
    assert torch.allclose(layer.edge_weight(edge_index, edge_type, 12,
                                            scale=True), 8 * full)
    with pytest.raises(ValueError, match='relabelled'):
        layer.edge_weight(torch.tensor([[20], [0]]), torch.tensor([0]),
                          graph=(edge_index, edge_type))
