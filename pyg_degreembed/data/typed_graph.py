r"""The observed graph, prepared once for fast typed propagation."""
import itertools
import warnings
from operator import itemgetter
from typing import List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.utils import cumsum, degree

from pyg_degreembed.data.features import (degree_sets_of_pairs,
                                          source_type_pairs)
from pyg_degreembed.data.kg import index_tensor
from pyg_degreembed.data.ragged import (find_sorted, outside_ranges,
                                        ragged_arange)


class _ConstantSparseMatmul(torch.autograd.Function):
    r""":math:`\mathbf{M} \mathbf{Y}` for a constant sparse CSR matrix
    :math:`\mathbf{M}`; the backward pass is :math:`\mathbf{M}^\top
    \mathbf{G}` with a pre-built CSR transpose (no gradient for
    :math:`\mathbf{M}`, which is a constant)."""
    @staticmethod
    def forward(ctx, mat: Tensor, mat_t: Tensor, y: Tensor) -> Tensor:
        ctx.mat_t = mat_t.to(y.dtype)
        return mat.to(y.dtype) @ y

    @staticmethod
    def backward(ctx, grad: Tensor):
        return None, None, ctx.mat_t @ grad


# Up to this many (node, column) cells, :meth:`Signals.from_contributions`
# sums contributions in a dense accumulator; above it, by sorting their keys,
# so that memory and time follow the number of contributions, not N * C.
SIGNALS_DENSE_LIMIT = 1 << 24


class Signals(NamedTuple):
    r"""Signals on the nodes of a graph, :math:`C` of them (one per query and
    rank), stored as their non-zero entries :math:`x_{i,c}`, sorted by
    (node, column).  A query travelling a few hops reaches few entities, so
    this is much smaller than the dense :math:`N \times C` matrix.

    Attributes:
        node (torch.Tensor): Node of each entry, shape :obj:`[M]`.
        column (torch.Tensor): Column (signal) of each entry, shape
            :obj:`[M]`.
        value (torch.Tensor): Value of each entry, shape :obj:`[M]`.
        num_columns (int): The number of signals :math:`C`.
    """
    node: Tensor
    column: Tensor
    value: Tensor
    num_columns: int

    @classmethod
    def from_flat(cls, x: Tensor, num_columns: int) -> 'Signals':
        r"""The non-zero entries of a flattened :obj:`[N * C]` matrix (the
        values stay differentiable)."""
        index = x.detach().nonzero().view(-1)
        return cls(index // num_columns, index % num_columns,
                   x.index_select(0, index), num_columns)

    @classmethod
    def from_contributions(cls, index: Tensor, value: Tensor,
                           num_nodes: int, num_columns: int) -> 'Signals':
        r"""Sums contributions :obj:`value` to the cells :obj:`index = node
        * C + column` and keeps the non-zero sums."""
        if num_nodes * num_columns <= SIGNALS_DENSE_LIMIT:
            out = value.new_zeros(num_nodes * num_columns)
            return cls.from_flat(out.index_add(0, index, value), num_columns)
        key, inverse = torch.unique(index, return_inverse=True)
        total = value.new_zeros(key.numel()).index_add(0, inverse, value)
        keep = (total.detach() != 0).nonzero().view(-1)
        key = key[keep]
        return cls(key // num_columns, key % num_columns,
                   total.index_select(0, keep), num_columns)

    @classmethod
    def one_hot(cls, node: Tensor, value: Tensor) -> 'Signals':
        r"""Signal :obj:`c` equal to :obj:`value[c]` at :obj:`node[c]`."""
        column = torch.arange(node.numel(), device=node.device)
        order = torch.argsort(node * node.numel() + column)
        return cls(node[order], column[order], value[order], node.numel())

    def to_dense(self, num_nodes: int) -> Tensor:
        r"""The dense :obj:`[N, C]` matrix."""
        C = self.num_columns
        out = self.value.new_zeros(num_nodes * C)
        return out.index_add(0, self.node * C + self.column,
                             self.value).view(num_nodes, C)

    def normalize(self, eps: float) -> 'Signals':
        r"""Divides each column by :math:`\max(\sum_i x_{i,c}, \epsilon)`."""
        total = self.value.new_zeros(self.num_columns).index_add(
            0, self.column, self.value).clamp(min=eps)
        return self._replace(value=self.value /
                             total.index_select(0, self.column))


