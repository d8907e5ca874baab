r"""Paths between the two ends of the graph's queries, each query without its
own edge, counted from one path expansion per entity.

A query :math:`(x, q, y)` is answered on the graph without the
edges :math:`E = \{x \xrightarrow{q} y,\; y \xrightarrow{\bar q} x\}` (all
their copies, :math:`m_1` and :math:`m_2`).  Expanding the paths out of
:math:`x` once per query, with :math:`E` removed, costs
:math:`\sum_{(x, q, y)} |\text{walks}(x)|`: every query re-walks the
neighbourhood of its head.  Instead, the paths of the whole graph are
expanded once per entity (:func:`~pyg_degreembed.interpret.paths
.expand_paths`), the counts :math:`F_{u \to v}(\mathbf{p})` of pattern
:math:`\mathbf{p}` between the ends :math:`u, v \in \{x, y\}` of every
query are kept, and the paths that use an edge of :math:`E` are subtracted
exactly.  Split such a path at the *first* edge of :math:`E` it takes, the
:math:`i`-th: a prefix that avoids :math:`E`, the edge, and any suffix, so
that for :math:`t \in \{x, y\}`

.. math::
    A_{x \to t}(k_1 \ldots k_l) = F_{x \to t}(k_1 \ldots k_l) - \sum_{i=1}^l
    \Big( [k_i = q]\, m_1\, A_{x \to x}(k_{<i})\, F_{y \to t}(k_{>i})
    + [k_i = \bar q]\, m_2\, A_{x \to y}(k_{<i})\, F_{x \to t}(k_{>i})
    \Big),

with :math:`A_{x \to x}() = F_{x \to x}() = F_{y \to y}() = 1` and
:math:`A_{x \to y}() = F_{x \to y}() = F_{y \to x}() = 0` (:math:`x \neq
y`).  :math:`A_{x \to y}(\mathbf{p})` is the number of paths of pattern
:math:`\mathbf{p}` from :math:`x` to :math:`y` that avoid :math:`E`:
computed by increasing length, it needs only shorter prefixes.
"""
from typing import List, NamedTuple, Tuple

import torch
from torch import Tensor

from pyg_degreembed.data.kg import query_edges
from pyg_degreembed.data.ragged import find_sorted, ragged_arange
from pyg_degreembed.data.typed_graph import TypedGraph
from pyg_degreembed.interpret.paths import (check_pattern_keys, expand_paths,
                                            walk_chunks)


class QueryPaths(NamedTuple):
    r"""The outcome of :func:`query_paths`."""
    #: The query of each entry, shape :obj:`[M]`.
    query: Tensor
    #: Its pattern id (see :mod:`pyg_degreembed.interpret.paths`), of
    #: length 1 to :math:`L`, shape :obj:`[M]`.
    pattern: Tensor
    #: The paths of that pattern from the query's head to its answer in
    #: the whole graph (:math:`F_{x \to y}`, at least 1), shape :obj:`[M]`.
    paths: Tensor
    #: Those that avoid the query's own edges (:math:`A_{x \to y}`), shape
    #: :obj:`[M]`.
    avoiding: Tensor
    #: Every pattern that joins some pair :math:`x \neq y`, sorted, shape
    #: :obj:`[B]`.
    body: Tensor
    #: The pairs :math:`(x, y)`, :math:`x \neq y`, each joins, shape
    #: :obj:`[B]`.
    body_pairs: Tensor


class _Table(NamedTuple):
    # Path counts keyed by owner * P + pattern, sorted, with the rows of
    # each owner (a pair or an entity) as CSR pointers.
    key: Tensor
    counts: Tensor
    ptr: Tensor


