r"""Rules whose head names an entity (AnyBURL's acyclic rules of length at
most 1), counted and fired for :class:`~pyg_degreembed.AppliedRules`.

For query relation :math:`q \in [0, 2R)`, an edge type :math:`b` and
entities :math:`c, d`:

* :math:`q(X, c) \Leftarrow b(X, d)`: a head with a :math:`b`-edge to
  :math:`d` has the answer :math:`c`;
* :math:`q(X, c) \Leftarrow b(X, A)`: a head with a :math:`b`-edge to any
  :math:`A` has the answer :math:`c`;
* :math:`q(X, c) \Leftarrow`: any head has the answer :math:`c` (the body is
  empty; the rule orders the answers by how often they answer :math:`q`).

Different terms stand for different entities (object identity, as
AnyBURL): :math:`X, c, d, A` are pairwise distinct, so no rule uses the
query's own edge :math:`(x, q, c)` or a self-loop.  Support and body
groundings are counted as for the path rules: over the distinct queries
:math:`(x, q, c)` of both directions of the observed graph's triples (facts
and train, :func:`~pyg_degreembed.data.kg.graph_queries`) and its distinct
edges; the confidence is :math:`\mathrm{support} /
(\mathrm{groundings} + u)`.

A rule is read both ways, as AnyBURL applies its rules: :math:`q(X, c)
\Leftarrow b(X, d)` answers the query :math:`(x, q, ?)` with :math:`c`
where :math:`b(x, d)` holds, and the query :math:`(c, q^{-1}, ?)` of the
inverse relation with every :math:`X \neq d` that has a :math:`b`-edge to
:math:`d`, with the same confidence (the share of those :math:`X` that
:math:`q` links to :math:`c`).  The bodies :math:`b(X, A)` and the empty
one are read forwards only (backwards they would answer most entities).

These rules name entities of the graph they were mined on: they hold only
for that graph's entity ids (transductive use).
"""
import time
from dataclasses import dataclass
from typing import Iterator, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import graph_queries
from pyg_degreembed.data.ragged import (find_sorted, outside_ranges,
                                        ragged_arange)
from pyg_degreembed.data.resolve import resolve_graph
from pyg_degreembed.data.typed_graph import TypedGraph
from pyg_degreembed.interpret.rules import format_atom

#: The body node of a rule whose body is :math:`b(X, A)` (any entity).
ANY = -1
#: The weakest constant rule kept by :meth:`ConstantRules.mine` (AnyBURL's
#: default threshold).
MIN_CONFIDENCE = 1e-4


def rule_confidence(support: Tensor, groundings: Tensor,
                    unseen: float) -> Tensor:
    r"""AnyBURL's confidence :math:`\mathrm{support} / (\mathrm{groundings}
    + u)` of rules with the given counts (float64), the one formula of every
    applied rule (path, answer-type and constant rules)."""
    return support.double() / (groundings + unseen)


class ConstantRuleCounts(NamedTuple):
    r"""Per rule: its query relation :math:`q`, body edge type :math:`b`
    (:math:`2R` for the empty body), body entity :math:`d` (:data:`ANY`
    for :math:`b(X, A)` and the empty body), answer :math:`c`, support and
    body groundings, each of shape :obj:`[M]`."""
    relation: Tensor
    body_type: Tensor
    body_node: Tensor
    answer: Tensor
    support: Tensor
    groundings: Tensor


def rule_key(relation: Tensor, body_type: Tensor, body_node: Tensor,
             num_edge_types: int, num_nodes: int) -> Tensor:
    r"""The sort key of a rule's (query relation, body): rules of one body
    are contiguous, one per answer."""
    return (relation * (num_edge_types + 1) + body_type) * (num_nodes + 1) \
        + body_node + 1


