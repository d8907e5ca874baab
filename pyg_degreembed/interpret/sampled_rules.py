r"""Rule counts found by sampling instead of enumeration, within a time
limit (anytime) and with memory bounded independently of the graph's path
count.

:func:`~pyg_degreembed.interpret.applied_rules.rule_counts` enumerates every
path of up to :math:`L` edges from every entity: exact, but its cost follows
the graph.  :func:`sample_rule_counts` finds and scores rules as AnyBURL
does, in two stages that each stop at any time with their best so far:

1. **Candidates** (AnyBURL's bottom-up idea).  Triples :math:`(x, r, y)`
   of the observed graph (facts and train) are drawn in a seeded order and
   the patterns that join :math:`x` to :math:`y` without the triple's own
   edge and its inverse are found by meeting in the middle: the paths of
   :math:`\lceil l/2 \rceil` edges out of one end are joined with the
   paths of :math:`\lfloor l/2 \rfloor` edges out of the other, reversed
   (the longer half from the end with fewer walks), so a triple costs
   about :math:`d^{L/2}` rather than :math:`d^L` for degree :math:`d`.  A
   pattern :math:`\mathbf{p}` found gives the rule :math:`(r, \mathbf{p})`
   and its reverse for the inverse query :math:`(\bar r,
   \bar{\mathbf{p}})`.
2. **Confidences from sampled body groundings.**  The query relations
   taking turns, each with its candidates in the order of how often the
   search found them (every relation's :math:`k`-th before any
   :math:`(k+1)`-th), each candidate's body is grounded by
   :obj:`num_samples` random walks: a head :math:`x` drawn uniformly from
   the entities with an edge of the body's first type, then at each step an
   edge of the next type drawn uniformly from the current entity's.  Of the
   distinct pairs :math:`(x, y)`, :math:`x \neq y`, the walks reach (the
   sampled *groundings*), those that are known answers of the rule's
   relation are its *support* (a walk that reaches its answer only through
   the answer's own edge or that edge's inverse does not count, as in
   :func:`rule_counts`).  These are AnyBURL's sampled counts: a body with
   fewer groundings than :obj:`num_samples` is mostly grounded in full, one
   with more is estimated from the sample, and the confidence
   :math:`\mathrm{support} / (\mathrm{groundings} + u)` penalises rules with
   little evidence as the exact counts do.

Under :mod:`torch.distributed` (e.g. :obj:`torchrun`) the processes share
the work: each searches every :math:`W`-th triple of the order (process
:math:`k` from the :math:`k`-th), the candidates found are gathered, and
each scores every :math:`W`-th candidate of the scoring order with walks of
its own (seeded by :obj:`seed` and its index); every process ends with all
the rules.  Without a time limit the rules are those of one process (their
sampled counts differ by the walks drawn); with one, :math:`W` processes
search and score about :math:`W` times as much.

:class:`SamplingReport` says how much was drawn.  Memory: the search runs in
slices of at most :data:`~pyg_degreembed.interpret.paths.MAX_WALKS` paths
(a triple whose ends have more walks than that is skipped and counted), and
the walks in chunks of that size: neither depends on the graph's path count.
"""
import time
from typing import Any, List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import (check_positive_ints, check_rule_length,
                                    graph_queries, graph_triples,
                                    query_edges, unique_triples)
from pyg_degreembed.data.ragged import find_sorted, ragged_arange
from pyg_degreembed.data.resolve import resolve_graph
from pyg_degreembed.data.typed_graph import TypedGraph
from pyg_degreembed.interpret.applied_rules import RuleCounts
from pyg_degreembed.interpret.paths import (MAX_WALKS, check_pattern_keys,
                                            expand_paths, walk_totals)
from pyg_degreembed.training.distributed import (all_gather_tensors,
                                                 all_reduce_number, world)