@torch.no_grad()
def query_paths(graph: TypedGraph, queries: Tensor, num_steps: int,
                num_relations: int, chunk_size: int = 256) -> QueryPaths:
    r"""For every query :math:`(x, q, y)`, :math:`x \neq y`, and
    every pattern of length :math:`1 \ldots L` that joins :math:`x` to
    :math:`y`: the paths in :obj:`graph` and those that avoid the query's
    own edge and its inverse (see the module's description); and, from the
    same expansion, the pairs each pattern joins.

    Args:
        graph (TypedGraph): The observed graph (with inverse edges).
        queries (torch.Tensor): Distinct queries :math:`(x, q, y)`,
            :math:`x \neq y`, :math:`q \in [0, 2R)`, shape :obj:`[3, Q]`.
        num_steps (int): The longest pattern :math:`L`.
        num_relations (int): The number :math:`R` of relations.
        chunk_size (int, optional): Start entities expanded at once.
            (default: :obj:`256`)
    """
    N, K, L = graph.num_nodes, graph.num_edge_types, num_steps
    P = (K + 1)**L
    x, q, y = queries
    if bool((x == y).any()):
        raise ValueError('query_paths needs queries with x != y')
    # The ordered pairs whose paths the formula reads: (x, y), (y, x).
    pair_key = torch.unique(torch.cat([x * N + y, y * N + x]))
    check_pattern_keys(K, L, max(pair_key.numel(), N, queries.size(1)))
    pairs, closed, bodies = _expand(graph, L, chunk_size, pair_key)
    pair_paths = _table(*pairs, pair_key.numel(), P)
    closed_paths = _table(*closed, N, P)
    xy = torch.searchsorted(pair_key, x * N + y)
    yx = torch.searchsorted(pair_key, y * N + x)
    (lo1, lo2), (hi1, hi2) = (
        r.unbind(-1) for r in graph.edge_range(
            *query_edges(x, q, y, num_relations)[:3]))
    own = (q, hi1 - lo1, (q + num_relations) % K, hi2 - lo2)
    # The entries of A_{x->y} (lengths 1..L) and A_{x->x} (1..L - 1) of
    # every query, F where they start.
    to_y = _rows(pair_paths, xy, P)
    to_x = _rows(closed_paths, x, P)
    ends = {'xx': (closed_paths, x), 'yy': (closed_paths, y),
            'xy': (pair_paths, xy), 'yx': (pair_paths, yx)}
    for length in range(1, L + 1):
        for table, target in ((to_x, 'x'), (to_y, 'y')):
            if target == 'x' and length == L:
                continue
            _subtract(table, length, target, own, to_x, to_y, ends, K, P)
    query, pattern = to_y[0] // P, to_y[0] % P
    return QueryPaths(query, pattern, to_y[1], to_y[2], *bodies)


#: The most patterns (:math:`(K + 1)^L`) whose joined pairs
#: :func:`query_paths` counts in a dense array (8 bytes each) rather than
#: by sorting the patterns of every expansion step.
MAX_DENSE_PATTERNS = 2**24


def _expand(graph: TypedGraph, L: int, chunk_size: int, pair_key: Tensor
            ) -> Tuple[Tuple[Tensor, Tensor, Tensor],
                       Tuple[Tensor, Tensor, Tensor], Tuple[Tensor, Tensor]]:
    # One expansion per entity: the paths between the pairs of `pair_key`
    # (pair row, pattern, count), the closed walks of length < L (entity,
    # pattern, count) and the pairs x != y per pattern.
    N, P = graph.num_nodes, (graph.num_edge_types + 1)**L
    Columns3 = Tuple[List[Tensor], List[Tensor], List[Tensor]]
    pairs: Columns3 = ([], [], [])
    closed: Columns3 = ([], [], [])
    bodies: Tuple[List[Tensor], List[Tensor]] = ([], [])
    dense = torch.zeros(P if P <= MAX_DENSE_PATTERNS else 0,
                        dtype=torch.long, device=graph.device)
    everyone = torch.arange(N, device=graph.device)
    for begin, end in walk_chunks(graph, everyone, L, chunk_size):
        # The pairs (x, y) with x in this chunk, keyed as the expansion's
        # (walk, node): x = begin + walk.
        first, last = torch.searchsorted(
            pair_key, torch.tensor([begin * N, end * N],
                                   device=graph.device)).tolist()
        chunk_pairs = pair_key[first:last] - begin * N
        for step, (walk, node, pattern, count) in enumerate(
                expand_paths(graph, everyone[begin:end], L), 1):
            same = (node == walk + begin).nonzero().view(-1)
            if step < L:
                for out, value in zip(closed, (walk[same] + begin,
                                               pattern[same], count[same])):
                    out.append(value)
            # Each (x, y, pattern) comes once: a pair the pattern joins
            # (every state, less the closed ones, x = y).
            if dense.numel():
                dense.index_add_(0, pattern, _constant(1, pattern))
                dense.index_add_(0, pattern[same], _constant(-1, same))
            else:
                other = node != walk + begin
                for out, value in zip(bodies, torch.unique(
                        pattern[other], return_counts=True)):
                    out.append(value)
            # The states come sorted by (walk, node, pattern): each pair's
            # are one range (no pair of `pair_key` is closed, x != y).
            state_pair = walk * N + node
            lo = torch.searchsorted(state_pair, chunk_pairs)
            hi = torch.searchsorted(state_pair, chunk_pairs, right=True)
            at, row = ragged_arange(lo, hi - lo)
            for out, value in zip(pairs, (at + first, pattern[row],
                                          count[row])):
                out.append(value)

    def cat(values):
        return torch.cat(values) if values else \
            torch.empty(0, dtype=torch.long, device=graph.device)

    if dense.numel():
        body = dense.nonzero().view(-1)
        body_pairs = dense[body]
    else:
        body, inverse = torch.unique(cat(bodies[0]), return_inverse=True)
        body_pairs = torch.zeros_like(body).index_add_(0, inverse,
                                                       cat(bodies[1]))
    return (cat(pairs[0]), cat(pairs[1]), cat(pairs[2])), \
        (cat(closed[0]), cat(closed[1]), cat(closed[2])), (body, body_pairs)