class SourceWeights(NamedTuple):
    r"""Per-source edge-type weights :math:`\rho` of shape :math:`[N, K]`,
    stored once per group of sources that share them: :math:`\rho_i` is row
    :obj:`index[i]` of :obj:`table`.  The degree embedding returns its
    weights this way (one row per degree-type set), so that a batch costs
    nothing per entity of the graph, only per set and per edge used.

    Some queries may see other rows for a few entities (the degree
    embedding's sets without a training query's own edge): entity :math:`i`
    reads row :obj:`override_row[m]` in the signals of query :math:`b`
    where :obj:`override_key[m] = b * N + i`.  Signal (column) :math:`c`
    belongs to query :math:`\lfloor c / \mathrm{columns\_per\_query}
    \rfloor`.

    Attributes:
        table (torch.Tensor): The distinct rows, shape :obj:`[S, K]`.
        index (torch.Tensor): The row of each node, shape :obj:`[N]`.
        override_key (torch.Tensor, optional): Sorted keys
            :obj:`query * N + node` of the per-query rows, shape :obj:`[M]`.
        override_row (torch.Tensor, optional): Their rows, shape :obj:`[M]`.
        columns_per_query (int): Signals per query (the rank :math:`T` in a
            :class:`~pyg_degreembed.RuleReasoner`). (default: :obj:`1`)
    """
    table: Tensor
    index: Tensor  # type: ignore[assignment]  # shadows tuple.index
    override_key: Optional[Tensor] = None
    override_row: Optional[Tensor] = None
    columns_per_query: int = 1

    @classmethod
    def wrap(cls, rho: Union[Tensor, 'SourceWeights', None]
             ) -> Optional['SourceWeights']:
        r"""A dense :obj:`[N, K]` tensor as :class:`SourceWeights` (one row
        per node); :class:`SourceWeights` and :obj:`None` pass through."""
        if rho is None or isinstance(rho, SourceWeights):
            return rho
        return cls(rho, torch.arange(rho.size(0), device=rho.device))

    def rows(self, src: Tensor, column: Optional[Tensor] = None) -> Tensor:
        r"""The row of :obj:`table` that node :obj:`src` reads in signal
        :obj:`column` (element-wise; the shared row without
        :obj:`column`)."""
        row = self.index.index_select(0, src)
        if self.override_key is None or self.override_row is None or \
                column is None or self.override_key.numel() == 0:
            return row
        query = torch.div(column, self.columns_per_query,
                          rounding_mode='floor')
        wanted = query * self.index.numel() + src
        pos = torch.searchsorted(self.override_key, wanted).clamp(
            max=self.override_key.numel() - 1)
        return torch.where(self.override_key[pos] == wanted,
                           self.override_row[pos], row)

    def at(self, src: Tensor, edge_type: Tensor,
           column: Optional[Tensor] = None) -> Tensor:
        r""":math:`\rho_{\mathrm{src}, \mathrm{type}}` as signal
        :obj:`column` sees it (see :meth:`rows`), differentiable."""
        return self.of_rows(self.rows(src, column), edge_type)

    def of_rows(self, row: Tensor, edge_type: Tensor) -> Tensor:
        r"""Entries :obj:`table[row, edge_type]`, differentiable."""
        return self.table.reshape(-1).index_select(
            0, row * self.table.size(1) + edge_type)

    def to_dense(self) -> Tensor:
        r"""The :obj:`[N, K]` matrix of the shared rows."""
        return self.table.index_select(0, self.index)


