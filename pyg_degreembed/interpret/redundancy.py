r"""Redundant rules: rules of one query relation whose predictions
overlap, so that a noisy-or counts their shared evidence once (SAFRAN's
non-redundant noisy-or, Ott, Meilicke and Samwald, AKBC 2021).

Two rules :math:`r_i, r_j` (path or constant rules) of query relation
:math:`q` are compared by the Jaccard index of their predictions on the
training graph, for a sample :math:`S_q` of the heads of the queries of
:math:`q` in that graph:

.. math::
    J(r_i, r_j) = \frac{|\hat{H}_i \cap \hat{H}_j|}
    {|\hat{H}_i \cup \hat{H}_j|}, \qquad
    \hat{H}_i = \{(x, y) : x \in S_q,\; r_i \text{ predicts } y
    \text{ for } x,\; x \neq y\}.

A query whose predictions would make more than :data:`MAX_QUERY_PAIRS`
co-firing pairs keeps a share of its answers (the same entities for every
rule, drawn by a hash of the entity), so that the cost is bounded whatever
the graph; the index is then measured on those.

Under a threshold :math:`\theta`, rules linked by :math:`J \geq \theta`,
directly or through others (the connected components), form a cluster;
:class:`~pyg_degreembed.AppliedRules` with :obj:`redundancy=theta` counts a
cluster once, by its best rule that reaches the answer.
"""
import time
from typing import Any, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import check_positive_ints, graph_queries
from pyg_degreembed.data.ragged import ragged_arange
from pyg_degreembed.data.resolve import resolve_graph
from pyg_degreembed.evaluation.candidates import splitmix64
from pyg_degreembed.training.distributed import all_reduce_number

#: Heads of the graph's queries per query relation whose predictions are
#: compared (a seeded sample).
OVERLAP_HEADS = 32
#: The most pairs of rules that reach the same answer counted for one query
#: (a query with more keeps a share of its answers).
MAX_QUERY_PAIRS = 1 << 14
#: Queries whose rules are followed at once.
QUERIES_AT_ONCE = 64
#: Pairs with a smaller Jaccard index are not kept.
MIN_JACCARD = 0.1


class RuleOverlap(NamedTuple):
    r"""Pairs of path rules of one query relation with their Jaccard
    index (see :func:`rule_overlap`)."""
    #: Rule indices :math:`i < j` (path rules in the order of
    #: :attr:`AppliedRules.rule_key`, then the constant rules), shape
    #: :obj:`[2, E]`.
    pairs: Tensor
    #: Their Jaccard index, shape :obj:`[E]`.
    jaccard: Tensor


def check_redundancy(redundancy: Any):
    r"""Refuses a clustering threshold that is not :obj:`None` or a number
    in :math:`(0, 1]`."""
    if redundancy is None:
        return
    if isinstance(redundancy, bool) or \
            not isinstance(redundancy, (int, float)) or \
            not 0 < redundancy <= 1:
        raise ValueError(f"'redundancy' must be None or a number in (0, 1], "
                         f'got {redundancy!r}')