def _constant(value: int, like: Tensor) -> Tensor:
    # `value` repeated to the length of `like`, without writing it out.
    return torch.full((1,), value, device=like.device).expand(like.numel())


def _table(owner: Tensor, pattern: Tensor, count: Tensor, num_owners: int,
           P: int) -> _Table:
    key, perm = torch.sort(owner * P + pattern)
    ptr = torch.searchsorted(key, torch.arange(num_owners + 1,
                                               device=key.device) * P)
    return _Table(key, count[perm], ptr)


def _rows(table: _Table, owner: Tensor, P: int):
    # The entries of `owner[j]` for every query j, keyed j * P + pattern
    # (sorted), as [key, F, A] with A = F to start with.
    start = table.ptr[owner]
    query, row = ragged_arange(start, table.ptr[owner + 1] - start)
    count = table.counts[row]
    return [query * P + table.key[row] % P, count, count.clone()]


def _lookup(key: Tensor, value: Tensor, wanted: Tensor) -> Tensor:
    # value at each wanted key, 0 where absent.
    if key.numel() == 0:
        return torch.zeros_like(wanted)
    at, found = find_sorted(key, wanted)
    return torch.where(found, value[at], 0)


def _subtract(table, length, target, own, to_x, to_y, ends, K, P):
    # A = F - (paths through the query's own edges) for the entries of
    # pattern length `length` of `table` (A_{x->target}).
    key = table[0]
    pattern = key % P
    rows = ((pattern >= (K + 1)**(length - 1)) &
            (pattern < (K + 1)**length)).nonzero().view(-1)
    if rows.numel() == 0:
        return
    query, pattern = key[rows] // P, pattern[rows]
    used = torch.zeros_like(rows)
    for i in range(1, length + 1):
        below = (K + 1)**(length - i)
        k = (pattern // below) % (K + 1) - 1
        prefix, suffix = pattern // (below * (K + 1)), pattern % below
        for edge_type, mult, src, dst in ((own[0], own[1], 'x', 'y'),
                                          (own[2], own[3], 'y', 'x')):
            hit = (k == edge_type[query]).nonzero().view(-1)
            if hit.numel() == 0:
                continue
            j = query[hit]
            # Prefix x -> src avoiding E; the empty prefix is 1 at x.
            before = _avoiding(to_x if src == 'x' else to_y, j,
                               prefix[hit], P, empty=int(src == 'x'))
            # Suffix dst -> target, any path; the empty one is 1 if equal.
            table_, owner = ends[dst + target]
            after = _lookup(table_.key, table_.counts,
                            owner[j] * P + suffix[hit])
            after = torch.where(suffix[hit] == 0, int(dst == target), after)
            used.index_add_(0, hit, mult[j] * before * after)
    table[2][rows] = table[1][rows] - used


def _avoiding(table, query: Tensor, prefix: Tensor, P: int,
              empty: int) -> Tensor:
    value = _lookup(table[0], table[2], query * P + prefix)
    return torch.where(prefix == 0, empty, value)


__all__ = ['QueryPaths', 'query_paths']
