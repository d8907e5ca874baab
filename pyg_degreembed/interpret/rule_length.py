r"""The rule length :math:`L` from what the training graph shows.

A rule of length :math:`L` can only answer a query whose answer lies within
:math:`L` edges of its head.  :func:`reach_shares` measures, on a seeded
sample of training queries each without its own edge and that edge's
inverse (so they stand for queries whose answer is not yet an edge), the
share whose answer is within :math:`1, 2, \ldots` edges;
:func:`choose_num_steps` takes the paper's :math:`L = 2` and lengthens the
rules while one more step still reaches at least :obj:`min_gain` more of
the answers (each step costs more: paths multiply with the degree).
:func:`choose_rule_length` does both on a KG, measuring one step more only
while the choice could still lengthen the rules, up to :obj:`max_steps`.
"""
import time
from typing import Any, List, NamedTuple, Optional, Tuple

import torch

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import (check_positive_ints, query_edges,
                                    split_triples)
from pyg_degreembed.data.ragged import (find_sorted, outside_ranges,
                                        ragged_arange)
from pyg_degreembed.data.resolve import resolve_graph
from pyg_degreembed.interpret.paths import expand_paths, walk_chunks


#: The most rows one part of :func:`reach_shares` expands: its queries'
#: walks of the lengths it follows add up to at most this
#: (:func:`~pyg_degreembed.interpret.paths.walk_chunks`; a hub's query is a
#: part of its own).
EXPANSION_ROWS = 1 << 24
#: The queries :func:`reach_shares` measures however close its deadline (a
#: large graph's set-up can take the whole time: on a 10M-triple KG the
#: shares of one query were taken for the graph's).
MIN_QUERIES = 64


class RuleLength(NamedTuple):
    r"""The outcome of :func:`choose_rule_length`."""
    #: The rule length :math:`L`.
    num_steps: int
    #: The shares of the answers within :math:`1, 2, \ldots` edges.
    shares: List[float]
    #: The number of training queries they were measured on.
    num_queries: int


@torch.no_grad()
def reach_shares(data: Any, max_steps: int = 3, num_queries: int = 2000,
                 seed: int = 0, chunk_size: int = 256,
                 deadline: Optional[float] = None) -> List[float]:
    r"""The share of (at most :obj:`num_queries`, drawn with :obj:`seed`)
    training queries, tail and head queries alike, whose answer is within
    :math:`1, \ldots,` :obj:`max_steps` edges of the head in the observed
    graph without the query's own edge and its inverse.  With
    :obj:`deadline` (a :func:`time.perf_counter` reading), the queries are
    measured in parts of at most :obj:`chunk_size` (and
    :data:`EXPANSION_ROWS` walks) until it has passed (at
    least :data:`MIN_QUERIES`), and the shares are those of the queries
    measured.

    :rtype: :obj:`List[float]` of length :obj:`max_steps`, non-decreasing
    """
    return _reach(data, max_steps, num_queries, seed, chunk_size,
                  deadline)[0]


