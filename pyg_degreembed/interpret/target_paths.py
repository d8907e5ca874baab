r"""Typed paths from query heads to given target entities, met in the
middle.

Sampled-candidate ranking asks which rules reach a few hundred targets per
query; following every rule's paths from a hub head reaches millions of
entities first.  Here the paths of at most :math:`L` edges from a head
:math:`h` to a target :math:`y` are found from both ends: the paths of
:math:`a` edges out of :math:`h` (forward, by the rules' prefixes), and
those of up to :math:`L - a` edges out of each target read backwards (the
graph holds every edge's inverse: :math:`y \xrightarrow{k'} m` is
:math:`m \xrightarrow{k} y` with :math:`k` the inverse of :math:`k'`), by
the rules' suffixes; the two meet at their common entities.  The last
forward edge is read from the lighter of its ends: an entity with more than
:data:`HUB_DEGREE` out-edges (a hub) has its edges toward the backward
paths' entities read from their side, or looked up where both ends are
hubs.  Each query's :math:`a \in [0, L)` is the one with the fewest walks
(:func:`forward_depths`, :func:`~pyg_degreembed.interpret.paths.walk_counts`):
:math:`\sum_y \sum_{l \leq L - a} \mathbf{w}_l(y)` backwards, and
forwards (for :math:`a \geq 1`) :math:`\sum_{l < a} \mathbf{w}_l(h)`
plus the walks of :math:`a` edges counting at most :data:`HUB_DEGREE` last
edges per entity.
"""
import itertools
from typing import Iterator, NamedTuple, Tuple

import torch
from torch import Tensor

from pyg_degreembed.data.ragged import find_sorted, ragged_arange
from pyg_degreembed.data.typed_graph import TypedGraph
from pyg_degreembed.interpret.paths import (BYTES_PER_WALK, allowed_edges,
                                            expand_paths_in_parts,
                                            walk_chunks, walk_counts)
from pyg_degreembed.training.budget import check_memory


#: Out-edges above which an entity is a hub whose edges toward the
#: backward paths' entities are read from their side or looked up, not
#: read from its own (see :func:`paths_to_targets`).
HUB_DEGREE = 1000