def sampled_heads(queries: Tensor, num_nodes: int, num_heads: int,
                  seed: int = 0) -> Tensor:
    r"""Up to :obj:`num_heads` distinct heads per query relation of the
    queries :obj:`[3, Q]` (head, relation, tail), drawn in a seeded random
    order, taken in turns: the first head of every relation, then the
    second, and so on (so that a prefix covers every relation).

    :rtype: :class:`torch.Tensor` of shape :obj:`[2, S]` (head, relation)
    """
    pairs = torch.unique(queries[1] * num_nodes + queries[0])
    order = torch.randperm(pairs.numel(),
                           generator=torch.Generator().manual_seed(seed))
    relation = pairs // num_nodes
    # By relation, and in the random order within each.
    order = order[torch.argsort(relation[order], stable=True)]
    relation = relation[order]
    _, count = torch.unique_consecutive(relation, return_counts=True)
    turn = ragged_arange(torch.zeros_like(count), count, order.numel())[1]
    keep = turn < num_heads
    chosen = pairs[order[keep]]
    chosen = chosen[torch.argsort(turn[keep], stable=True)]
    return torch.stack([chosen % num_nodes, chosen // num_nodes])


@torch.no_grad()
def rule_overlap(rules: Any, data: Any, num_heads: int = OVERLAP_HEADS,
                 seed: int = 0, min_jaccard: float = MIN_JACCARD,
                 deadline: Optional[float] = None) -> RuleOverlap:
    r"""The Jaccard index of the predictions of every two rules of
    :obj:`rules` with the same query relation, on the training graph of
    :obj:`data` and :obj:`num_heads` heads per query relation (see the
    module's description); the pairs with an index of at least
    :obj:`min_jaccard`.

    Args:
        rules (AppliedRules): The rules.
        data: The KG they were mined on, in any layout
            :func:`~pyg_degreembed.as_kg` reads.
        num_heads (int, optional): Heads per query relation. (default:
            :data:`OVERLAP_HEADS`)
        seed (int, optional): Seed of the heads' sample and of the answers
            kept where a query has too many pairs. (default: :obj:`0`)
        min_jaccard (float, optional): The smallest index kept. (default:
            :data:`MIN_JACCARD`)
        deadline (float, optional): A :func:`time.perf_counter` reading
            after which no more heads are followed (the first
            :data:`QUERIES_AT_ONCE` are, in the turns of
            :func:`sampled_heads`). (default: :obj:`None`)
    """
    check_positive_ints(num_heads=num_heads)
    kg = as_kg(data)
    N, M = kg.num_nodes, rules.num_rules
    paths = rules.rule_key.numel()
    device = rules.rule_key.device
    graph = resolve_graph(data, num_relations=kg.num_relations,
                          device=device)
    head, relation = sampled_heads(graph_queries(kg), N, num_heads,
                                   seed).to(device)
    size = torch.zeros(M, dtype=torch.long, device=device)
    merged = _PairCounts(device)
    for begin in range(0, head.numel(), QUERIES_AT_ONCE):
        if begin and deadline is not None and all_reduce_number(
                float(time.perf_counter() > deadline), 'max'):
            break  # every process, when one is late
        end = begin + QUERIES_AT_ONCE
        (cell, rule), constant = rules._firings(
            graph, head[begin:end], relation[begin:end], None)
        if constant is not None:  # their indices after the path rules'
            cell = torch.cat([cell, constant[0]])
            rule = torch.cat([rule, paths + constant[1]])
        cell, rule = _bounded(cell, rule, N, M, seed)
        size += torch.bincount(rule, minlength=M)
        merged.add(*_cofiring_pairs(cell, rule, M))
    keys, counts = merged.merge()
    first, second = keys // max(M, 1), keys % max(M, 1)
    jaccard = counts.double() / (size[first] + size[second] - counts)
    keep = jaccard >= min_jaccard
    return RuleOverlap(torch.stack([first[keep], second[keep]]),
                       jaccard[keep])


class _PairCounts:
    # Counts of pair keys added in parts, merged (summed by key) when the
    # parts pending outgrow the merged ones: O(n log n) in all.
    def __init__(self, device):
        empty = torch.zeros(0, dtype=torch.long, device=device)
        self.keys, self.counts = [empty], [empty]
        self.merged = self.pending = 0

    def add(self, keys: Tensor, counts: Tensor):
        self.keys.append(keys)
        self.counts.append(counts)
        self.pending += keys.numel()
        if self.pending > self.merged:
            self.merge()

    def merge(self) -> Tuple[Tensor, Tensor]:
        keys, inverse = torch.unique(torch.cat(self.keys),
                                     return_inverse=True)
        counts = torch.zeros_like(keys).index_add_(0, inverse,
                                                   torch.cat(self.counts))
        self.keys, self.counts = [keys], [counts]
        self.merged, self.pending = keys.numel(), 0
        return keys, counts


def _bounded(cell: Tensor, rule: Tensor, N: int, M: int, seed: int):
    # The firings (cell b * N + y, rule), each once, sorted by cell then
    # rule; of a query with more than MAX_QUERY_PAIRS co-firing pairs, those
    # of a share of its answers y (the same for all its rules, by a hash).
    key = torch.unique(cell * M + rule)
    cell, rule = key // M, key % M
    cells, inverse, count = torch.unique_consecutive(
        cell, return_inverse=True, return_counts=True)
    query = cells // N
    pairs = torch.zeros(int(query.max()) + 1 if query.numel() else 0,
                        dtype=torch.double, device=cell.device)
    pairs.index_add_(0, query, (count * (count - 1) // 2).double())
    share = (MAX_QUERY_PAIRS / pairs.clamp(min=1.)).clamp(max=1.)
    mask = (1 << 53) - 1
    draw = (splitmix64(cells % N + seed * N) & mask).double() / (1 << 53)
    keep = (draw < share[query])[inverse]
    return cell[keep], rule[keep]


def _cofiring_pairs(cell: Tensor, rule: Tensor, M: int):
    # The distinct pairs i * M + j (i < j) of rules that reach one cell, and
    # in how many cells each; firings sorted by cell, then rule.
    count = torch.unique_consecutive(cell, return_counts=True)[1]
    segment, position = ragged_arange(torch.zeros_like(count), count,
                                      cell.numel())
    index = torch.arange(cell.numel(), device=cell.device)
    firing, partner = ragged_arange(index + 1,
                                    count[segment] - 1 - position)
    return torch.unique(rule[firing] * M + rule[partner], return_counts=True)


def rule_clusters(num_rules: int, overlap: RuleOverlap,
                  threshold: float) -> Tensor:
    r"""The cluster of each rule under :obj:`threshold` (see the module's
    description): the smallest rule index of its connected component in
    the graph of the pairs of :obj:`overlap` with an index of at least
    :obj:`threshold`.

    :rtype: :class:`torch.Tensor` of shape :obj:`[num_rules]`
    """
    import networkx as nx
    check_redundancy(threshold)
    cluster = torch.arange(num_rules)
    linked = overlap.pairs[:, overlap.jaccard >= threshold].cpu()
    graph = nx.Graph()
    graph.add_edges_from(linked.t().tolist())
    for component in nx.connected_components(graph):
        members = torch.tensor(sorted(component))
        cluster[members] = members[0]
    return cluster.to(overlap.pairs.device)
