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
forward edge is read once per query and entity whatever the patterns of the
paths there, from the side with fewer edges (per query: the entities' out-
edges, or the backward paths' entities' edges read backwards), and a
forward path is kept only where a backward path at its end completes it to
a rule (up to :data:`MAX_MEETING` such keys; past it, where it is a rule's
prefix).  Each query's :math:`a \in [0, L)` is the one with the fewest walks
(:func:`forward_depths`, :func:`~pyg_degreembed.interpret.paths.walk_counts`):
:math:`\sum_y \sum_{l \leq L - a} \mathbf{w}_l(y)` backwards, and
forwards (for :math:`a \geq 1`) :math:`\sum_{l < a} \mathbf{w}_l(h)`
plus the walks of :math:`a` edges counting at most :data:`HUB_DEGREE` last
edges per entity.
"""
import itertools
from typing import Iterator, List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from pyg_degreembed.data.ragged import find_sorted, ragged_arange
from pyg_degreembed.data.typed_graph import TypedGraph
from pyg_degreembed.interpret.paths import (BYTES_PER_WALK,
                                            expand_paths_in_parts,
                                            walk_chunks, walk_counts)
from pyg_degreembed.training.budget import check_memory


#: Out-edges above which an entity counts as a hub in the cost of a
#: forward depth (:func:`forward_depths`): the last edge of its paths is
#: read once per query, whatever the paths that reach it, or from the
#: other side.
HUB_DEGREE = 1000
#: The most (query, entity, prefix) keys of the forward paths that the
#: backward paths complete to a rule, held to keep only those forward paths
#: where they meet (see :func:`paths_to_targets`); with more (a relation of
#: many rules meeting many backward paths: 1.1e8 for one query at 10M
#: triples took 21 s), the paths meet by the rules' prefixes alone.
MAX_MEETING = 10**7
#: The cost of an edge of the last forward step read backwards from the
#: backward paths' entities, against one read forwards (per query, the side
#: that reads fewer edges at these costs is read; see
#: :func:`paths_to_targets`).
BACKWARD_COST = 1.
#: The most (forward path, backward path) pairs joined at once where the
#: two meet: the forward paths are joined in parts of at most this many
#: pairs (a forward path with more is a part of its own), each part's
#: memory checked (at 10M triples one batch of validation queries met
#: 20.4M forward paths with about 150M pairs, 14.4 GB at once).
MAX_PAIRS = 4_000_000


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
                     suffixes: Tuple[Tensor, Tensor], rule_key: Tensor
                     ) -> Iterator[Tuple[Tensor, Tensor, Tensor]]:
    r"""Yields :obj:`(walk, node, pattern)` for the typed paths of
    :math:`1, \ldots, L` edges from :obj:`head[walk]` whose pattern is a
    rule of the query's label: every such path to a target cell
    :math:`\mathrm{walk} \cdot N + \mathrm{node}` at least once (through
    each meeting entity, so possibly several times), and some other paths
    (filter them).  A forward path of :math:`a` edges meets the backward
    paths at its entity only if one of them completes it to a rule.

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
        rule_key (torch.Tensor): The rules' keys :math:`q (K + 1)^L +
            \mathrm{pattern}`, with :math:`q` a label.
    """
    L = num_steps
    splits = _splits(rule_key, graph.num_edge_types, L)
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
                yield from ends.meet(query, *heads)
                continue
            labels = (prefixes[0][query], prefixes[1])
            end = torch.unique(ends.key)
            meeting = _meeting(ends, splits, labels[0], a,
                               graph.num_edge_types, L)
            for step, walk, node, pattern, _ in itertools.chain(
                    [(0, *heads, True)], expand_paths_in_parts(
                        graph, head[query], L, a - 1, None, labels)
                    if a > 1 else ()):
                if step:
                    yield query[walk], node, pattern
                if step == a - 1:
                    yield from ends.meet(query, *_toward(
                        graph, (walk, node, pattern), a, L, labels, end,
                        *meeting))


def _toward(graph: TypedGraph, state: Tuple[Tensor, Tensor, Tensor],
            step: int, num_steps: int, prefixes: Tuple[Tensor, Tensor],
            end: Tensor, meeting: Optional[Tensor],
            last_types: Optional[Tensor]) -> Tuple[Tensor, Tensor, Tensor]:
    # The states (walk, node, pattern) one edge further by an allowed
    # edge type at the entities `end` (walk * N + entity, sorted). Per
    # walk, the edges are read from the side with fewer: the out-edges of
    # each distinct (walk, node) of the states (once, whatever the patterns
    # of its states: those of the types its states allow where those are
    # fewer, else all), kept where they reach an end; or every edge of the
    # ends read backwards (the graph holds every inverse), kept where they
    # come from a state's node. The edges found are joined with the states
    # of their node (those whose last type some pattern of `meeting` ends
    # with) and kept where the pattern they make is one that some backward
    # path completes to a rule there (see _meeting; where None, where it is
    # an allowed prefix).
    N, K, L = graph.num_nodes, graph.num_edge_types, num_steps
    walk, node, pattern = state
    label, allowed = prefixes
    # The distinct (walk, node) of the states, and each one's states.
    at_key, at, count = torch.unique(walk * N + node, return_inverse=True,
                                     return_counts=True)
    by_key = torch.argsort(at, stable=True)
    state_ptr = torch.cat([count.new_zeros(1), count.cumsum(0)])
    at_walk, at_node = at_key // N, at_key % N
    # Per (walk, node): the types its states allow, their edges, and the
    # edges read from it (the fewer).
    base = label[walk] * (K + 1)**L + pattern * (K + 1)
    lo = torch.searchsorted(allowed, base + 1)
    pair, child = ragged_arange(
        lo, torch.searchsorted(allowed, base + K + 1) - lo)
    typed = torch.unique(at[pair] * K + allowed[child] % (K + 1) - 1)
    typed_at, typed_k = typed // K, typed % K
    first, last = graph.type_range(at_node[typed_at], typed_k)
    out_deg = graph.node_ptr[at_node + 1] - graph.node_ptr[at_node]
    typed_edges = out_deg.new_zeros(at_key.numel()).index_add_(
        0, typed_at, last - first)
    untyped = typed_edges >= out_deg  # read every out-edge
    # Per walk, the side with fewer edges.
    end_walk, end_node = end // N, end % N
    end_deg = graph.node_ptr[end_node + 1] - graph.node_ptr[end_node]
    W = int(torch.cat([at_walk, end_walk, walk.new_zeros(1)]).max()) + 1
    backward = BACKWARD_COST * end_deg.new_zeros(W).index_add_(
        0, end_walk, end_deg) < out_deg.new_zeros(W).index_add_(
            0, at_walk, torch.where(untyped, out_deg, typed_edges))
    take = ~untyped[typed_at] & ~backward[at_walk[typed_at]]
    whole = untyped & ~backward[at_walk]
    back = backward[end_walk]
    size = float((last - first)[take].sum() + out_deg[whole].sum() +
                 end_deg[back].sum())
    check_memory(BYTES_PER_WALK * size,
                 f'Reading the edges of {at_key.numel()} entities')
    # Forwards: the edges that reach an end.
    row, edge = ragged_arange(
        torch.cat([first[take], graph.node_ptr[at_node[whole]]]),
        torch.cat([(last - first)[take], out_deg[whole]]))
    row = torch.cat([typed_at[take], whole.nonzero().view(-1)])[row]
    met = find_sorted(end, at_walk[row] * N + graph.edge_dst[edge])[1]
    row, edge = row[met], edge[met]
    found = [(row, graph.edge_dst[edge], graph.edge_type[edge])]
    # Backwards: the ends' edges that come from a state's node.
    back = back.nonzero().view(-1)
    which, edge = ragged_arange(graph.node_ptr[end_node[back]],
                                end_deg[back])
    which = back[which]
    row, met = find_sorted(at_key,
                           end_walk[which] * N + graph.edge_dst[edge])
    found.append((row[met], end_node[which[met]],
                  (graph.edge_type[edge[met]] + K // 2) % K))
    row, dst, k = (torch.cat(f) for f in zip(*found))
    # Those whose (walk, entity, type) some meeting pattern ends with,
    # joined with the states of their node.
    base = (K + 1)**step
    reach = at_walk[row] * N + dst
    if last_types is not None:
        useful = find_sorted(last_types, reach * (K + 1) + k + 1)[1]
        row, reach, k = row[useful], reach[useful], k[useful]
    pair, which = ragged_arange(state_ptr[row], state_ptr[row + 1] -
                                state_ptr[row])
    one, reach = by_key[which], reach[pair]
    extended = pattern[one] * (K + 1) + k[pair] + 1
    key = reach * base + extended
    keep = find_sorted(allowed, label[walk[one]] * (K + 1)**L + extended) \
        if meeting is None else find_sorted(meeting, key)
    # Merged: a state reached from several states meets the ends once.
    key = torch.unique(key[keep[1]])
    return key // base // N, key // base % N, key % base


def _splits(rule_key: Tensor, num_edge_types: int,
            num_steps: int) -> Tuple[Tensor, Tensor, Tensor]:
    # Every rule of l edges split into a prefix of a >= 1 edges and a
    # suffix of m = l - a: the keys ((q L + m) L + a - 1) (K + 1)^L +
    # suffix, sorted, the prefixes in their order, and the distinct
    # key (K + 1) + the prefix's last digit.
    K, L = num_edge_types, num_steps
    P = (K + 1)**L
    relation, pattern = rule_key // P, rule_key % P
    length = sum((pattern >= (K + 1)**j).long() for j in range(L))
    keys, prefixes = [], []
    for m in range(L):
        split = length > m
        keys.append(((relation[split] * L + m) * L + length[split] - m - 1)
                    * P + pattern[split] % (K + 1)**m)
        prefixes.append(pattern[split] // (K + 1)**m)
    key, order = torch.sort(torch.cat(keys))
    prefix = torch.cat(prefixes)[order]
    return key, prefix, torch.unique(key * (K + 1) + prefix % (K + 1))


def _meeting(ends: '_Ends', splits: Tuple[Tensor, Tensor, Tensor],
             label: Tensor, step: int, num_edge_types: int, num_steps: int
             ) -> Tuple[Optional[Tensor], Optional[Tensor]]:
    # The keys (walk N + entity) (K + 1)^a + prefix, sorted, of the forward
    # paths of a = step edges that a backward path at their entity
    # completes to a rule of the walk's label, and the distinct (walk N +
    # entity) (K + 1) + their last digit; each None where it would hold
    # more than MAX_MEETING keys.
    K, L, N = num_edge_types, num_steps, ends.num_nodes
    length = sum((ends.scale >= (K + 1)**j).long() for j in range(1, L + 1))
    wanted = ((label[ends.key // N] * L + length) * L + step - 1) * \
        (K + 1)**L + ends.suffix
    out: List[Optional[Tensor]] = []
    for last in (True, False):
        table = splits[2] if last else splits[0]
        lo = wanted * (K + 1) + 1 if last else wanted
        first = torch.searchsorted(table, lo)
        count = torch.searchsorted(table, lo + K if last else lo + 1) - first
        if float(count.sum()) > MAX_MEETING:
            out.append(None)
            continue
        path, at = ragged_arange(first, count)
        out.append(torch.unique(
            ends.key[path] * (K + 1) + table[at] % (K + 1) if last else
            ends.key[path] * (K + 1)**step + splits[1][at]))
    return out[1], out[0]


def _parts(count: Tensor, max_total: int) -> Iterator[Tuple[int, int]]:
    # Consecutive ranges [begin, end) of the positions of `count` whose
    # counts add up to at most max_total (a position with more is a range
    # of its own).
    total = torch.cat([count.new_zeros(1), count.cumsum(0)])
    begin, n = 0, count.numel()
    while begin < n:
        end = int(torch.searchsorted(total, total[begin] + max_total,
                                     right=True)) - 1
        end = min(max(end, begin + 1), n)
        yield begin, end
        begin = end


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
             pattern: Tensor) -> Iterator[Tuple[Tensor, Tensor, Tensor]]:
        # The forward paths (walk, node, pattern) joined with the backward
        # paths that reach their node, (query, target, whole pattern), in
        # parts of at most MAX_PAIRS pairs.
        key = walk * self.num_nodes + node
        first = torch.searchsorted(self.key, key)
        count = torch.searchsorted(self.key, key, right=True) - first
        for begin, end in _parts(count, MAX_PAIRS):
            check_memory(BYTES_PER_WALK * float(count[begin:end].sum()),
                         f"Meeting {end - begin} paths with the targets' "
                         f'paths')
            forth, back = ragged_arange(first[begin:end], count[begin:end])
            forth = forth + begin
            yield (query[walk[forth]], self.target[back],
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