class TypedGraph:
    r"""A directed multigraph with typed edges, prepared once for fast typed
    propagation of many signals at once (one signal per query and rank):

    .. math::
        \mathbf{x}'_{j,c} = \sum_{(i \xrightarrow{k} j) \in E}
        \mathbf{x}_{i,c} \, \mathbf{a}_{k,c} \, \rho_{i,k}

    Signals are kept as their non-zero entries (:class:`Signals`).  Two
    exact ways to compute one hop are offered, and :obj:`mode="auto"` picks
    the cheaper one per hop:

    * :obj:`"dense"`: the graph is lifted to its :math:`P` unique
      (source, type) pairs;
      :math:`\mathbf{y}_{p,c} = \mathbf{x}_{\mathrm{src}(p),c} \,
      \mathbf{a}_{\mathrm{type}(p),c} \, \rho_{\mathrm{src}(p),
      \mathrm{type}(p)}` and :math:`\mathbf{X}' = \mathbf{M}\mathbf{Y}`
      with a constant sparse :math:`\mathbf{M} \in \mathbb{N}^{N \times P}`
      counting the edges from each pair to each target.  Cost
      :math:`O((P + E) C)`.
    * :obj:`"sparse"` (frontier): only the non-zero entries of
      :math:`\mathbf{x}` are expanded along their out-edges.  Cost
      :math:`O(\sum_{(i,c): x_{i,c} \neq 0} \mathrm{outdeg}(i))` plus a
      few cheap passes over an :math:`N C` accumulator, which is far less
      when signals start from one entity and travel few hops.

    Duplicate edges count as often as they occur.

    Args:
        edge_index (torch.Tensor): Edge indices, shape :obj:`[2, E]`.
        edge_type (torch.Tensor): Edge types, shape :obj:`[E]`.
        num_nodes (int): The number of entities :math:`N`.
        num_edge_types (int): The number of edge types :math:`K`.
    """
    _tensors = ('edge_src', 'edge_type', 'edge_dst', 'edge_keys', 'node_ptr',
                'pair_src', 'pair_type', 'mat', 'mat_t', 'pair_ptr',
                'pair_count', 'pair_keys', 'pair_start', 'pair_table',
                'in_perm', 'in_ptr', 'loop_src', 'loop_type', 'loop_ptr')

    # "auto" takes the sparse hop while it expands fewer than this many
    # elements per (edge, signal) pair of the dense hop.  Set by hand from
    # the per-hop timings on Family (sparse about 10x faster from a one-hot
    # start); not tuned further.
    SPARSE_THRESHOLD = 0.3
    # The cost of propagate_groups per (edge, column), per (node, column)
    # and per (edge or node, group), in units of one expanded element of the
    # sparse hop (about 110 ns on 2 cores); fitted by hand to the per-hop
    # timings on FB15k-237 and WN18RR quoted in the performance guide.
    GROUPED_COSTS = (0.001, 0.03, 0.03)
    # Columns per block of propagate_groups: the sparse-dense product is
    # 1.5-2x faster on blocks of 32 columns than on 256 (FB15k-237, WN18RR).
    GROUP_COLUMNS = 32
    # The cost of propagate_groups through the (source, type) pairs per
    # (pair, column), in the units of GROUPED_COSTS (it replaces the cost
    # per group): measured on synthetic KGs of 1M and 10M triples with one
    # column per group, 0.04 s against 0.10 s for 8 columns (1M) and 0.64 s
    # against 2.14 s (10M); with 8 columns per group the matrix per group
    # is 1.1-2.6x faster.
    PAIR_COST = 0.05
    # Columns the pairs' way takes at once: its intermediates are 2 x P x
    # this many values (at 10M triples, 6.8M pairs: 0.4 GiB).
    PAIR_COLUMNS = 8
    # type_range() reads a dense (entity, type) -> pair table of 4 bytes per
    # entry where N * K is at most this (64 MiB), and searches the sorted
    # pairs otherwise: the table is about 3.5x faster than the search on
    # WN18RR and FB15k-237 (5M lookups).
    PAIR_TABLE_SIZE = 2**24

    def __init__(self, edge_index: Tensor, edge_type: Tensor, num_nodes: int,
                 num_edge_types: int):
        edge_index = index_tensor(edge_index, 'edge_index')
        edge_type = index_tensor(edge_type, 'edge_type')
        _check_graph(edge_index, edge_type, num_nodes, num_edge_types)
        self.num_nodes = num_nodes
        self.num_edge_types = num_edge_types
        self.num_edges = edge_index.size(1)
        K, N = num_edge_types, num_nodes

        # Edges sorted by (source, type, target): CSR by source, and equal
        # (duplicate) edges are contiguous.
        key = (edge_index[0] * K + edge_type) * N + edge_index[1]
        self.edge_keys, perm = torch.sort(key)
        self.edge_src = edge_index[0, perm]
        self.edge_dst = edge_index[1, perm]
        self.edge_type = edge_type[perm]
        self.node_ptr = cumsum(degree(self.edge_src, N, dtype=torch.long))

        pairs = source_type_pairs(edge_index, edge_type, K)
        self.pair_src, self.pair_type = pairs // K, pairs % K
        pair_of_edge = torch.searchsorted(pairs, self.edge_src * K +
                                          self.edge_type)
        ones = torch.ones(self.num_edges, device=edge_index.device)
        # M[dst, pair] = number of edges; coalesce() sums duplicates and
        # sorts indices, so both CSR matrices have sorted columns.
        coo = torch.sparse_coo_tensor(
            torch.stack([self.edge_dst, pair_of_edge]), ones,
            (N, pairs.numel()), check_invariants=False).coalesce()
        with warnings.catch_warnings():  # "CSR support is in beta state"
            warnings.simplefilter('ignore', UserWarning)
            self.mat = coo.to_sparse_csr()
            self.mat_t = coo.t().coalesce().to_sparse_csr()
        self.degree = degree_sets_of_pairs(pairs, N, K)
        # For hops that only need some targets and the column totals:
        # pairs by source with their edge counts, and edges by target.
        self.pair_ptr = cumsum(degree(self.pair_src, N, dtype=torch.long))
        self.pair_count = torch.bincount(pair_of_edge,
                                         minlength=pairs.numel())
        # The sorted pair keys src * K + type, the first edge of each pair
        # in the sorted edge list, and the pair of each (entity, type) (-1:
        # none) where that table is small.
        self.pair_keys = pairs
        self.pair_start = self.pair_count.cumsum(0) - self.pair_count
        self.pair_table = torch.full(
            (N * K if N * K <= self.PAIR_TABLE_SIZE else 0,), -1,
            dtype=torch.int32, device=edge_index.device)
        if self.pair_table.numel():
            self.pair_table[pairs] = torch.arange(
                pairs.numel(), dtype=torch.int32, device=edge_index.device)
        self.in_perm = torch.sort(self.edge_dst, stable=True).indices
        self.in_ptr = cumsum(degree(self.edge_dst, N, dtype=torch.long))
        # Rows of the matrices of propagate_groups (CSR, sorted columns):
        # the in-edges of each target and the diagonal (edge type K).
        nodes = torch.arange(N, device=edge_index.device)
        src = torch.cat([self.edge_src[self.in_perm], nodes])
        order = torch.argsort(torch.cat([self.edge_dst[self.in_perm], nodes])
                              * N + src, stable=True)
        self.loop_src = src[order]
        self.loop_type = torch.cat([self.edge_type[self.in_perm],
                                    torch.full_like(nodes, K)])[order]
        self.loop_ptr = self.in_ptr + torch.arange(N + 1,
                                                   device=nodes.device)

    @property
    def num_pairs(self) -> int:
        return self.pair_src.numel()

    @property
    def device(self) -> torch.device:
        return self.edge_src.device

    def to(self, device) -> 'TypedGraph':
        r"""Returns a copy on :obj:`device`."""
        out = TypedGraph.__new__(TypedGraph)
        out.__dict__.update(self.__dict__)
        for name in self._tensors:
            setattr(out, name, getattr(self, name).to(device))
        out.degree = self.degree.to(device)
        return out

    def edge_range(self, src: Tensor, edge_type: Tensor,
                   dst: Tensor) -> Tuple[Tensor, Tensor]:
        r"""For each (element-wise) edge :obj:`src -> dst` of type
        :obj:`edge_type`, the range :obj:`[lo, hi)` of the ids of its copies
        in the sorted edge list (empty where the edge is absent)."""
        key = (src * self.num_edge_types + edge_type) * self.num_nodes + dst
        lo = torch.searchsorted(self.edge_keys, key)
        hi = torch.searchsorted(self.edge_keys, key, right=True)
        return lo, hi

    def type_range(self, src: Tensor,
                   edge_type: Tensor) -> Tuple[Tensor, Tensor]:
        r"""For each (element-wise) entity :obj:`src` and edge type, the
        range :obj:`[lo, hi)` of the ids of its out-edges of that type in
        the sorted edge list (empty where it has none)."""
        key = src * self.num_edge_types + edge_type
        if self.num_pairs == 0:
            lo = torch.zeros_like(key)
            return lo, lo
        if self.pair_table.numel():
            pair = self.pair_table[key].long()
        else:
            at, found = find_sorted(self.pair_keys, key)
            pair = torch.where(found, at, -1)
        has = pair >= 0
        pair = pair.clamp(min=0)
        lo = self.pair_start[pair]
        return lo, torch.where(has, lo + self.pair_count[pair], lo)

    def degree_without(self, src: Tensor, edge_type: Tensor, dst: Tensor,
                       query: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
        r"""The degree-type sets of the entities whose set changes when
        edges are left out for single queries: query :obj:`query[m]` does
        not see edge :obj:`src[m] -> dst[m]` of type :obj:`edge_type[m]`
        (all its copies), so :obj:`src[m]` loses that type from its set if
        it has no other edge of it.  Element-wise inputs of one shape.

        :rtype: (:class:`torch.Tensor`, ...): the sorted keys
            :obj:`query * N + entity` of the changed sets, shape
            :obj:`[M]`; the entity's set in :obj:`degree` (a row of
            :obj:`degree.tokens`), shape :obj:`[M]`; the changed sets,
            padded as :obj:`degree.tokens`, shape :obj:`[M, S]`, and their
            lengths, shape :obj:`[M]`.
        """
        K, N = self.num_edge_types, self.num_nodes
        src, edge_type = src.reshape(-1), edge_type.reshape(-1)
        dst, query = dst.reshape(-1), query.reshape(-1)
        lo, hi = self.edge_range(src, edge_type, dst)
        # All edges of src with that type: keys [pair * N, (pair + 1) * N).
        pair = src * K + edge_type
        count = torch.searchsorted(self.edge_keys, (pair + 1) * N) - \
            torch.searchsorted(self.edge_keys, pair * N)
        loses = (hi > lo) & (hi - lo == count)
        src, edge_type, query = src[loses], edge_type[loses], query[loses]
        keys, which = torch.unique(query * N + src, return_inverse=True)
        base = self.degree.index[keys % N]
        rows = self.degree.tokens[base]
        drop = torch.zeros_like(rows).index_add_(
            0, which, (rows[which] == edge_type.unsqueeze(-1)).long())
        rows = torch.where(drop > 0, K, rows).sort(dim=1).values
        return keys, base, rows, (rows != K).sum(dim=1).clamp(min=1)

    def neighborhood(self, nodes: Tensor, hops: int) -> Tensor:
        r"""The sorted unique entities within :obj:`hops` hops of
        :obj:`nodes` along the edges (the nodes themselves included)."""
        nodes = torch.unique(nodes)
        for _ in range(hops):
            out_deg = self.node_ptr[nodes + 1] - self.node_ptr[nodes]
            _, edge = ragged_arange(self.node_ptr[nodes], out_deg)
            nodes = torch.unique(torch.cat([nodes, self.edge_dst[edge]]))
        return nodes

    def propagate(
        self,
        x: Signals,
        type_weight: Tensor,
        rho: Union[Tensor, 'SourceWeights', None] = None,
        self_weight: Optional[Tensor] = None,
        removed: Optional[Tuple[Tensor, Tensor]] = None,
        mode: str = 'auto',
    ) -> Signals:
        r"""One hop of typed propagation for :math:`C` signals at once:

        .. math::
            \mathbf{x}'_{j,c} = \sum_{(i \xrightarrow{k} j) \in E}
            \mathbf{x}_{i,c} \, \mathbf{a}_{k,c} \, \rho_{i,k}
            + s_c \, \mathbf{x}_{j,c}

        Args:
            x (Signals): The signals, :math:`C` columns.
            type_weight (torch.Tensor): Per-signal weight :math:`\mathbf{a}`
                of every edge type, shape :obj:`[K, C]`.
            rho (torch.Tensor or SourceWeights, optional): Per-source weight
                of every edge type, shape :obj:`[N, K]`. (default:
                :obj:`None`, all ones)
            self_weight (torch.Tensor, optional): Per-signal weight
                :math:`s` of the identity, shape :obj:`[C]`.
                (default: :obj:`None`, no identity term)
            removed (Tuple[torch.Tensor, torch.Tensor], optional): Edges left
                out for single signals: :obj:`(lo, hi)` of shape
                :obj:`[C, S]` from :meth:`edge_range`; signal :obj:`c` does
                not travel along the edges with ids in
                :obj:`[lo[c, s], hi[c, s])`. (default: :obj:`None`)
            mode (str, optional): :obj:`"dense"`, :obj:`"sparse"` or
                :obj:`"auto"`. (default: :obj:`"auto"`)

        :rtype: :class:`Signals`
        """
        C = x.num_columns
        weights = SourceWeights.wrap(rho)
        if self.hop_is_sparse(x, mode):
            out_deg = self.node_ptr[x.node + 1] - self.node_ptr[x.node]
            index, value = self._sparse_hop(x, type_weight, weights, removed,
                                            out_deg, int(out_deg.sum()))
            if self_weight is not None:
                index = torch.cat([index, x.node * C + x.column])
                value = torch.cat([value, self._stay(x, self_weight)])
            return Signals.from_contributions(index, value, self.num_nodes,
                                              C)
        return Signals.from_flat(self.propagate_dense(
            x, type_weight, weights, self_weight, removed).view(-1), C)

    def hop_is_sparse(self, x: Signals, mode: str = 'auto') -> bool:
        r"""Whether :meth:`propagate` takes the sparse (frontier) way for
        the signals :obj:`x`: forced by :obj:`mode`, or with
        :obj:`mode="auto"` when expanding their entries along their edges
        is cheaper than the dense hop."""
        work = int((self.node_ptr[x.node + 1] - self.node_ptr[x.node]).sum()
                   ) if mode == 'auto' else 0  # else the mode decides
        return self._sparse(mode, work, self.num_edges * x.num_columns)

    def groups_are_cheaper(self, x: Signals, num_groups: int) -> bool:
        r"""Whether the hop of the signals :obj:`x` costs less as
        :meth:`propagate_groups` (:obj:`num_groups` groups) than the sparse
        way, from the measured costs :attr:`GROUPED_COSTS`."""
        work = int((self.node_ptr[x.node + 1] - self.node_ptr[x.node]).sum())
        per_edge, per_node, _ = self.GROUPED_COSTS
        E, N, C = self.num_edges, self.num_nodes, x.num_columns
        return work > (per_edge * E * C + per_node * N * C +
                       min(self._group_costs(C, num_groups)))

    def groups_by_pairs(self, num_columns: int, num_groups: int) -> bool:
        r"""Whether :meth:`propagate_groups` takes the (source, type) pairs'
        way for :obj:`num_columns` columns in :obj:`num_groups` groups
        (runs of blocks): one fixed matrix for every group, at a cost per
        (pair, column) (:attr:`PAIR_COST`) instead of a matrix per group
        (:attr:`GROUPED_COSTS`), cheaper where the groups have few
        columns."""
        per_group, by_pairs = self._group_costs(num_columns, num_groups)
        return by_pairs < per_group

    def _group_costs(self, num_columns: int,
                     num_groups: int) -> Tuple[float, float]:
        # The cost of propagate_groups' matrices: one per group, or the
        # pairs' values of every column (the units of GROUPED_COSTS).
        return (self.GROUPED_COSTS[2] * (self.num_edges + self.num_nodes) *
                num_groups, self.PAIR_COST * self.num_pairs * num_columns)

    def propagate_dense(
        self,
        x: Signals,
        type_weight: Tensor,
        rho: Union[Tensor, 'SourceWeights', None] = None,
        self_weight: Optional[Tensor] = None,
        removed: Optional[Tuple[Tensor, Tensor]] = None,
    ) -> Tensor:
        r"""The hop of :meth:`propagate` the dense way, returned as the
        dense :obj:`[N, C]` matrix :math:`\mathbf{x}'` (for a caller that
        reads every entry, as the last step of ranking does; arguments as
        in :meth:`propagate`).

        :rtype: :class:`torch.Tensor` of shape :obj:`[N, C]`
        """
        C = x.num_columns
        out = self._dense_hop(x, type_weight, SourceWeights.wrap(rho),
                              removed)
        if self_weight is not None:
            out = out.index_add(0, x.node * C + x.column,
                                self._stay(x, self_weight))
        return out.view(self.num_nodes, C)

    def propagate_groups(
        self,
        x: Sequence[Tensor],
        group: Sequence[int],
        type_weight: Tensor,
        rho: Union[Tensor, 'SourceWeights', None] = None,
        self_weight: Optional[Tensor] = None,
    ) -> List[Tensor]:
        r"""The hop of :meth:`propagate` for dense signals that come in
        groups sharing their weights (the queries of one relation at one
        rank, in inference): group :math:`g` is one sparse matrix product

        .. math::
            \mathbf{X}'_g = (\mathbf{A}_g + s_g \mathbf{I}) \mathbf{X}_g,
            \qquad \mathbf{A}_g[j, i] = \sum_{(i \xrightarrow{k} j) \in E}
            \mathbf{a}_{k,g} \, \rho_{i,k},

        at cost :math:`O(E + N)` to fill the matrix plus the library's
        sparse-dense product, without the :math:`P \times C`
        intermediates of :meth:`propagate_dense`.  For inference: no
        gradient flows.

        The product is fastest on blocks of a few columns
        (:attr:`GROUP_COLUMNS`): a group may come as several blocks.

        Args:
            x (Sequence[torch.Tensor]): Blocks of dense signals, shapes
                :obj:`[N, C_m]`.
            group (Sequence[int]): The group of each block (the blocks of
                one group in a row).
            type_weight (torch.Tensor): Weight of every edge type per group,
                shape :obj:`[K, G]`.
            rho (torch.Tensor or SourceWeights, optional): As in
                :meth:`propagate`, one row per source (no per-query rows).
                (default: :obj:`None`, all ones)
            self_weight (torch.Tensor, optional): Weight of the identity
                per group, shape :obj:`[G]`. (default: :obj:`None`)

        :rtype: :obj:`List[torch.Tensor]`, the blocks' shapes
        """
        N, K = self.num_nodes, self.num_edge_types
        weights = SourceWeights.wrap(rho)
        if weights is not None and weights.override_key is not None and \
                weights.override_key.numel():
            raise ValueError('propagate_groups takes one rho row per source '
                             '(no per-query rows)')
        if len(group) != len(x):
            raise ValueError(f"'group' must name the group of each of the "
                             f"{len(x)} blocks, got {len(group)}")
        if self_weight is None:
            self_weight = type_weight.new_zeros(type_weight.size(1))
        weight = torch.cat([type_weight, self_weight.view(1, -1)])
        runs = sum(1 for _ in itertools.groupby(group))
        if self.groups_by_pairs(sum(block.size(1) for block in x), runs):
            return self._groups_by_pairs(x, group, weight, weights)
        # The rows of every A_g + s_g I: in-edges and the diagonal, the
        # diagonal as edge type K.
        typ, src = self.loop_type, self.loop_src
        edge = typ < K
        shared = None if weights is None else torch.where(
            edge, weights.at(src, typ.clamp(max=K - 1)), 1.)
        out: List[Tensor] = []
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)  # CSR in beta
            # One matrix per run of blocks of the same group.
            for g, run in itertools.groupby(zip(group, x), key=itemgetter(0)):
                value = weight[:, g].index_select(0, typ)
                if shared is not None:
                    value = value * shared
                mat = torch.sparse_csr_tensor(self.loop_ptr, src, value,
                                              (N, N))
                out.extend(mat @ block for _, block in run)
        return out

    def _groups_by_pairs(self, x: Sequence[Tensor], group: Sequence[int],
                         weight: Tensor, rho: Optional['SourceWeights']
                         ) -> List[Tensor]:
        # propagate_groups through the (source, type) pairs: y[p, c] =
        # x[src(p), c] a[type(p), g(c)] rho[src(p), type(p)], then one
        # product with the fixed [N, P] matrix of edge counts for every
        # group (weight: [K + 1, G], the identity's weight last).
        K = self.num_edge_types
        dense = torch.cat(list(x), dim=1)
        column_group = torch.cat([
            torch.full((block.size(1), ), g, dtype=torch.long,
                       device=dense.device) for block, g in zip(x, group)])
        shared = None if rho is None else \
            rho.at(self.pair_src, self.pair_type).to(dense.dtype)
        mat = self.mat.to(dense.dtype)
        out = torch.empty_like(dense)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)  # CSR in beta
            for lo in range(0, dense.size(1), self.PAIR_COLUMNS):
                part = dense[:, lo:lo + self.PAIR_COLUMNS]
                w = weight[:, column_group[lo:lo + self.PAIR_COLUMNS]]
                y = part.index_select(0, self.pair_src)
                y.mul_(w[:K].index_select(0, self.pair_type))
                if shared is not None:
                    y.mul_(shared.unsqueeze(-1))
                out[:, lo:lo + part.size(1)] = \
                    torch.addcmul(mat @ y, part, w[K])
        return list(out.split([block.size(1) for block in x], dim=1))

    @staticmethod
    def _stay(x: Signals, self_weight: Tensor) -> Tensor:
        # The identity term s_c x_{i,c} of every entry.
        return x.value * self_weight.index_select(0, x.column)

    def propagate_at(
        self,
        x: Signals,
        target: Tensor,
        type_weight: Tensor,
        rho: Union[Tensor, 'SourceWeights', None] = None,
        self_weight: Optional[Tensor] = None,
        removed: Optional[Tuple[Tensor, Tensor]] = None,
        mode: str = 'auto',
    ) -> Tuple[Tensor, Tensor]:
        r"""The same hop as :meth:`propagate`, but only the value at one
        target per signal and every signal's total are computed:
        :math:`\mathbf{x}'_{t_c, c}` and :math:`\sum_j \mathbf{x}'_{j, c}`.
        The totals need no expansion along edges (only along the
        (source, type) pairs of the signal's entities, weighted by their
        edge counts) and the targets only their in-edges, so this is much
        cheaper than a full hop when only these are needed (the last step of
        training with the :obj:`"nll"` loss).

        Args:
            x (Signals): The signals, :math:`C` columns.
            target (torch.Tensor): The target entity of each signal, shape
                :obj:`[C]`.
            type_weight, rho, self_weight, removed: As in :meth:`propagate`.
            mode (str, optional): How the totals are computed:
                :obj:`"sparse"` spreads every non-zero entry over its
                (source, type) pairs, :obj:`"dense"` sums the :math:`P
                \times C` pair values of the dense hop (cheaper once the
                signals cover much of the graph, e.g. after two hops on
                FB15k-237), :obj:`"auto"` picks as :meth:`propagate` does.
                (default: :obj:`"auto"`)

        :rtype: (:class:`torch.Tensor` :obj:`[C]`, :class:`torch.Tensor`
            :obj:`[C]`): values at the targets and totals.
        """
        C = x.num_columns
        weights = SourceWeights.wrap(rho)
        device = x.value.device
        key = x.node * C + x.column  # sorted

        def lookup(node, col):
            # x[node, col] (0 where the signal has no entry), differentiable.
            wanted = node * C + col
            if key.numel() == 0:
                return x.value.new_zeros(wanted.shape)
            pos = torch.searchsorted(key, wanted).clamp(max=key.numel() - 1)
            return torch.where(key[pos] == wanted,
                               x.value.index_select(0, pos), 0.)

        def weight(src, typ, col, row=None):
            w = type_weight.reshape(-1).index_select(0, typ * C + col)
            if weights is not None:
                w = w * (weights.at(src, typ, col) if row is None else
                         weights.of_rows(row, typ))
            return w

        # Totals: each entry spreads x * a_k * rho * (number of k-edges).
        count = self.pair_ptr[x.node + 1] - self.pair_ptr[x.node]
        work = int(count.sum())
        if self._sparse(mode, work, self.num_pairs * C):
            entry, pair = ragged_arange(self.pair_ptr[x.node], count, work)
            col = x.column[entry]
            row = None if weights is None else \
                weights.rows(x.node, x.column)[entry]
            spread = x.value.index_select(0, entry) * weight(
                x.node[entry], self.pair_type[pair], col, row) * \
                self.pair_count[pair]
            total = x.value.new_zeros(C).index_add(0, col, spread)
        else:
            total = self._pair_totals(x.to_dense(self.num_nodes),
                                      type_weight, weights)
        if self_weight is not None:
            total = total + self_weight * x.value.new_zeros(C).index_add(
                0, x.column, x.value)

        # Targets: the in-edges of each target.
        columns = torch.arange(C, device=device)
        count = self.in_ptr[target + 1] - self.in_ptr[target]
        col, slot = ragged_arange(self.in_ptr[target], count)
        edge = self.in_perm[slot]
        src, typ = self.edge_src[edge], self.edge_type[edge]
        arriving = lookup(src, col) * weight(src, typ, col)
        if removed is not None:
            lo, hi = removed[0][col], removed[1][col]
            arriving = torch.where(outside_ranges(edge, lo, hi), arriving,
                                   0.)
            # ... and the left-out edges leave the totals (once each).
            col_r, lo, hi = _distinct_ranges(removed)
            src_r, typ_r = self.edge_src[lo], self.edge_type[lo]
            total = total.index_add(
                0, col_r, -lookup(src_r, col_r) *
                weight(src_r, typ_r, col_r) * (hi - lo))
        value = x.value.new_zeros(C).index_add(0, col, arriving)
        if self_weight is not None:
            value = value + self_weight * lookup(target, columns)
        return value, total

    def _sparse(self, mode: str, work: int, dense_size: int) -> bool:
        # Whether a computation takes its sparse way: forced, or "auto"
        # with fewer expanded elements than SPARSE_THRESHOLD per element of
        # the dense way.
        if mode not in ('auto', 'dense', 'sparse'):
            raise ValueError(f"'mode' must be 'auto', 'dense' or 'sparse', "
                             f"got {mode!r}")
        return mode == 'sparse' or (
            mode == 'auto' and work < self.SPARSE_THRESHOLD * dense_size)

    def _pair_values(self, dense: Tensor, type_weight: Tensor,
                     rho: Optional['SourceWeights']) -> Tensor:
        # y[p, c] = x[src(p), c] a[type(p), c] rho[src(p), type(p)], [P, C].
        y = dense[self.pair_src] * type_weight[self.pair_type]
        if rho is not None:
            y = y * rho.at(self.pair_src, self.pair_type).unsqueeze(-1)
            y = self._override_pairs(y, dense, type_weight, rho)
        return y

    def _dense_hop(self, x: Signals, type_weight, rho, removed) -> Tensor:
        C = x.num_columns
        dense = x.to_dense(self.num_nodes)
        y = self._pair_values(dense, type_weight, rho)
        out = _ConstantSparseMatmul.apply(self.mat, self.mat_t, y).view(-1)
        if removed is not None:
            # Subtract the contribution of each left-out edge (all copies).
            col, lo, hi = _distinct_ranges(removed)
            src, typ = self.edge_src[lo], self.edge_type[lo]
            contrib = dense[src, col] * type_weight[typ, col] * (hi - lo)
            if rho is not None:
                contrib = contrib * rho.at(src, typ, col)
            out = out.index_add(0, self.edge_dst[lo] * C + col, -contrib)
        return out

    def _pair_totals(self, dense: Tensor, type_weight: Tensor,
                     rho: Optional['SourceWeights']) -> Tensor:
        # sum_p count[p] y[p, c] of the pair values, with rho folded into
        # the counts (one pass over the [P, C] values fewer, forward and
        # backward), then the cells of per-query rows corrected.
        y = dense[self.pair_src] * type_weight[self.pair_type]
        count = self.pair_count.to(y.dtype)
        if rho is None:
            return count @ y
        shared = rho.at(self.pair_src, self.pair_type)
        total = (count * shared) @ y
        cells = self._override_cells(rho, y.size(1))
        if cells is None:
            return total
        pair, col, row = cells
        typ = self.pair_type[pair]
        change = rho.of_rows(row, typ) - shared.index_select(0, pair)
        return total.index_add(0, col, y[pair, col] * change * count[pair])

    def _override_pairs(self, y: Tensor, dense: Tensor, type_weight: Tensor,
                        rho: SourceWeights) -> Tensor:
        # y[p, c] of the (pair, signal) cells whose source reads a per-query
        # row of rho (see SourceWeights), recomputed with that row.
        cells = self._override_cells(rho, y.size(1))
        if cells is None:
            return y
        pair, col, row = cells
        node, typ = self.pair_src[pair], self.pair_type[pair]
        value = dense[node, col] * type_weight[typ, col] * rho.of_rows(
            row, typ)
        return y.index_put((pair, col), value)

    def _override_cells(self, rho: SourceWeights, C: int
                        ) -> Optional[Tuple[Tensor, Tensor, Tensor]]:
        # The (pair, signal) cells whose source reads a per-query row of rho
        # (see SourceWeights) and that row: (pair, column, row), or None.
        if rho.override_key is None or rho.override_row is None or \
                rho.override_key.numel() == 0:
            return None
        N = self.num_nodes
        T = rho.columns_per_query
        node, row = rho.override_key % N, rho.override_row
        # Every signal of the query, then every pair of the node.
        first = torch.div(rho.override_key, N, rounding_mode='floor') * T
        cell, col = ragged_arange(first, (C - first).clamp(min=0, max=T))
        node, row = node[cell], row[cell]
        count = self.pair_ptr[node + 1] - self.pair_ptr[node]
        cell, pair = ragged_arange(self.pair_ptr[node], count)
        return pair, col[cell], row[cell]

    def _sparse_hop(self, x: Signals, type_weight, rho, removed, out_deg,
                    work) -> Tuple[Tensor, Tensor]:
        # The contributions (cell node * C + column, value) of every entry
        # travelling along every out-edge of its node.
        C = x.num_columns
        # Expand every entry (i, c) along the out-edges of i: element m of
        # entry n is edge node_ptr[i] + m, at position first[n] + m.
        first = cumsum(out_deg)[:-1]
        entry, edge = ragged_arange(self.node_ptr[x.node], out_deg, work)
        col = x.column.index_select(0, entry)
        typ = self.edge_type.index_select(0, edge)
        value = x.value.index_select(0, entry) * type_weight.reshape(
            -1).index_select(0, typ * C + col)
        if rho is not None:
            # The row of rho of each entry (node, column), then per edge.
            row = rho.rows(x.node, x.column).index_select(0, entry)
            value = value * rho.of_rows(row, typ)
        if removed is not None and work > 0:
            left_out = self._left_out(x, removed, first, work)
            if left_out is not None:
                value = torch.where(left_out, 0., value)
        return self.edge_dst.index_select(0, edge) * C + col, value

    def _left_out(self, x: Signals, removed, first: Tensor,
                  work: int) -> Optional[Tensor]:
        # Which expanded elements travel along a left-out edge.  Found from
        # the few left-out edges, not by testing every element: the edges of
        # entry (i, c) are contiguous.
        C = x.num_columns
        lo, hi = removed
        col = torch.arange(C, device=lo.device).view(-1, 1).expand_as(lo)
        present = hi > lo
        lo, hi, col = lo[present], hi[present], col[present]
        src = self.edge_src[lo]
        key = x.node * C + x.column  # sorted
        wanted = src * C + col
        n = torch.searchsorted(key, wanted).clamp(max=key.numel() - 1)
        found = key[n] == wanted
        if not bool(found.any()):
            return None
        n, lo, hi, src = n[found], lo[found], hi[found], src[found]
        _, position = ragged_arange(first[n] + lo - self.node_ptr[src],
                                    hi - lo)
        mask = torch.zeros(work, dtype=torch.bool, device=position.device)
        return mask.index_fill_(0, position, True)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_nodes={self.num_nodes}, '
                f'num_edges={self.num_edges}, '
                f'num_edge_types={self.num_edge_types}, '
                f'num_pairs={self.num_pairs})')


