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
the rules' suffixes; the two meet at their common entities.  Each query's
:math:`a \in [0, L)` is the one with the fewest walks (:func:`forward_depths`):
:math:`\sum_{l \leq a} \mathbf{w}_l(h) + \sum_y \sum_{l \leq L - a}
\mathbf{w}_l(y)` (:func:`~pyg_degreembed.interpret.paths.walk_counts`).
"""
import itertools
from typing import Iterator, NamedTuple, Tuple

import torch
from torch import Tensor

from pyg_degreembed.data.ragged import find_sorted, ragged_arange
from pyg_degreembed.data.typed_graph import TypedGraph
from pyg_degreembed.interpret.paths import (BYTES_PER_WALK, _expand_step,
                                            expand_paths_in_parts,
                                            walk_chunks, walk_counts)
from pyg_degreembed.training.budget import check_memory


#: The cost of looking an edge up (a binary search in the graph's sorted
#: edges) in out-edges read: a state's last edge is looked up toward the
#: backward paths' entities where that costs less than its out-edges.
LOOKUP_COST = 2


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
    walks = walk_counts(graph, L)
    # [L + 1, N]: an entity's walks of exactly and of at most l edges.
    exactly = torch.cat([walks.new_ones(1, N), walks])
    within = torch.cat([walks.new_zeros(1, N), walks.cumsum(0)])
    back = within.new_zeros(L + 1, B).index_add_(
        1, target // N, within[:, target % N])[L - torch.arange(L)]
    # Forward: the walks of a - 1 edges, then the last edge's walks or, if
    # fewer, a lookup per (walk of a - 1 edges, backward path).
    depth = torch.arange(1, L, device=head.device)
    ahead = within[depth - 1][:, head] + torch.minimum(
        exactly[depth][:, head], exactly[depth - 1][:, head] * back[1:])
    cost = back + torch.cat([ahead.new_zeros(1, B), ahead])
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
    # The states (walk, node, pattern) one edge further, at least those at
    # the entities `end` (walk * N + entity, sorted): each state's allowed
    # out-edges, or, where fewer, a lookup of an edge of each allowed type
    # toward each end entity of its walk (a hub's next edge is millions of
    # out-edges but a few thousand lookups).
    N, K, L = graph.num_nodes, graph.num_edge_types, num_steps
    walk, node, pattern = state
    label, allowed = prefixes
    base = label[walk] * (K + 1)**L + pattern * (K + 1)
    lo = torch.searchsorted(allowed, base + 1)
    types = torch.searchsorted(allowed, base + K + 1) - lo
    first = torch.searchsorted(end, walk * N)
    ends = torch.searchsorted(end, (walk + 1) * N) - first
    out_deg = graph.node_ptr[node + 1] - graph.node_ptr[node]
    look = LOOKUP_COST * types * ends < out_deg
    expanded = _expand_step(graph, (walk[~look], node[~look],
                                    pattern[~look], torch.ones_like(
                                        walk[~look])),
                            step, L, num_starts, prefixes=prefixes)
    # The looked-up edges: (state, allowed type), then each end entity.
    looked = look.nonzero().view(-1)
    at, child = ragged_arange(lo[looked], types[looked])
    k = allowed[child] % (K + 1) - 1
    at = looked[at]
    check_memory(BYTES_PER_WALK * float(ends[at].sum()),
                 f'Looking up the edges of {at.numel()} paths')
    pair, which = ragged_arange(first[at], ends[at])
    at, k, entity = at[pair], k[pair], end[which] % N
    exists = find_sorted(graph.edge_keys,
                         (node[at] * K + k) * N + entity)[1]
    at, k, entity = at[exists], k[exists], entity[exists]
    return (torch.cat([expanded[0], walk[at]]),
            torch.cat([expanded[1], entity]),
            torch.cat([expanded[2], pattern[at] * (K + 1) + k + 1]))


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
        key = walk * self.num_nodes + node
        first = torch.searchsorted(self.key, key)
        count = torch.searchsorted(self.key, key, right=True) - first
        check_memory(BYTES_PER_WALK * float(count.sum()),
                     f"Meeting {walk.numel()} paths with the targets' paths")
        forth, back = ragged_arange(first, count)
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
