r"""Typed paths out of entities, counted per pattern.

A pattern is a sequence of edge types :math:`(k_1, \ldots, k_l)`; its id is
:math:`\sum_i (k_i + 1) (K + 1)^{l - i}` (:func:`pattern_of` reads it back).
Paths are expanded as a frontier over the graph's CSR structure and merged
by (walk, entity, pattern) after every step: no Python loop over paths and
no dense :math:`N \times N` matrix.  Saturation, grounded rule confidences
and :class:`~pyg_degreembed.AppliedRules` are built on it.
"""
import weakref
from typing import Dict, Iterator, List, Optional, Tuple

import torch
from torch import Tensor

from pyg_degreembed.data.kg import query_edges
from pyg_degreembed.data.ragged import (find_sorted, outside_ranges,
                                        ragged_arange)
from pyg_degreembed.data.typed_graph import SourceWeights, TypedGraph
from pyg_degreembed.training.budget import ResourceError, check_memory


def expand_paths(graph: TypedGraph, start: Tensor, num_steps: int,
                 removed: Optional[Tuple[Tensor, Tensor]] = None,
                 weight: Optional[SourceWeights] = None, offset: int = 0,
                 by_pattern: bool = True,
                 prefixes: Optional[Tuple[Tensor, Tensor]] = None
                 ) -> Iterator[Tuple[Tensor, Tensor, Tensor, Tensor]]:
    r"""Yields, after each step :math:`l = 1, \ldots, L`, the paths of
    length :math:`l` out of every start entity, merged by end entity and
    pattern: :obj:`(walk, node, pattern, count)`, each of shape
    :obj:`[M_l]`, sorted by :obj:`(walk, node, pattern)`, each state once,
    with :obj:`walk` the position in :obj:`start` and
    :obj:`count` the number of such paths (with :obj:`weight`
    :math:`\rho`, a path :math:`z_0 \xrightarrow{k_1} z_1 \cdots` counts
    :math:`\prod_i \rho_{z_{i-1}, k_i}`, read in column :obj:`walk +
    offset`).

    Args:
        graph (TypedGraph): The graph.
        start (torch.Tensor): Start entities, shape :obj:`[B]`.
        num_steps (int): The longest path :math:`L`.
        removed (Tuple[torch.Tensor, torch.Tensor], optional): Edges walk
            :obj:`b` does not take: ids in :obj:`[lo[b, s], hi[b, s])`
            (see :meth:`TypedGraph.edge_range`), shape :obj:`[B, S]`.
            (default: :obj:`None`)
        weight (SourceWeights, optional): :math:`\rho`. (default:
            :obj:`None`, every path counts 1)
        offset (int, optional): Column of walk 0 in :obj:`weight`.
            (default: :obj:`0`)
        by_pattern (bool, optional): If :obj:`False`, paths are merged by
            end entity only (every pattern id is :obj:`0`): the entities
            reachable in exactly :math:`l` steps. (default: :obj:`True`)
        prefixes (Tuple[torch.Tensor, torch.Tensor], optional): Only the
            paths whose pattern is allowed are expanded: :obj:`(label,
            allowed)`, a label per walk (shape :obj:`[B]`) and the sorted
            allowed keys :math:`\mathrm{label} \cdot (K + 1)^L +
            \mathrm{pattern}` (every prefix of an allowed pattern must be
            allowed too, e.g. the prefixes of the rules of each walk's
            query relation). (default: :obj:`None`, all paths)
    """
    if by_pattern:
        check_pattern_keys(graph.num_edge_types, num_steps,
                           start.numel() * graph.num_nodes)
    state = _start_state(start, weight is None)
    for step in range(1, num_steps + 1):
        state = _expand_step(graph, state, step, num_steps, start.numel(),
                             removed, weight, offset, by_pattern, prefixes)
        yield state