def _distinct_ranges(removed: Tuple[Tensor, Tensor]):
    r"""The non-empty left-out edge ranges as (column, lo, hi), each range
    once per column.  Ranges are runs of equal edges, so two ranges are
    equal or disjoint; an edge named twice for one signal counts once."""
    lo, order = torch.sort(removed[0], dim=1)
    hi = removed[1].gather(1, order)
    col = torch.arange(lo.size(0), device=lo.device).view(-1, 1).expand_as(lo)
    present = hi > lo
    present[:, 1:] &= lo[:, 1:] != lo[:, :-1]
    return col[present], lo[present], hi[present]


def check_edge_shapes(edge_index: Tensor, edge_type: Tensor):
    r"""Refuses an :obj:`edge_index` that is not :obj:`[2, E]` or an
    :obj:`edge_type` that is not :obj:`[E]`."""
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"'edge_index' must have shape [2, E], got "
                         f"{list(edge_index.shape)}")
    if edge_type.shape != (edge_index.size(1), ):
        raise ValueError(f"'edge_type' must have shape [{edge_index.size(1)}]"
                         f", got {list(edge_type.shape)}")


def _check_graph(edge_index: Tensor, edge_type: Tensor, num_nodes: int,
                 num_edge_types: int):
    check_edge_shapes(edge_index, edge_type)
    if edge_index.numel() > 0:
        lo, hi = int(edge_index.min()), int(edge_index.max())
        if lo < 0 or hi >= num_nodes:
            raise ValueError(f"'edge_index' holds node ids in [{lo}, {hi}], "
                             f"outside [0, {num_nodes}) (num_nodes)")
        lo, hi = int(edge_type.min()), int(edge_type.max())
        if lo < 0 or hi >= num_edge_types:
            raise ValueError(f"'edge_type' holds types in [{lo}, {hi}], "
                             f"outside [0, {num_edge_types})")