class SamplingReport(NamedTuple):
    r"""What :func:`sample_rule_counts` drew."""
    #: Graph triples searched for candidate rules, and how many there
    #: are (distinct, without self-loops).
    triples_searched: int
    triples_total: int
    #: Triples skipped because their ends have too many walks.
    triples_skipped: int
    #: Candidate rules found, and those whose bodies were sampled.
    candidates: int
    candidates_scored: int
    #: Random walks per candidate.
    num_samples: int
    #: Seconds of each stage.
    candidate_seconds: float
    confidence_seconds: float

    def describe(self) -> str:
        r"""The report in words."""
        skipped = f', {self.triples_skipped} skipped (hubs)' \
            if self.triples_skipped else ''
        return (f'{self.triples_searched} of {self.triples_total} graph '
                f'triples searched{skipped} ({self.candidate_seconds:.1f}s): '
                f'{self.candidates} candidate rules, '
                f'{self.candidates_scored} scored on {self.num_samples} '
                f'sampled groundings each ({self.confidence_seconds:.1f}s)')


@torch.no_grad()
def sample_rule_counts(data: Any, num_steps: int = 2,
                       time_limit: Optional[float] = None,
                       num_samples: int = 1000, candidate_share: float = 0.5,
                       seed: int = 0, batch_size: int = 256
                       ) -> Tuple[RuleCounts, SamplingReport]:
    r"""Candidate rules of length at most :obj:`num_steps` from sampled
    graph triples, and their support and body groundings on sampled
    groundings (see the module's description), within :obj:`time_limit`
    seconds.

    Args:
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads.
        num_steps (int, optional): The longest rule :math:`L`.
            (default: :obj:`2`)
        time_limit (float, optional): Seconds for both stages; each stops
            with its best so far once its share is spent (at least one
            batch of triples is searched, and the first chunk of candidates
            scored). (default: :obj:`None`: every triple searched, every
            candidate scored)
        num_samples (int, optional): Random walks per candidate (AnyBURL's
            sample size). (default: :obj:`1000`)
        candidate_share (float, optional): The share of :obj:`time_limit`
            the candidate search may take; the confidences take the rest
            (and what the search left). (default: :obj:`0.5`)
        seed (int, optional): Seed of the triples' order and the walks
            (with :math:`W` processes, process :math:`k`'s walks are seeded
            by :math:`W \cdot \mathrm{seed} + k`). (default: :obj:`0`)
        batch_size (int, optional): Triples searched at once (fewer where
            their walks are many). (default: :obj:`256`)

    :rtype: (:class:`~pyg_degreembed.interpret.applied_rules.RuleCounts`,
        :class:`SamplingReport`)
    """
    check_rule_length(num_steps)
    check_positive_ints(num_samples=num_samples,
                        batch_size=batch_size)
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"'time_limit' must be a positive number of "
                         f'seconds, got {time_limit}')
    if not 0 < candidate_share < 1:
        raise ValueError(f"'candidate_share' must be in (0, 1), got "
                         f'{candidate_share}')
    kg = as_kg(data)
    R = kg.num_relations
    graph = resolve_graph(data, num_relations=R)
    K, L = 2 * R, num_steps
    # The search's keys: (triple * K + relation) * P + pattern.
    check_pattern_keys(K, L, K * batch_size)
    start = time.perf_counter()
    generator = torch.Generator().manual_seed(seed)
    h, r, t = graph_triples(kg)
    triples = unique_triples(torch.stack([h, r, t])[:, h != t])
    triples = triples[:, torch.randperm(triples.size(1),
                                        generator=generator)]
    processes, process = world()
    rules, found, searched, skipped = _candidates(
        graph, triples[:, process::processes].to(graph.device), L, R,
        batch_size,
        None if time_limit is None else start + candidate_share * time_limit)
    if processes > 1:  # every process's candidates, merged
        rules, inverse = torch.unique(torch.cat(all_gather_tensors(rules)),
                                      return_inverse=True)
        found = torch.zeros_like(rules).index_add_(
            0, inverse, torch.cat(all_gather_tensors(found)))
        searched = int(all_reduce_number(searched))
        skipped = int(all_reduce_number(skipped))
        generator = torch.Generator().manual_seed(seed * processes + process)
    middle = time.perf_counter()
    order = _scoring_order(rules // (K + 1)**L, found)
    counts, scored = _confidences(
        graph, graph_queries(kg).to(graph.device),
        rules[order][process::processes], L, num_samples, generator,
        None if time_limit is None else start + time_limit)
    if processes > 1:  # every process's rules, in the order of their keys
        columns = [torch.cat(all_gather_tensors(column)) for column in counts]
        P = (K + 1)**L
        order = torch.argsort(columns[0] * P + columns[1])
        counts = RuleCounts(*(column[order] for column in columns))
        scored = int(all_reduce_number(scored))
    report = SamplingReport(searched, triples.size(1), skipped, rules.numel(),
                            scored, num_samples, middle - start,
                            time.perf_counter() - middle)
    return counts, report


def _scoring_order(relation: Tensor, found: Tensor) -> Tensor:
    # The order candidates are scored in: the relations take turns, each
    # turn a relation's most often found candidate not yet scored (every
    # relation's k-th before any relation's (k + 1)-th; within a turn, the
    # most often found first), so that a relation whose candidates the
    # search met rarely is not left unscored behind the hubs' many.
    by_count = torch.argsort(found, descending=True, stable=True)
    grouped = by_count[torch.argsort(relation[by_count], stable=True)]
    size = torch.bincount(relation, minlength=int(relation.max()) + 1
                          if relation.numel() else 0)
    turn = torch.empty_like(found)
    turn[grouped] = torch.arange(found.numel(), device=found.device) - \
        torch.repeat_interleave(size.cumsum(0) - size, size)
    key = turn * (int(found.max()) + 1 if found.numel() else 1) + \
        (int(found.max()) if found.numel() else 0) - found
    return torch.argsort(key, stable=True)


def _length(pattern: Tensor, K: int) -> Tensor:
    # The number of edges of each pattern.
    length = torch.zeros_like(pattern)
    p = pattern.clone()
    while bool((p > 0).any()):
        length += (p > 0).long()
        p = p // (K + 1)
    return length


def _reverse(pattern: Tensor, K: int) -> Tensor:
    # The pattern of the reversed paths: edge types in reverse order, each
    # replaced by its inverse (type k + R mod K).
    out = torch.zeros_like(pattern)
    p = pattern.clone()
    while bool((p > 0).any()):
        more = p > 0
        k = p % (K + 1) - 1
        out = torch.where(more, out * (K + 1) + (k + K // 2) % K + 1, out)
        p = p // (K + 1)
    return out


def _candidates(graph: TypedGraph, triples: Tensor, L: int, R: int,
                batch: int, deadline: Optional[float]
                ) -> Tuple[Tensor, Tensor, int, int]:
    # The rules (keys q * P + pattern, sorted) that join the ends of some
    # searched triple without its own edges, how many triples each joins,
    # and the triples searched and skipped.
    K = 2 * R
    P = (K + 1)**L
    ahead, behind = (L + 1) // 2, L // 2
    longer, shorter = walk_totals(graph, ahead), walk_totals(graph, behind)
    x, r, y = triples
    forward = longer[x] + shorter[y]
    backward = longer[y] + shorter[x]
    # Each triple from the end whose longer half has fewer walks.
    flip = backward < forward
    queries = torch.stack([torch.where(flip, y, x),
                           torch.where(flip, r + R, r),
                           torch.where(flip, x, y)])
    cost = torch.minimum(forward, backward)
    found, searched, skipped = [], 0, 0
    for begin in range(0, queries.size(1), batch):
        window = queries[:, begin:begin + batch]
        size = cost[begin:begin + batch]
        fits = size <= MAX_WALKS
        skipped += int((~fits).sum())
        window, size = window[:, fits], size[fits]
        bounds = _slices(size, MAX_WALKS)
        for first, last in zip(bounds[:-1], bounds[1:]):
            if last > first:
                found.append(_join(graph, window[:, first:last], L, R, P))
        searched += fits.numel()
        if deadline is not None and time.perf_counter() >= deadline:
            break
    keys = torch.cat(found) if found else \
        torch.empty(0, dtype=torch.long, device=graph.device)
    # Each rule with its reverse, for the inverse query.
    keys = torch.cat([keys, (keys // P + R) % K * P + _reverse(keys % P, K)])
    rules, count = torch.unique(keys, return_counts=True)
    return rules, count, searched - skipped, skipped


def _join(graph: TypedGraph, queries: Tensor, L: int, R: int,
          P: int) -> Tensor:
    # The rule keys q * P + pattern that join x to y for the queries
    # (x, q, y), meeting in the middle, each once per query.
    K, N = 2 * R, graph.num_nodes
    x, q, y = queries
    removed = graph.edge_range(*query_edges(x, q, y, R)[:3])
    ahead, behind = (L + 1) // 2, L // 2
    out = list(expand_paths(graph, x, ahead, removed))
    back = list(expand_paths(graph, y, behind, removed)) if behind else []
    keys = []
    # Length 1: an edge x -> y.
    walk, node, pattern, _ = out[0]
    at_y = node == y[walk]
    keys.append((walk[at_y] * K + q[walk[at_y]]) * P + pattern[at_y])
    for length in range(2, L + 1):
        a, b = (length + 1) // 2, length // 2
        walk, node, pattern, _ = out[a - 1]
        bwalk, bnode, bpattern, _ = back[b - 1]
        state = walk * N + node
        lo = torch.searchsorted(state, bwalk * N + bnode)
        hi = torch.searchsorted(state, bwalk * N + bnode, right=True)
        size = hi - lo
        # Slices of the backward states of at most MAX_WALKS joined paths.
        bounds = _slices(size, MAX_WALKS)
        tail = _reverse(bpattern, K)
        for first, last in zip(bounds[:-1], bounds[1:]):
            row, at = ragged_arange(lo[first:last], size[first:last])
            row = row + first
            joined = pattern[at] * (K + 1)**b + tail[row]
            keys.append(torch.unique(
                (bwalk[row] * K + q[bwalk[row]]) * P + joined))
    return torch.unique(torch.cat(keys)) % (K * P)


def _slices(size: Tensor, limit: int) -> List[int]:
    # Boundaries [0, ..., n] of consecutive slices whose sizes sum to at most
    # `limit` (an element larger than that is a slice of its own).
    if size.numel() == 0:
        return [0, 0]
    total = size.cumsum(0)
    bounds, begin, used = [0], 0, 0
    while begin < size.numel():
        end = int(torch.searchsorted(total, used + limit, right=True))
        end = max(end, begin + 1)
        bounds.append(end)
        used = int(total[end - 1])
        begin = end
    return bounds


def _confidences(graph: TypedGraph, queries: Tensor, rules: Tensor, L: int,
                 num_samples: int, generator: torch.Generator,
                 deadline: Optional[float]) -> Tuple[RuleCounts, int]:
    # Support and groundings of the rules (in their order, as far as the
    # deadline lets) on sampled body groundings; the rules scored.
    K, N = graph.num_edge_types, graph.num_nodes
    P = (K + 1)**L
    # Training answers keyed (x * N + y) * K + q, sorted.
    answers = torch.sort((queries[0] * N + queries[2]) * K +
                         queries[1]).values
    # The heads of each edge type: the sources of its (source, type) pairs.
    by_type = torch.argsort(graph.pair_type, stable=True)
    type_heads = graph.pair_src[by_type]
    per_type = torch.bincount(graph.pair_type, minlength=K)
    type_start = per_type.cumsum(0) - per_type
    # Rules sampled at once: their walks within MAX_WALKS, and their keys
    # (rule * N + x) * N + y within 63 bits.
    chunk = max(1, min(MAX_WALKS // (num_samples * L), 2**62 // (N * N)))
    support_parts: List[Tensor] = []
    groundings_parts: List[Tensor] = []
    scored = 0
    while scored < rules.numel():
        part = rules[scored:scored + chunk]
        s, g = _sample_bodies(graph, part, L, num_samples, generator,
                              answers, type_heads, type_start, per_type)
        support_parts.append(s)
        groundings_parts.append(g)
        scored += part.numel()
        if deadline is not None and time.perf_counter() >= deadline:
            break
    rules = rules[:scored]
    support = torch.cat(support_parts) if support_parts else \
        rules.new_zeros(0)
    groundings = torch.cat(groundings_parts) if groundings_parts else \
        rules.new_zeros(0)
    keep = support > 0
    rules, order = torch.sort(rules[keep])
    return RuleCounts(rules // P, rules % P, support[keep][order],
                      groundings[keep][order]), scored


def _sample_bodies(graph, rules, L, num_samples, generator, answers,
                   type_heads, type_start, per_type
                   ) -> Tuple[Tensor, Tensor]:
    # Per rule: the distinct sampled groundings (x, y), x != y, of its body,
    # and those that are known answers of its relation (reached without
    # the answer's own edges).
    K, N = graph.num_edge_types, graph.num_nodes
    P = (K + 1)**L
    device = graph.device
    M = rules.numel()
    digits = _digits(rules % P, K, L)
    rule = torch.arange(M, device=device).repeat_interleave(num_samples)
    relation = (rules // P)[rule]

    def uniform(n):
        return torch.rand(n, generator=generator, dtype=torch.double
                          ).to(device)

    first = digits[rule, 0]
    x = type_heads[type_start[first] + (uniform(rule.numel()) *
                                        per_type[first]).long()]
    # Only the walks still on their way take a step: `walk` indexes them.
    y, alive = x.clone(), torch.ones_like(x, dtype=torch.bool)
    walk, node = torch.arange(rule.numel(), device=device), x
    steps = []
    for i in range(L):
        k = digits[rule[walk], i]
        going = k >= 0
        walk, node, k = walk[going], node[going], k[going]
        lo, hi = graph.type_range(node, k)
        found = hi > lo
        alive[walk[~found]] = False
        walk, lo, hi = walk[found], lo[found], hi[found]
        edge = lo + (uniform(walk.numel()) * (hi - lo)).long()
        node = graph.edge_dst[edge]
        y[walk] = node
        steps.append((walk, edge))
    alive &= y != x
    hit = torch.zeros_like(alive)
    hit[alive] = find_sorted(answers, ((x * N + y) * K + relation)[alive])[1]
    # A walk to an answer through that answer's own edge (x -q-> y) or its
    # inverse (y -q'-> x) does not ground the rule.
    for walk, edge in steps:
        walk, edge = walk[hit[walk]], edge[hit[walk]]
        src, typ, dst = graph.edge_src[edge], graph.edge_type[edge], \
            graph.edge_dst[edge]
        q, head, tail = relation[walk], x[walk], y[walk]
        own = ((src == head) & (typ == q) & (dst == tail)) | \
            ((src == tail) & (typ == (q + K // 2) % K) & (dst == head))
        alive[walk[own]] = False
    hit &= alive
    pair = torch.unique((rule[alive] * N + x[alive]) * N + y[alive])
    groundings = torch.bincount(pair // (N * N), minlength=M)
    pair = torch.unique((rule[hit] * N + x[hit]) * N + y[hit])
    support = torch.bincount(pair // (N * N), minlength=M)
    return support, groundings


def _digits(pattern: Tensor, K: int, L: int) -> Tensor:
    # The edge types of each pattern, first to last, -1 past its end:
    # shape [M, L].
    length = _length(pattern, K)
    out = torch.empty(pattern.numel(), L, dtype=torch.long,
                      device=pattern.device)
    for i in range(1, L + 1):
        shift = (length - i).clamp(min=0)
        k = pattern // (K + 1)**shift % (K + 1) - 1
        out[:, i - 1] = torch.where(length >= i, k, -1)
    return out


__all__ = ['SamplingReport', 'sample_rule_counts']