def _start_state(start: Tensor, counted: bool
                 ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    # The paths of length 0: (walk, node, pattern, count) of each start.
    walk = torch.arange(start.numel(), device=start.device)
    return walk, start, torch.zeros_like(start), torch.ones(
        start.numel(), device=start.device,
        dtype=torch.long if counted else torch.double)


def _expand_step(graph: TypedGraph,
                 state: Tuple[Tensor, Tensor, Tensor, Tensor], step: int,
                 num_steps: int, num_starts: int,
                 removed: Optional[Tuple[Tensor, Tensor]] = None,
                 weight: Optional[SourceWeights] = None, offset: int = 0,
                 by_pattern: bool = True,
                 prefixes: Optional[Tuple[Tensor, Tensor]] = None
                 ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    # One step of expand_paths: the states (walk, node, pattern, count) of
    # length `step` from those of length step - 1, merged.
    N, K = graph.num_nodes, graph.num_edge_types
    walk, node, pattern, count = state
    entry, edge = _allowed_edges(
        graph, (walk, node, pattern), num_steps,
        prefixes if by_pattern else None,
        f'Expanding {num_starts} paths to length {step}')
    if removed is not None:
        walk_e = walk[entry]
        keep = outside_ranges(edge, removed[0][walk_e], removed[1][walk_e])
        entry, edge = entry[keep], edge[keep]
    # The key (walk, entity, pattern) of every expanded path, as the sum of
    # a part per state and a part per edge; equal keys merge.
    base = (K + 1)**step if by_pattern else 1
    if by_pattern:
        # (The edges' part from the edges taken: a pass over every edge of
        # a 10M-triple KG cost 0.1 s per step, per part.)
        key = (walk * (N * base) + pattern * (K + 1))[entry] + \
            graph.edge_dst[edge] * base + graph.edge_type[edge] + 1
    else:
        key = (walk * N)[entry] + graph.edge_dst[edge]
    key, inverse = torch.unique(key, return_inverse=True)
    spread = count[entry]
    if weight is not None:
        spread = spread * weight.at(graph.edge_src[edge],
                                    graph.edge_type[edge],
                                    walk[entry] + offset).double()
    count = count.new_zeros(key.numel()).index_add_(0, inverse, spread)
    pattern = key % base
    walk = key // base
    node = walk % N
    walk = walk // N
    return walk, node, pattern, count


def expand_paths_in_parts(graph: TypedGraph, start: Tensor, num_steps: int,
                          last_step: int,
                          removed: Optional[Tuple[Tensor, Tensor]] = None,
                          prefixes: Optional[Tuple[Tensor, Tensor]] = None,
                          max_walks: Optional[int] = None
                          ) -> Iterator[Tuple[int, Tensor, Tensor, Tensor,
                                              bool]]:
    r"""The states :obj:`(walk, node, pattern)` of :func:`expand_paths`
    (same arguments; :obj:`num_steps` numbers the patterns and
    :obj:`prefixes`) after each step :math:`l = 1, \ldots,`
    :obj:`last_step`, in parts: where the states of a step have more
    out-edges than :obj:`max_walks` (default :data:`MAX_WALKS`), they are
    halved (by their out-edges, a state never split) until each part has at
    most that many or is one state, and each part is expanded on its own.
    Yields :obj:`(l, walk, node, pattern, whole)` per part, sorted and
    distinct within it, :obj:`whole` telling whether no step up to
    :math:`l` was split (the states of :func:`expand_paths`); a state
    reached from states of several parts is yielded once per part (merge
    them).  Bounds the memory of a step by a part's expansion whatever the
    walks of the start's paths (a hub's)."""
    if max_walks is None:
        max_walks = MAX_WALKS
    check_pattern_keys(graph.num_edge_types, num_steps,
                       start.numel() * graph.num_nodes)
    stack = [(0, _start_state(start, True), True)]
    while stack:
        step, state, whole = stack.pop()
        out_deg = graph.node_ptr[state[1] + 1] - graph.node_ptr[state[1]]
        total = float(out_deg.sum())
        if out_deg.numel() > 1 and total > max_walks:
            half = int(torch.searchsorted(out_deg.cumsum(0).double(),
                                          total / 2))
            half = min(max(half, 1), out_deg.numel() - 1)
            walk, node, pattern, count = state
            stack.append((step, (walk[half:], node[half:], pattern[half:],
                                 count[half:]), False))
            stack.append((step, (walk[:half], node[:half], pattern[:half],
                                 count[:half]), False))
            continue
        state = _expand_step(graph, state, step + 1, num_steps,
                             start.numel(), removed, None, 0, True, prefixes)
        yield step + 1, state[0], state[1], state[2], whole
        if step + 1 < last_step:
            stack.append((step + 1, state, whole))


def _allowed_edges(graph: TypedGraph,
                   state: Tuple[Tensor, Tensor, Tensor], num_steps: int,
                   prefixes: Optional[Tuple[Tensor, Tensor]], what: str
                   ) -> Tuple[Tensor, Tensor]:
    # The out-edges that extend the paths `state` = (walk, node, pattern)
    # (patterns numbered for num_steps edges) to an allowed prefix
    # (`prefixes` as in expand_paths; every out-edge without), as (state
    # index, edge) pairs; read per allowed (entity, type) pair where those
    # are fewer than the out-edges. Their memory is checked first
    # (BYTES_PER_WALK each, `what` names the work in the refusal).
    K = graph.num_edge_types
    walk, node, pattern = state
    out_deg = graph.node_ptr[node + 1] - graph.node_ptr[node]
    typed = None if prefixes is None else _typed_edges(
        graph, walk, node, pattern, prefixes, num_steps,
        float(out_deg.sum()))
    size = float(out_deg.sum()) if typed is None else typed[1].numel()
    check_memory(BYTES_PER_WALK * size, what)
    if typed is not None:
        return typed
    entry, edge = ragged_arange(graph.node_ptr[node], out_deg)
    if prefixes is not None:
        label, allowed = prefixes
        extended = pattern[entry] * (K + 1) + graph.edge_type[edge]
        keep = find_sorted(allowed, label[walk[entry]] *
                           (K + 1)**num_steps + extended + 1)[1]
        entry, edge = entry[keep], edge[keep]
    return entry, edge


def _typed_edges(graph: TypedGraph, walk: Tensor, node: Tensor,
                 pattern: Tensor, prefixes: Tuple[Tensor, Tensor],
                 num_steps: int, untyped: float
                 ) -> Optional[Tuple[Tensor, Tensor]]:
    # The (state, edge) pairs of the states' allowed extensions, read from
    # the edges of each allowed (entity, type) pair only; None where the
    # allowed extensions are more than the `untyped` out-edges (reading
    # every out-edge and testing it is then cheaper).
    K = graph.num_edge_types
    label, allowed = prefixes
    base = label[walk] * (K + 1)**num_steps + pattern * (K + 1)
    lo = torch.searchsorted(allowed, base + 1)
    hi = torch.searchsorted(allowed, base + K + 1)
    if float((hi - lo).sum()) > untyped:
        return None
    state, child = ragged_arange(lo, hi - lo)
    first, last = graph.type_range(node[state],
                                   allowed[child] % (K + 1) - 1)
    row, edge = ragged_arange(first, last - first)
    return state[row], edge


#: The most walks (paths before merging) one call of :func:`walk_chunks`
#: plans: more is refused
#: (:class:`~pyg_degreembed.training.budget.ResourceError`) rather than run
#: for hours.
MAX_TOTAL_WALKS = 1e10
#: Walks expanded per second by :func:`path_counts` on 2 CPU cores (Family,
#: paths of length 3), for the message.
WALKS_PER_SECOND = 3e7

#: Memory a walk (a path before merging) takes while a step of
#: :func:`expand_paths` runs: its edge, walk, key, inverse, count and the
#: sort of the keys, 8 bytes each.
BYTES_PER_WALK = 96


def check_pattern_keys(num_edge_types: int, num_steps: int,
                       factor: int = 1):
    r"""Refuses a path length whose pattern ids (times :obj:`factor`, the
    other fields a key packs with them) do not fit a 64-bit integer."""
    if factor * (num_edge_types + 1)**num_steps >= 2**63:
        longest = 0
        while factor * (num_edge_types + 1)**(longest + 1) < 2**63:
            longest += 1
        raise ValueError(
            f'Paths of {num_steps} edges over {num_edge_types} edge types '
            f'have too many patterns to number in 64 bits here (at most '
            f'{longest} edges)')


#: The most walks (paths before merging) expanded at once by the chunked
#: helpers: bounds their memory (a walk costs some tens of bytes per step).
MAX_WALKS = 4_000_000


def walk_counts(graph: TypedGraph, num_steps: int,
                cap: Optional[int] = None) -> Tensor:
    r"""Per entity, its walks (paths before merging) of :math:`l = 1,
    \ldots,` :obj:`num_steps` edges: :math:`\mathbf{w}_l = \mathbf{M}
    \mathbf{w}_{l-1}`, :math:`\mathbf{w}_0 = \mathbf{1}`,
    :math:`\mathbf{M}` counting the edges; with :obj:`cap` :math:`c`, at
    most :math:`c` last edges out of an entity counted:
    :math:`\mathbf{w}_1 = \min(\mathbf{M} \mathbf{1}, c)`.  Kept for the
    graph (each step is a pass over its edges).

    :rtype: :class:`torch.Tensor` of shape :obj:`[L, N]`, float64
    """
    kept = _WALK_COUNTS.setdefault(graph, {})
    known = kept.get(cap)
    if known is None or known.size(0) < num_steps:
        rows: List[Tensor] = []
        walks = torch.ones(graph.num_nodes, dtype=torch.double,
                           device=graph.device)
        for _ in range(num_steps):
            walks = walks.new_zeros(graph.num_nodes).index_add_(
                0, graph.edge_src, walks[graph.edge_dst])
            if cap is not None and not rows:
                walks = walks.clamp(max=cap)
            rows.append(walks)
        known = torch.stack(rows) if rows else \
            walks.new_zeros(0, graph.num_nodes)
        kept[cap] = known
    return known[:num_steps]


# The walk counts of the graphs in use, by cap (see walk_counts).
_WALK_COUNTS: 'weakref.WeakKeyDictionary[TypedGraph, Dict[Optional[int], ' \
    'Tensor]]' = weakref.WeakKeyDictionary()


def walk_totals(graph: TypedGraph, num_steps: int) -> Tensor:
    r"""Per entity, its walks of :math:`1, \ldots,` :obj:`num_steps` edges
    in all: :math:`\sum_l \mathbf{w}_l` (see :func:`walk_counts`; float64,
    shape :obj:`[N]`)."""
    return walk_counts(graph, num_steps).sum(0)


def walk_chunks(graph: TypedGraph, start: Tensor, num_steps: int,
                max_size: int, max_walks: Optional[int] = None,
                max_total: Optional[float] = MAX_TOTAL_WALKS
                ) -> List[Tuple[int, int]]:
    r"""Splits :obj:`start` into consecutive ranges :obj:`[begin, end)` of
    at most :obj:`max_size` entities whose walks of length
    :obj:`num_steps` (:math:`\mathbf{w}_L` of :func:`walk_counts`) add up
    to at most :obj:`max_walks` (see :func:`cost_ranges`; default
    :data:`MAX_WALKS`).  More than :obj:`max_total` walks in all are
    refused (:obj:`None`: never)."""
    walks = walk_counts(graph, num_steps)[-1][start] if num_steps else \
        torch.ones(start.numel(), dtype=torch.double, device=start.device)
    total = float(walks.sum())
    if max_total is not None and total > max_total:
        raise ResourceError(
            f'Paths of length {num_steps} from {start.numel()} start '
            f'entities are about {total:.2g} walks, over the limit of '
            f'{max_total:.0e} (about {total / WALKS_PER_SECOND:.0f} s '
            f'at {WALKS_PER_SECOND:.0e} walks per second on 2 cores): use '
            'shorter paths or fewer queries')
    return cost_ranges(walks, max_size,
                       MAX_WALKS if max_walks is None else max_walks)


def cost_ranges(cost: Tensor, max_size: int, max_cost: float
                ) -> List[Tuple[int, int]]:
    r"""Splits the positions of :obj:`cost` (shape :obj:`[B]`) into
    consecutive ranges :obj:`[begin, end)` of at most :obj:`max_size`
    positions whose costs add up to at most :obj:`max_cost`; a position
    costing more is a range of its own."""
    out, begin, total = [], 0, 0.
    for i, c in enumerate(cost.tolist()):
        if i > begin and (total + c > max_cost or i - begin >= max_size):
            out.append((begin, i))
            begin, total = i, 0.
        total += c
    if begin < cost.numel():
        out.append((begin, cost.numel()))
    return out


def path_counts(graph: TypedGraph, triples: Tensor, num_steps: int,
                num_relations: int, min_length: int = 1,
                chunk_size: int = 2048,
                weight: Optional[SourceWeights] = None
                ) -> Tuple[Tensor, Tensor, Tensor]:
    r"""Counts, for every triple :math:`(h, q, t)`, the paths from :math:`h`
    to :math:`t` of every pattern of length :obj:`min_length` to
    :obj:`num_steps`, in :obj:`graph` without the triple's own edge and its
    inverse (with :obj:`weight`, weighted as in :func:`expand_paths`, the
    triple's column being its position); at most :obj:`chunk_size` triples
    at once, fewer where their walks are many (:func:`walk_chunks`).

    :rtype: (triple index :obj:`[M]`, pattern id :obj:`[M]`, count
        :obj:`[M]`, float with :obj:`weight`)
    """
    out: Tuple[List[Tensor], List[Tensor], List[Tensor]] = ([], [], [])
    for start, end in walk_chunks(graph, triples[0], num_steps, chunk_size):
        h, q, t = triples[:, start:end]
        removed = graph.edge_range(*query_edges(h, q, t, num_relations)[:3])
        for step, (walk, node, pattern, count) in enumerate(expand_paths(
                graph, h, num_steps, removed, weight, start), 1):
            if step >= min_length:
                at_tail = node == t[walk]
                out[0].append(walk[at_tail] + start)
                out[1].append(pattern[at_tail])
                out[2].append(count[at_tail])

    def cat(values: List[Tensor]) -> Tensor:
        return torch.cat(values) if values else \
            torch.empty(0, dtype=torch.long)

    return cat(out[0]), cat(out[1]), cat(out[2])


def pattern_of(pattern_id: int, num_edge_types: int) -> Tuple[int, ...]:
    r"""The edge types of a pattern id (see the module's description)."""
    out = []
    while pattern_id:
        pattern_id, k = divmod(pattern_id, num_edge_types + 1)
        out.append(k - 1)
    return tuple(reversed(out))