def _reach(data: Any, max_steps: int, num_queries: int, seed: int,
           chunk_size: int, deadline: Optional[float]
           ) -> Tuple[List[float], int]:
    # reach_shares and the number of queries measured.
    check_positive_ints(max_steps=max_steps, num_queries=num_queries,
                        chunk_size=chunk_size)
    kg = as_kg(data)
    R = kg.num_relations
    graph = resolve_graph(data, num_relations=R)
    h, r, t = split_triples(kg, 'train')
    queries = torch.stack([torch.cat([h, t]), torch.cat([r, r + R]),
                           torch.cat([t, h])])
    if queries.size(1) == 0:
        raise ValueError('The KG has no training triples to measure the '
                         'rule length on')
    generator = torch.Generator().manual_seed(seed)
    pick = torch.randperm(queries.size(1), generator=generator)
    queries = queries[:, pick[:num_queries]].to(graph.device)
    within = torch.zeros(max_steps, queries.size(1), dtype=torch.bool,
                         device=graph.device)
    N = graph.num_nodes
    measured = queries.size(1)
    # Hubs' queries reach much of the graph: parts of at most
    # EXPANSION_ROWS walks.
    for begin, end in walk_chunks(graph, queries[0], max_steps - 1,
                                  chunk_size, max_walks=EXPANSION_ROWS,
                                  max_total=None):
        if deadline is not None and begin >= MIN_QUERIES and \
                time.perf_counter() >= deadline:
            measured = begin
            break
        h, q, t = queries[:, begin:end]
        removed = graph.edge_range(*query_edges(h, q, t, R)[:3])
        # The entities reached in exactly l < L steps, by expansion ...
        walk = torch.arange(h.numel(), device=graph.device)
        node = h
        for step, (walk, node, _, _) in enumerate(expand_paths(
                graph, h, max_steps - 1, removed, by_pattern=False)):
            within[step, begin + walk[node == t[walk]]] = True
        # ... and the last step as an edge from one of them into the
        # answer (the answer's in-edges are far fewer than the edges out of
        # the last frontier).
        query, slot = ragged_arange(graph.in_ptr[t],
                                    graph.in_ptr[t + 1] - graph.in_ptr[t])
        edge = graph.in_perm[slot]
        lo, hi = removed[0][query], removed[1][query]
        seen = outside_ranges(edge, lo, hi)
        query, edge = query[seen], edge[seen]
        reached = walk * N + node  # sorted (expand_paths merges by key)
        found = find_sorted(reached, query * N + graph.edge_src[edge])[1]
        within[max_steps - 1, begin + query[found]] = True
    within = within[:, :measured].cummax(dim=0).values
    return within.double().mean(dim=1).tolist(), measured


def choose_num_steps(shares: List[float], min_gain: float = 0.05) -> int:
    r"""The rule length for a KG whose :func:`reach_shares` are
    :obj:`shares`: the smallest :math:`L \geq 2` (at most
    :obj:`len(shares)`) such that rules one step longer would reach less
    than :obj:`min_gain` more of the held-out training answers."""
    if len(shares) < 2:
        raise ValueError(f"'shares' must cover at least 2 steps, got "
                         f"{len(shares)}")
    L = 2
    # Shares are k / n: a gain of exactly min_gain (0.95 - 0.9 in floats is
    # 0.04999...) counts as reaching it.
    while L < len(shares) and \
            round(shares[L] - shares[L - 1], 9) >= min_gain:
        L += 1
    return L


def choose_rule_length(data: Any, max_steps: int = 5, min_gain: float = 0.05,
                       time_limit: Optional[float] = None,
                       num_queries: int = 2000, seed: int = 0,
                       chunk_size: int = 256) -> RuleLength:
    r"""The rule length :math:`L \leq` :obj:`max_steps` that
    :func:`choose_num_steps` takes on :func:`reach_shares` measured to
    :obj:`max_steps` edges, the shares measured and on how many queries
    (:class:`RuleLength`).  Each share is measured
    only while it could change the choice: no further step once one added
    less than :obj:`min_gain`, or once less than :obj:`min_gain` of the
    answers is left unreached (on dense KGs the paths of 4 or 5 edges are
    too many to follow, and every answer is within 3).

    Args:
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads.
        max_steps (int, optional): The longest rule length chosen.
            (default: :obj:`5`)
        min_gain (float, optional): As in :func:`choose_num_steps`.
            (default: :obj:`0.05`)
        time_limit (float, optional): Seconds for all the measuring: each
            length measured on the queries that fit in what is left of it
            (at least :data:`MIN_QUERIES`; a hub makes each query's paths
            many). (default: :obj:`None`, all :obj:`num_queries`)
        num_queries (int, optional): As in :func:`reach_shares`.
            (default: :obj:`2000`)
        seed (int, optional): As in :func:`reach_shares`. (default:
            :obj:`0`)
        chunk_size (int, optional): As in :func:`reach_shares`.
            (default: :obj:`256`)
    """
    if max_steps < 2:
        raise ValueError(f"'max_steps' must be at least 2, got {max_steps}")
    deadline = None if time_limit is None else \
        time.perf_counter() + time_limit
    steps = 2
    while True:
        shares, measured = _reach(data, steps, num_queries, seed, chunk_size,
                                  deadline)
        L = choose_num_steps(shares, min_gain)
        if L < steps or steps == max_steps or 1 - shares[-1] < min_gain:
            return RuleLength(L, shares, measured)
        steps += 1


__all__ = ['MIN_QUERIES', 'RuleLength', 'reach_shares', 'choose_num_steps',
           'choose_rule_length']