def reversed_patterns(pattern: Tensor, length: int,
                      num_edge_types: int) -> Tensor:
    r"""The pattern ids of :obj:`pattern` (each of :obj:`length` edges, see
    :mod:`~pyg_degreembed.interpret.paths`) read backwards:
    :math:`(k_1, \ldots, k_l) \mapsto (\bar k_l, \ldots, \bar k_1)`, with
    :math:`\bar k = (k + K / 2) \bmod K` the inverse edge type (its own
    inverse: applied twice, the pattern again)."""
    K = num_edge_types
    out = torch.zeros_like(pattern)
    for _ in range(length):
        out = out * (K + 1) + (pattern % (K + 1) - 1 + K // 2) % K + 1
        pattern = pattern // (K + 1)
    return out


def suffix_keys(rule_key: Tensor, num_edge_types: int,
                num_steps: int) -> Tensor:
    r"""The keys :math:`q (K + 1)^L + \mathrm{id}` of every rule's
    suffixes of :math:`1, \ldots, l` edges read backwards
    (:func:`reversed_patterns`), with :math:`q` the rule's relation and
    :obj:`rule_key` :math:`= q (K + 1)^L + \mathrm{pattern}`, sorted
    without repeats: the backward paths worth expanding from a target, each
    one's prefixes in the set too (the :obj:`prefixes` of
    :func:`~pyg_degreembed.interpret.paths.expand_paths`)."""
    K, P = num_edge_types, (num_edge_types + 1)**num_steps
    relation, pattern = rule_key // P, rule_key % P
    out = [rule_key.new_empty(0)]
    for length in range(1, num_steps + 1):
        long_enough = pattern >= (K + 1)**(length - 1)
        out.append(relation[long_enough] * P + reversed_patterns(
            pattern[long_enough] % (K + 1)**length, length, K))
    return torch.unique(torch.cat(out))


def forward_depths(graph: TypedGraph, head: Tensor, target: Tensor,
                   num_steps: int) -> Tuple[Tensor, Tensor]:
    r"""Per query, the forward depth :math:`a \in [0, L)` with the fewest
    walks (see the module's description) and that number of walks.

    Args:
        graph (TypedGraph): The graph.
        head (torch.Tensor): The heads, shape :obj:`[B]`.
        target (torch.Tensor): The target cells :math:`b N + y`, sorted.
        num_steps (int): :math:`L`.

    :rtype: (walks :obj:`[B]` float64, depth :obj:`[B]`)
    """
    N, L, B = graph.num_nodes, num_steps, head.numel()
    # [L + 1, N]: an entity's walks of at most l edges.
    walks = walk_counts(graph, L)
    within = torch.cat([walks.new_zeros(1, N), walks.cumsum(0)])
    back = within.new_zeros(L + 1, B).index_add_(
        1, target // N, within[:, target % N])[L - torch.arange(L)]
    # Forward: the walks of a - 1 edges, then at most HUB_DEGREE last
    # edges out of each entity (a hub's are found from the other side).
    capped = walk_counts(graph, L, HUB_DEGREE)[:L - 1, head]
    cost = back + torch.cat([capped.new_zeros(1, B),
                             within[:L - 1, head] + capped])
    walks, depth = cost.min(0)
    return walks, depth


def paths_to_targets(graph: TypedGraph, head: Tensor, target: Tensor,
                     depth: Tensor, num_steps: int,
                     prefixes: Tuple[Tensor, Tensor],
                     suffixes: Tuple[Tensor, Tensor]
                     ) -> Iterator[Tuple[Tensor, Tensor, Tensor]]:
    r"""Yields :obj:`(walk, node, pattern)` for the typed paths of
    :math:`1, \ldots, L` edges from :obj:`head[walk]` whose pattern and
    its prefixes are allowed: every such path to a target cell
    :math:`\mathrm{walk} \cdot N + \mathrm{node}` at least once (through
    each meeting entity, so possibly several times), and some paths to
    other entities (filter them).

    Args:
        graph (TypedGraph): The graph.
        head (torch.Tensor): The heads, shape :obj:`[B]`.
        target (torch.Tensor): The target cells :math:`b N + y`, sorted.
        depth (torch.Tensor): Each query's forward depth :math:`a`, shape
            :obj:`[B]` (:func:`forward_depths`).
        num_steps (int): :math:`L`.
        prefixes (Tuple[torch.Tensor, torch.Tensor]): :obj:`(label,
            allowed)` of the forward paths, as in
            :func:`~pyg_degreembed.interpret.paths.expand_paths` (a label
            per query).
        suffixes (Tuple[torch.Tensor, torch.Tensor]): :obj:`(label,
            allowed)` of the backward paths (:func:`suffix_keys`, the same
            labels).
    """
    L = num_steps
    for a in torch.unique(depth).tolist():
        queries = (depth == a).nonzero().view(-1)
        for begin, end in walk_chunks(graph, head[queries], a,
                                      queries.numel(), max_total=None):
            query = queries[begin:end]
            ends = _backward_ends(graph, query, target, L - a, L, suffixes)
            # The paths of fewer than a edges (part by part: a hub's paths
            # need not be held at once), those of a met with the backward
            # paths (their last edge toward the backward paths' entities).
            heads = (torch.arange(query.numel(), device=head.device),
                     head[query], torch.zeros_like(query))
            if not a:  # the heads meet the backward paths
                yield ends.meet(query, *heads)
                continue
            labels = (prefixes[0][query], prefixes[1])
            end = torch.unique(ends.key)
            for step, walk, node, pattern, _ in itertools.chain(
                    [(0, *heads, True)], expand_paths_in_parts(
                        graph, head[query], L, a - 1, None, labels)
                    if a > 1 else ()):
                if step:
                    yield query[walk], node, pattern
                if step == a - 1:
                    yield ends.meet(query, *_toward(
                        graph, (walk, node, pattern), a, L, labels, end,
                        query.numel()))


def _toward(graph: TypedGraph, state: Tuple[Tensor, Tensor, Tensor],
            step: int, num_steps: int, prefixes: Tuple[Tensor, Tensor],
            end: Tensor, num_starts: int) -> Tuple[Tensor, Tensor, Tensor]:
    # The states (walk, node, pattern) one edge further by an allowed
    # edge type at the entities `end` (walk * N + entity, sorted). Each
    # edge s -> e is found from the lighter of its ends: a state s of at
    # most HUB_DEGREE out-edges reads them (and keeps those to an end,
    # before any merging); the edges of a
    # hub s toward an end e of at most HUB_DEGREE edges are read from e's
    # side (its edges' inverses); between hubs, each allowed edge type is
    # looked up in the graph's sorted edges.
    N, K, L = graph.num_nodes, graph.num_edge_types, num_steps
    walk, node, pattern = state
    label, allowed = prefixes
    end_walk, end_node = end // N, end % N
    end_hub = graph.node_ptr[end_node + 1] - \
        graph.node_ptr[end_node] > HUB_DEGREE
    hub_end = end[end_hub]
    # Per state: its allowed types (from lo), the hub ends of its walk
    # (from first), and whether it is a hub whose lookups are fewer than
    # its out-edges.
    base = label[walk] * (K + 1)**L + pattern * (K + 1)
    lo = torch.searchsorted(allowed, base + 1)
    types = torch.searchsorted(allowed, base + K + 1) - lo
    first = torch.searchsorted(hub_end, walk * N)
    ends = torch.searchsorted(hub_end, (walk + 1) * N) - first
    out_deg = graph.node_ptr[node + 1] - graph.node_ptr[node]
    hub = (out_deg > HUB_DEGREE) & (types * ends < out_deg)
    # Light states: their allowed out-edges, those that reach an end.
    light = (~hub).nonzero().view(-1)
    at, edge = allowed_edges(
        graph, (walk[light], node[light], pattern[light]), L, prefixes,
        f'Expanding {num_starts} paths to length {step}')
    at = light[at]
    met = find_sorted(end, walk[at] * N + graph.edge_dst[edge])[1]
    at, edge = at[met], edge[met]
    found = [(walk[at], graph.edge_dst[edge],
              pattern[at] * (K + 1) + graph.edge_type[edge] + 1)]
    hub = hub.nonzero().view(-1)
    hub_key, order = torch.sort(walk[hub] * N + node[hub])
    hub = hub[order]
    # Hubs toward light ends: the ends' edges e -> s read backwards.
    light_end = (torch.isin(end_walk, walk[hub]) & ~end_hub).nonzero() \
        .view(-1)
    start = graph.node_ptr[end_node[light_end]]
    row, edge = ragged_arange(start,
                              graph.node_ptr[end_node[light_end] + 1] - start)
    pair, at = _matches(hub_key,
                        end_walk[light_end[row]] * N + graph.edge_dst[edge],
                        f"Reading {light_end.numel()} entities' edges "
                        'backwards')
    at = hub[at]
    extended = pattern[at] * (K + 1) + \
        (graph.edge_type[edge[pair]] + K // 2) % K + 1
    keep = find_sorted(allowed, label[walk[at]] * (K + 1)**L +
                       extended)[1]
    found.append((walk[at][keep], end_node[light_end[row[pair]]][keep],
                  extended[keep]))
    # Hubs toward hubs: each allowed type looked up toward each hub end
    # (fewer than the hub's out-edges).
    at, child = ragged_arange(lo[hub], types[hub])
    k, at = allowed[child] % (K + 1) - 1, hub[at]
    pair, which = ragged_arange(first[at], ends[at])
    at, k, entity = at[pair], k[pair], hub_end[which] % N
    lo, hi = graph.edge_range(node[at], k, entity)
    exists = hi > lo
    at, k, entity = at[exists], k[exists], entity[exists]
    found.append((walk[at], entity, pattern[at] * (K + 1) + k + 1))
    # Merged: a state reached through several hubs meets the backward
    # paths once.
    base = (K + 1)**step
    key = torch.unique(torch.cat([(f[0] * N + f[1]) * base + f[2]
                                  for f in found]))
    return key // base // N, key // base % N, key % base


def _matches(sorted_key: Tensor, key: Tensor,
             what: str) -> Tuple[Tensor, Tensor]:
    # Every pair (i, j) with key[i] == sorted_key[j], as (i's, j's), their
    # memory checked first.
    first = torch.searchsorted(sorted_key, key)
    count = torch.searchsorted(sorted_key, key, right=True) - first
    check_memory(BYTES_PER_WALK * float(count.sum()), what)
    return ragged_arange(first, count)


class _Ends(NamedTuple):
    # The backward paths of 0, 1, ... edges out of the targets of some
    # queries: per path, its key (walk * N + the entity it reaches, walk a
    # position among the queries), sorted; the target; its edges read
    # forwards (a pattern id, the suffix of a rule); (K + 1)^(its edges).
    num_nodes: int
    key: Tensor
    target: Tensor
    suffix: Tensor
    scale: Tensor

    def meet(self, query: Tensor, walk: Tensor, node: Tensor,
             pattern: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        # The forward paths (walk, node, pattern) joined with the backward
        # paths that reach their node: (query, target, whole pattern).
        forth, back = _matches(
            self.key, walk * self.num_nodes + node,
            f"Meeting {walk.numel()} paths with the targets' paths")
        return (query[walk[forth]], self.target[back],
                pattern[forth] * self.scale[back] + self.suffix[back])


def _backward_ends(graph: TypedGraph, query: Tensor, target: Tensor,
                   num_back: int, num_steps: int,
                   suffixes: Tuple[Tensor, Tensor]) -> '_Ends':
    # The backward paths of 0, ..., num_back edges out of the targets of
    # `query` (sorted query indices), by the rules' suffixes.
    N, K, L = graph.num_nodes, graph.num_edge_types, num_steps
    cell_query = target // N
    mine = torch.isin(cell_query, query)
    walk = torch.searchsorted(query, cell_query[mine])
    node = target[mine] % N
    found = [(walk * N + node, node, torch.zeros_like(node),
              torch.ones_like(node))]
    # Pattern keys number the starts too: at most this many at once.
    max_starts = max((2**63 - 1) // (N * (K + 1)**L) - 1, 1)
    for begin, end in walk_chunks(graph, node, num_back, max_starts,
                                  max_total=None):
        label = suffixes[0][query[walk[begin:end]]]
        for step, pair, reached, pattern, _ in expand_paths_in_parts(
                graph, node[begin:end], L, num_back, None,
                (label, suffixes[1])):
            pair = pair + begin
            found.append((walk[pair] * N + reached, node[pair],
                          reversed_patterns(pattern, step, K),
                          torch.full_like(pair, (K + 1)**step)))
    key, order = torch.sort(torch.cat([f[0] for f in found]))
    return _Ends(N, key, *(torch.cat([f[i] for f in found])[order]
                           for i in (1, 2, 3)))
