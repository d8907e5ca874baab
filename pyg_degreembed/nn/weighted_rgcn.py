r"""PyG's relational graph convolution with an edge weight, the way into a
relational GNN for DegreEmbed's degree weights
(:meth:`~pyg_degreembed.DegreeEmbedding.edge_weight`)."""
from typing import Optional

import torch
from torch import Tensor
from torch_geometric.nn.conv import RGCNConv
from torch_geometric.utils import scatter


class WeightedRGCNConv(RGCNConv):
    r""":class:`~torch_geometric.nn.conv.RGCNConv` (the same parameters and
    arguments) whose messages are scaled by a weight per edge,

    .. math::
        \mathbf{x}^{\prime}_i = \mathbf{\Theta}_{\textrm{root}} \cdot
        \mathbf{x}_i + \sum_{r \in \mathcal{R}} \mathbf{\Theta}_r \cdot
        \sum_{j \in \mathcal{N}_r(i)} \frac{w_{j,r,i}}{|\mathcal{N}_r(i)|}
        \mathbf{x}_j

    (:obj:`aggr="mean"`, RGCN's default; :obj:`"add"` drops the
    :math:`1/|\mathcal{N}_r(i)|`).  Without :obj:`edge_weight` it is
    :class:`~torch_geometric.nn.conv.RGCNConv`.  With DegreEmbed's weights,
    :math:`w_{j,r,i} = K \rho_{j,r}`
    (:obj:`DegreeEmbedding.edge_weight(..., scale=True)`): each entity
    weighs the relations of its messages by its degree-type set.  The
    weighted sums are aggregated per (node, relation) and then transformed,
    one :math:`[N, |\mathcal{R}|, F_{in}]` tensor, as
    :class:`~torch_geometric.nn.conv.RGCNConv` does per relation.

    Args:
        **kwargs: :class:`~torch_geometric.nn.conv.RGCNConv`'s
            (:obj:`in_channels`, :obj:`out_channels`, :obj:`num_relations`,
            :obj:`num_bases`, :obj:`aggr`, ...); with an edge weight, node
            features (not indices) and no block decomposition.

    Shapes:
        - **input:** node features :math:`(|\mathcal{V}|, F_{in})`, edge
          indices :math:`(2, |\mathcal{E}|)`, edge types
          :math:`(|\mathcal{E}|)`, edge weights :math:`(|\mathcal{E}|)`
          *(optional)*
        - **output:** node features :math:`(|\mathcal{V}|, F_{out})`
    """
    def forward(self, x, edge_index, edge_type=None,
                edge_weight: Optional[Tensor] = None):
        if edge_weight is None:
            return super().forward(x, edge_index, edge_type)
        if not isinstance(x, Tensor) or not torch.is_floating_point(x) or \
                not isinstance(edge_index, Tensor):
            raise TypeError("'edge_weight' needs node features (a float "
                            "tensor) and 'edge_index' as a tensor [2, E]")
        if self.num_blocks is not None:
            raise ValueError("'edge_weight' is not supported with the block "
                             'decomposition (num_blocks)')
        if edge_weight.shape != edge_index[0].shape:
            raise ValueError(f"'edge_weight' must have shape "
                             f'[{edge_index.size(1)}], got '
                             f'{list(edge_weight.shape)}')
        if self.aggr not in ('mean', 'add', 'sum'):
            raise ValueError(f"'edge_weight' needs aggr 'mean' or 'add', "
                             f'got {self.aggr!r}')
        N, R = x.size(0), self.num_relations
        src, dst = edge_index
        cell = dst * R + edge_type
        total = scatter(x[src] * edge_weight.view(-1, 1).to(x.dtype), cell,
                        dim=0, dim_size=N * R, reduce='sum')
        if self.aggr == 'mean':
            count = torch.bincount(cell, minlength=N * R).clamp(min=1)
            total = total / count.view(-1, 1).to(x.dtype)
        weight = self.weight
        if self.num_bases is not None:
            weight = (self.comp @ weight.view(self.num_bases, -1)).view(
                R, self.in_channels_l, self.out_channels)
        out = torch.einsum('nrf,rfo->no', total.view(N, R, -1), weight)
        if self.root is not None:
            out = out + x @ self.root
        if self.bias is not None:
            out = out + self.bias
        return out


__all__ = ['WeightedRGCNConv']