def _distinct_edges(graph: TypedGraph) -> Tuple[Tensor, Tensor, Tensor]:
    # The distinct edges (src, type, dst) without self-loops, sorted.
    keys = torch.unique_consecutive(graph.edge_keys)
    K, N = graph.num_edge_types, graph.num_nodes
    src, edge_type, dst = keys // (K * N), keys // N % K, keys % N
    keep = src != dst
    return src[keep], edge_type[keep], dst[keep]


@torch.no_grad()
def constant_rule_counts(data, chunk_size: int = 65536,
                         time_limit: Optional[float] = None,
                         seed: int = 0,
                         min_support: int = 1) -> ConstantRuleCounts:
    r"""Support and body groundings of every rule of the module's three
    forms that answers at least one query of :obj:`data`'s observed graph.

    With :obj:`time_limit`, the queries are joined with their
    heads' edges in a seeded random order until the limit has passed (at
    least one chunk), and so past :data:`MAX_CONSTANT_KEYS` distinct rules:
    the rules with a body are those of the queries joined, counted on the
    sample's scale as the sampled path rules are: their support on the
    queries joined, their body groundings scaled by the share of the
    queries joined (rounded, at least the support), so that :math:`u`
    weighs the evidence the sample holds (the support scaled up instead
    gives a rule met twice in a sample of 0.1 % of the queries the
    confidence of one that holds for all its groundings).  The rules with
    an empty body stay exact.  With :obj:`min_support` above 1,
    the queries whose (relation, answer) fewer than :obj:`min_support`
    queries share are not joined (no rule of theirs can reach it: a hub's
    inverse queries).  Memory:
    at most :data:`JOIN_ROWS` query-edge rows at once, and the distinct
    rules.

    Args:
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads.
        chunk_size (int, optional): Queries joined with their
            head's edges at once. (default: :obj:`65536`)
        time_limit (float, optional): Seconds for the joins. (default:
            :obj:`None`, every query)
        seed (int, optional): Seed of the order of the queries under a
            time limit. (default: :obj:`0`)
        min_support (int, optional): Count only the rules that answer at
            least this many of the queries joined (on FB15k-237, 2 leaves
            a small share of the rules, and takes half the time).
            (default: :obj:`1`)
    """
    start = time.perf_counter()
    kg = as_kg(data)
    R, N = kg.num_relations, kg.num_nodes
    K = 2 * R
    graph = resolve_graph(data, num_relations=R)
    src, edge_type, dst = _distinct_edges(graph)
    ptr = torch.zeros(N + 1, dtype=torch.long)
    ptr[1:] = torch.bincount(src, minlength=N).cumsum(0)
    x, q, c = graph_queries(kg)

    def key(b, d, rows):
        return rule_key(q[rows], b, d, K, N) * N + c[rows]

    found = _KeyCounts()
    found.add(key(torch.full_like(q, K), torch.full_like(q, ANY),
                  torch.arange(q.numel())))
    order = torch.arange(q.numel()) if time_limit is None else \
        torch.randperm(q.numel(), generator=torch.Generator().manual_seed(
            seed))
    if min_support > 1:
        # A rule with a body answers queries of one (q, c): where fewer
        # than min_support queries share theirs, it cannot reach it (a hub
        # head's inverse queries, each of its own answer, are left out).
        pair, inverse, shared = torch.unique(q * N + c, return_inverse=True,
                                             return_counts=True)
        order = order[shared[inverse[order]] >= min_support]
    degree = ptr[x + 1] - ptr[x]
    joined = 0
    for rows in _row_chunks(order, degree, chunk_size):
        if time_limit is not None and joined > 0 and \
                time.perf_counter() - start >= time_limit or \
                len(found) > MAX_CONSTANT_KEYS:
            break
        joined += rows.numel()
        segment, edge = ragged_arange(ptr[x[rows]], degree[rows])
        rows = rows[segment]
        keep = dst[edge] != c[rows]
        rows, edge = rows[keep], edge[keep]
        found.add(key(edge_type[edge], dst[edge], rows))
        # b(X, A) holds, A != c, once per (query, b).
        typed = torch.unique(rows * K + edge_type[edge])
        found.add(key(typed % K, torch.full_like(typed, ANY), typed // K))
    keys, support = found.counts()
    if min_support > 1:  # (on the queries joined)
        keep = support >= min_support
        keys, support = keys[keep], support[keep]
    answer, body = keys % N, keys // N
    body_node = body % (N + 1) - 1
    relation, body_type = body // (N + 1) // (K + 1), body // (N + 1) % (K + 1)
    share = joined / max(order.numel(), 1)  # (pruned queries support none)

    # Groundings: pairs (x, c), x != c, whose body holds.
    groundings = torch.full_like(support, N - 1)
    # b(X, d): the b-edges into d, less c's own.
    into = torch.bincount(edge_type * N + dst, minlength=K * N)
    node = body_node >= 0
    b, d, a = body_type[node], body_node[node], answer[node]
    lo, hi = graph.edge_range(a, b, d)
    groundings[node] = into[b * N + d] - (hi > lo).long()
    # b(X, A): the heads with a b-edge to some A != c.
    typed = (body_node < 0) & (body_type < K)
    pair, count = torch.unique(src * K + edge_type, return_counts=True)
    heads = torch.bincount(pair % K, minlength=K)
    has_type = torch.zeros(N * K, dtype=torch.bool)
    has_type[pair] = True
    only = count == 1   # heads whose b-edges all go to one entity
    single = torch.bincount(
        (pair[only] % K) * N + dst[find_sorted(src * K + edge_type,
                                               pair[only])[0]],
        minlength=K * N)
    b, a = body_type[typed], answer[typed]
    groundings[typed] = heads[b] - has_type[a * K + b].long() - \
        single[b * N + a]
    if share < 1:  # the rules with a body counted on the sample's scale
        with_body = body_type < K
        groundings[with_body] = torch.maximum(torch.round(
            groundings[with_body] * share).long(), support[with_body])
    return ConstantRuleCounts(relation, body_type, body_node, answer,
                              support, groundings)


#: Query-edge rows joined at once by :func:`constant_rule_counts`.
JOIN_ROWS = 1 << 22
#: The most distinct rules :func:`constant_rule_counts` counts: past them
#: it stops joining and scales the support as under a time limit.
MAX_CONSTANT_KEYS = 50_000_000


def _row_chunks(order: Tensor, degree: Tensor,
                chunk_size: int) -> Iterator[Tensor]:
    # Consecutive parts of `order` of at most chunk_size queries whose
    # heads have at most JOIN_ROWS edges in all (at least one query each).
    ends = torch.cumsum(degree[order], 0)
    begin = 0
    while begin < order.numel():
        before = int(ends[begin - 1]) if begin else 0
        end = int(torch.searchsorted(ends, before + JOIN_ROWS, right=True))
        end = min(max(end, begin + 1), begin + chunk_size)
        yield order[begin:end]
        begin = end


class _KeyCounts:
    r"""Counts of int64 keys added in parts, merged once the parts hold
    more than :data:`JOIN_ROWS` keys (memory: the distinct keys)."""
    def __init__(self):
        self.keys, self.count, self.pending = [], [], 0

    def add(self, keys: Tensor):
        keys, count = torch.unique(keys, return_counts=True)
        self.keys.append(keys)
        self.count.append(count)
        self.pending += keys.numel()
        if self.pending > JOIN_ROWS and len(self.keys) > 1:
            keys, count = self.counts()
            self.keys, self.count, self.pending = [keys], [count], \
                keys.numel()

    def counts(self) -> Tuple[Tensor, Tensor]:
        keys, inverse = torch.unique(torch.cat(self.keys),
                                     return_inverse=True)
        return keys, torch.zeros_like(keys).index_add_(
            0, inverse, torch.cat(self.count))

    def __len__(self) -> int:
        return self.pending


def fire(graph: TypedGraph, head: Tensor, relation: Tensor,
         rules: 'ConstantRules',
         removed: Optional[Tuple[Tensor, Tensor]] = None
         ) -> Tuple[Tensor, Tensor, Tensor]:
    r"""The rules that answer each query :obj:`(head[i], relation[i], ?)` in
    :obj:`graph`, as (query, answer, rule index): those of the query's
    relation whose body holds for its head, and, read backwards, those of
    the inverse relation with a body :math:`b(X, d)` whose answer is the
    query's head (see :class:`ConstantRules`).

    Args:
        graph (TypedGraph): The observed graph (the one the rules were
            mined on, or one with the same entity ids).
        head (torch.Tensor): Query heads, shape :obj:`[B]`.
        relation (torch.Tensor): Query relations in :math:`[0, 2R)`, shape
            :obj:`[B]`.
        rules (ConstantRules): The rules.
        removed ((torch.Tensor, torch.Tensor), optional): Per query, the
            ranges :obj:`[lo, hi)` of the edge ids it does not see, each of
            shape :obj:`[B, S]`. (default: :obj:`None`)
    """
    forward = _fire_forward(graph, head, relation, rules.key, rules.answer,
                            removed)
    backward = _fire_backward(graph, head, relation, rules, removed)
    query, node, rule = (torch.cat(pair) for pair in zip(forward, backward))
    return query, node, rule


def _fire_backward(graph: TypedGraph, head: Tensor, relation: Tensor,
                   rules: 'ConstantRules',
                   removed: Optional[Tuple[Tensor, Tensor]]
                   ) -> Tuple[Tensor, Tensor, Tensor]:
    # A rule q(X, c) <= b(X, d) read backwards: for the query (c, q', ?) of
    # the inverse relation q', every X with a b-edge to d (the edges
    # d -b'-> X), X != c, X != d.
    K = graph.num_edge_types
    target = ((relation + K // 2) % K) * graph.num_nodes + head
    lo = torch.searchsorted(rules.backward_key, target)
    hi = torch.searchsorted(rules.backward_key, target, right=True)
    query, at = ragged_arange(lo, hi - lo)
    rule = rules.backward_rule[at]
    d = rules.body_node[rule]
    first, last = graph.type_range(d, (rules.body_type[rule] + K // 2) % K)
    row, edge = ragged_arange(first, last - first)
    query, rule, node = query[row], rule[row], graph.edge_dst[edge]
    keep = (node != head[query]) & (node != d[row])
    if removed is not None:
        keep &= outside_ranges(edge, removed[0][query], removed[1][query])
    query, node, rule = query[keep], node[keep], rule[keep]
    # Once per (query, answer, rule): duplicate edges fire it once.
    M = max(len(rules), 1)
    fired = torch.unique((query * graph.num_nodes + node) * M + rule)
    return (fired // M // graph.num_nodes, fired // M % graph.num_nodes,
            fired % M)


def _fire_forward(graph: TypedGraph, head: Tensor, relation: Tensor,
                  key: Tensor, answer: Tensor,
                  removed: Optional[Tuple[Tensor, Tensor]]
                  ) -> Tuple[Tensor, Tensor, Tensor]:
    # The rules of the query's relation whose body holds for its head.
    K, N = graph.num_edge_types, graph.num_nodes
    # The edges each query's head sees (all copies, then distinct).
    walk, edge = ragged_arange(graph.node_ptr[head],
                               graph.node_ptr[head + 1] -
                               graph.node_ptr[head])
    keep = graph.edge_dst[edge] != head[walk]
    if removed is not None:
        keep &= outside_ranges(edge, removed[0][walk], removed[1][walk])
    seen = torch.unique((walk[keep] * K + graph.edge_type[edge[keep]]) * N +
                        graph.edge_dst[edge[keep]])
    walk, b, d = seen // (K * N), seen // N % K, seen % N
    typed, nb = torch.unique_consecutive(walk * K + b, return_counts=True)
    # Bodies: b(X, d) per seen edge, b(X, A) per seen type, the empty one.
    B, device = head.numel(), head.device
    body_walk = torch.cat([walk, typed // K, torch.arange(B, device=device)])
    body_type = torch.cat([b, typed % K, head.new_full((B, ), K)])
    body_node = torch.cat([d, torch.full_like(typed, ANY),
                           head.new_full((B, ), ANY)])
    body_key = rule_key(relation[body_walk], body_type, body_node, K, N)
    lo = torch.searchsorted(key, body_key)
    hi = torch.searchsorted(key, body_key, right=True)
    body, rule = ragged_arange(lo, hi - lo)
    query, node = body_walk[body], answer[rule]
    fires = (node != head[query]) & (node != body_node[body])
    # b(X, A) needs an A other than the answer.
    typed_body = (body_node[body] == ANY) & (body_type[body] < K)
    count = torch.zeros_like(body)
    count[typed_body] = nb[body[typed_body] - walk.numel()]
    to_answer = find_sorted(seen, (query * K + body_type[body]) * N + node)[1]
    fires &= ~typed_body | (count - to_answer.long() >= 1)
    return query[fires], node[fires], rule[fires]


class ConstantRules:
    r"""The constant rules of a KG with their confidences, sorted by
    (query relation, body) for :meth:`fire`.  Build them with
    :meth:`mine`.

    Args:
        relation, body_type, body_node, answer (torch.Tensor): As in
            :class:`ConstantRuleCounts`, each of shape :obj:`[M]`.
        confidence (torch.Tensor): Their confidences, shape :obj:`[M]`.
        support, groundings (torch.Tensor): Their counts, shape :obj:`[M]`.
        num_nodes (int): The number of entities of the graph they name.
        num_edge_types (int): :math:`2R`.
    """
    FIELDS = ('relation', 'body_type', 'body_node', 'answer', 'confidence',
              'support', 'groundings')
    relation: Tensor
    body_type: Tensor
    body_node: Tensor
    answer: Tensor
    confidence: Tensor
    support: Tensor
    groundings: Tensor

    def __init__(self, relation: Tensor, body_type: Tensor,
                 body_node: Tensor, answer: Tensor, confidence: Tensor,
                 support: Tensor, groundings: Tensor, num_nodes: int,
                 num_edge_types: int):
        self.num_nodes, self.num_edge_types = num_nodes, num_edge_types
        key = rule_key(relation, body_type, body_node, num_edge_types,
                       num_nodes)
        # Sorted by body, best first within one body.
        order = torch.argsort(confidence, descending=True, stable=True)
        order = order[torch.argsort(key[order], stable=True)]
        self.key = key[order]
        for name, value in zip(self.FIELDS, (
                relation, body_type, body_node, answer, confidence, support,
                groundings)):
            setattr(self, name, value[order])
        # The rules with a body b(X, d) by (relation, answer), for reading
        # them backwards (fire()).
        with_node = (self.body_node >= 0).nonzero().view(-1)
        backward = self.relation[with_node] * num_nodes + \
            self.answer[with_node]
        self.backward_key, at = torch.sort(backward, stable=True)
        self.backward_rule = with_node[at]

    @classmethod
    def mine(cls, data, min_support: int = 2, unseen: float = 200.,
             min_confidence: float = MIN_CONFIDENCE,
             counts: Optional[ConstantRuleCounts] = None
             ) -> 'ConstantRules':
        r"""The rules of :func:`constant_rule_counts` (:obj:`counts`, if
        already computed) that answer at least :obj:`min_support` queries
        of the observed graph, with the confidence :math:`\mathrm{support} /
        (\mathrm{groundings} + u)`, kept from :obj:`min_confidence` up
        (AnyBURL's default threshold: the weakest rules, a body that holds
        for most entities, would fire for every query and order little; on
        WN18RR's validation set the threshold costs 0.0001 MRR and a third
        of the ranking time)."""
        if counts is None:
            counts = constant_rule_counts(data)
        confidence = rule_confidence(counts.support, counts.groundings,
                                     unseen)
        keep = (counts.support >= min_support) & \
            (confidence >= min_confidence)
        kg = as_kg(data)
        return cls(counts.relation[keep], counts.body_type[keep],
                   counts.body_node[keep], counts.answer[keep],
                   confidence[keep], counts.support[keep],
                   counts.groundings[keep], kg.num_nodes,
                   2 * kg.num_relations)

    def to_dict(self) -> dict:
        r"""The rules as a plain dictionary (:meth:`from_dict` reads
        it)."""
        out = {name: getattr(self, name) for name in self.FIELDS}
        out.update(num_nodes=self.num_nodes,
                   num_edge_types=self.num_edge_types)
        return out

    @classmethod
    def from_dict(cls, values: Optional[dict]) -> Optional['ConstantRules']:
        return None if values is None else cls(**values)

    def to(self, device) -> 'ConstantRules':
        values = self.to_dict()
        for name in self.FIELDS:
            values[name] = values[name].to(device)
        return ConstantRules(**values)

    def __len__(self) -> int:
        return self.key.numel()

    def rules(self, relation: int) -> List['ConstantRule']:
        r"""The rules of query relation :obj:`relation`, best first."""
        sel = (self.relation == relation).nonzero().view(-1)
        sel = sel[torch.argsort(self.confidence[sel], descending=True,
                                stable=True)]
        return [self.rule(int(i)) for i in sel]

    def rule(self, index: int) -> 'ConstantRule':
        r"""Rule :obj:`index` (in the sorted order)."""
        return ConstantRule(int(self.relation[index]),
                            int(self.body_type[index]),
                            int(self.body_node[index]),
                            int(self.answer[index]),
                            float(self.confidence[index]))

    def fire(self, graph: TypedGraph, head: Tensor, relation: Tensor,
             removed: Optional[Tuple[Tensor, Tensor]] = None,
             with_rule: bool = False) -> Tuple[Tensor, ...]:
        r"""The rules whose body holds for each query in :obj:`graph`, see
        :func:`fire` (with the index of each fired rule last if
        :obj:`with_rule`); refuses a graph with another number of entities
        than the one the rules name."""
        if graph.num_nodes != self.num_nodes:
            raise ValueError(
                f'the constant rules name entities of the graph they were '
                f'mined on ({self.num_nodes} entities); this graph has '
                f'{graph.num_nodes}. For a new graph, rank without them '
                '(AppliedRules.without_constants())')
        query, node, rule = fire(graph, head, relation, self, removed)
        out = (query, node, self.confidence[rule])
        return out + (rule, ) if with_rule else out


@dataclass(frozen=True)
class ConstantRule:
    r"""A rule whose head names an entity (see the module's description).

    Attributes:
        head (int): The query relation :math:`q` in :math:`[0, 2R)`.
        body_type (int): The body's edge type :math:`b` (:math:`2R`: the
            empty body).
        body_node (int): The body's entity :math:`d` (:data:`ANY`: any).
        answer (int): The entity :math:`c` it predicts.
        confidence (float): Its confidence.
    """
    head: int
    body_type: int
    body_node: int
    answer: int
    confidence: float

    def format(self, relation_names: Sequence[str],
               entity_names: Sequence[str]) -> str:
        r"""The rule as text, e.g. :obj:`nationality(X,usa) <=
        born_in(X,A)  0.31` (the empty body is written :obj:`true`)."""
        head = format_atom(self.head, 'X', entity_names[self.answer],
                           relation_names)
        if self.body_type >= 2 * len(relation_names):
            body = 'true'
        else:
            other = 'A' if self.body_node == ANY else \
                entity_names[self.body_node]
            body = format_atom(self.body_type, 'X', other, relation_names)
        return f'{head} <= {body}  {self.confidence:.3g}'
