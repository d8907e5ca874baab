r"""PyG's relational graph convolution with an edge weight, the way into a
relational GNN for DegreEmbed's degree weights
(:meth:`~pyg_degreembed.DegreeEmbedding.edge_weight`)."""
from typing import Optional

from torch import Tensor
from torch_geometric.nn.conv import FastRGCNConv


class WeightedRGCNConv(FastRGCNConv):
    r""":class:`~torch_geometric.nn.conv.RGCNConv` (as its message-passing
    form :class:`~torch_geometric.nn.conv.FastRGCNConv`: the same
    parameters and arguments) whose messages are scaled by a weight per
    edge,

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{\Theta}_{\textrm{root}} \cdot
        \mathbf{x}_i + \sum_{r \in \mathcal{R}} \sum_{j \in
        \mathcal{N}_r(i)} \frac{w_{j,r,i}}{|\mathcal{N}_r(i)|}
        \mathbf{\Theta}_r \cdot \mathbf{x}_j

    (:obj:`aggr="mean"`, RGCN's default; :obj:`"add"` drops the
    :math:`1/|\mathcal{N}_r(i)|`).  Without :obj:`edge_weight` it computes
    what :class:`~torch_geometric.nn.conv.RGCNConv` computes.  With
    DegreEmbed's weights, :math:`w_{j,r,i} = K \rho_{j,r}`
    (:obj:`DegreeEmbedding.edge_weight(..., scale=True)`): each entity
    weighs the relations of its messages by its degree-type set.

    Args:
        **kwargs: :class:`~torch_geometric.nn.conv.RGCNConv`'s
            (:obj:`in_channels`, :obj:`out_channels`, :obj:`num_relations`,
            :obj:`num_bases`, :obj:`aggr`, ...).

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})` or node
          indices :math:`(|\mathcal{V}|)`, edge indices :math:`(2,
          |\mathcal{E}|)` (a tensor), edge types :math:`(|\mathcal{E}|)`,
          edge weights :math:`(|\mathcal{E}|)` *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F_{out})`
    """
    _edge_weight: Optional[Tensor] = None

    def forward(self, x, edge_index, edge_type=None,
                edge_weight: Optional[Tensor] = None):
        if edge_weight is not None:
            if not isinstance(edge_index, Tensor):
                raise TypeError("'edge_weight' needs 'edge_index' as a "
                                'tensor of shape [2, E]')
            if edge_weight.shape != edge_index[0].shape:
                raise ValueError(f"'edge_weight' must have shape "
                                 f'[{edge_index.size(1)}], got '
                                 f'{list(edge_weight.shape)}')
        # The messages are made in edge order: each is scaled by its
        # edge's weight before the aggregation.
        self._edge_weight = edge_weight
        try:
            return super().forward(x, edge_index, edge_type)
        finally:
            self._edge_weight = None

    def message(self, x_j: Tensor, edge_type: Tensor,
                edge_index_j: Tensor) -> Tensor:
        out = super().message(x_j, edge_type, edge_index_j)
        if self._edge_weight is not None:
            out = out * self._edge_weight.view(-1, 1).to(out.dtype)
        return out


__all__ = ['WeightedRGCNConv']
