r"""Explicit rules with empirical confidences, applied as a symbolic rule
miner applies them.

**Path rules.** A rule of query relation :math:`q \in [0, 2R)` is a path
pattern :math:`(k_1, \ldots, k_m)`, :math:`m \leq L`:
:math:`q(X, Y) \Leftarrow k_1(X, Z_1), \ldots, k_m(Z_{m-1}, Y)`.  Its
confidence is measured on the observed graph, whose triples (facts and
train, :func:`~pyg_degreembed.data.kg.graph_queries`) are the known answers
of :math:`q` (each answer reached without its own edge and that edge's
inverse, as in training), with AnyBURL's pessimism for rules of little
support:

.. math::
    \mathrm{conf}(q, \mathbf{p}) = \frac{|\{(x, y) : q(x, y),\;
    \mathbf{p}(x, y)\}|}{|\{(x, y) : \mathbf{p}(x, y)\}| + u},

with :math:`u` unseen negative groundings (:obj:`unseen`) and :math:`x
\neq y` throughout (object identity: the head is never its own answer).

**Answer-type rules.** :math:`q(X, Y) \Leftarrow s(Y, \_)`: the answer has
an edge of type :math:`s` (a column of its degree-type set, see
:mod:`pyg_degreembed.data.features`), with the confidence
:math:`|\{(x, y) : q(x, y), s(y, \_)\}| / (|\{(x, y) : \exists y'\,
q(x, y'),\; s(y, \_)\}| + u)`, the answer's own edge left out.

**Constant rules** (optional): :math:`q(X, c) \Leftarrow b(X, d)`,
:math:`q(X, c) \Leftarrow b(X, A)` and :math:`q(X, c) \Leftarrow`, rules
that name the answer :math:`c` (see
:mod:`pyg_degreembed.interpret.constant_rules`), with the same confidence;
they compete with the path rules for the keys below.  They hold for the
entities of the graph they were mined on only.

**Ranking.** A candidate :math:`y` of :math:`(h, q, ?)` is ranked by the
confidence of the best path or constant rule whose body holds for
:math:`(h, y)`, ties broken by the second best, and so on (AnyBURL's
*max-plus*; :obj:`num_keys` rules are compared), then by its best
answer-type rule, then, if a :obj:`tie_break` model is given, by that
model's score.  With :obj:`aggregation="noisy-or"` the candidates are
ranked first by the noisy-or of the confidences of their :obj:`num_keys`
best rules, :math:`1 - \prod_r (1 - \mathrm{conf}_r)` (independent evidence
adds up), then as above by the best :data:`TIE_KEYS` of them (AnyBURL's
noisy-or over the top rules).
:meth:`AppliedRules.forward` returns scores that order the candidates
exactly so (equal keys, equal scores).

**Redundant rules.** With :obj:`redundancy` :math:`\theta`, the rules (path
and constant) of a query relation whose predictions on the training graph
overlap (Jaccard index :math:`\geq \theta`, directly or through other
rules) form a cluster (see :mod:`pyg_degreembed.interpret.redundancy`) and
a cluster counts once: a candidate's keys are the confidences of the best
rule of each cluster that reaches it (SAFRAN's non-redundant noisy-or).

**Rules and model combined.** With :obj:`model_weight` :math:`\alpha > 0`
(noisy-or only), the tie-break model's score :math:`s` is one more piece of
evidence, its score scaled to the query's best:

.. math::
    \mathrm{score}(h, q, y) = 1 - \prod_{r} (1 - \mathrm{conf}_r) \,
    \Bigl(1 - \alpha \, \frac{\max(s(h, q, y), 0)}
    {\max_{y'} s(h, q, y')}\Bigr),

so that a candidate no rule reaches can still outrank one reached by weak
rules; equal scores are ordered by the keys above (an added
:math:`10^{-9}` of their order).  In evidence :math:`-\log(1 - p)` the
parts add up: :meth:`AppliedRules.evidence` lists them.
"""
import copy
import math
import weakref
from dataclasses import dataclass
from typing import (Any, Dict, List, NamedTuple, Optional, Sequence, Tuple,
                    Union)

import torch
from torch import Tensor
from torch.nn import Module

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import (check_positive_ints, check_rule_length,
                                    graph_queries, index_tensor,
                                    query_edges)
from pyg_degreembed.data.ragged import find_sorted
from pyg_degreembed.data.resolve import resolve_graph
from pyg_degreembed.data.typed_graph import TypedGraph
from pyg_degreembed.interpret.constant_rules import (MIN_CONFIDENCE,
                                                     ConstantRule,
                                                     ConstantRuleCounts,
                                                     ConstantRules,
                                                     rule_confidence)
from pyg_degreembed.interpret.paths import (check_pattern_keys, cost_ranges,
                                            expand_paths,
                                            expand_paths_in_parts,
                                            pattern_of, walk_chunks)
from pyg_degreembed.interpret.query_paths import query_paths
from pyg_degreembed.interpret.redundancy import (RuleOverlap,
                                                 check_redundancy,
                                                 rule_clusters, rule_overlap)
from pyg_degreembed.interpret.rules import Rule, format_atom
from pyg_degreembed.interpret.target_paths import (forward_depths,
                                                   paths_to_targets,
                                                   suffix_keys)
from pyg_degreembed.training.budget import check_memory

#: How the rules that reach a candidate make its rank (see the module's
#: description).
AGGREGATIONS = ('max-plus', 'noisy-or')
#: How many of its best rules break the ties of a candidate's noisy-or (by
#: max-plus).
TIE_KEYS = 3
#: The order of a combined score's ranking keys added to it (see the
#: module's description).
KEY_WEIGHT = 1e-9
#: The most walks (paths before merging, from the heads) of the queries
#: scored at once; a head with more is scored alone.
GROUP_WALKS = 10**9
#: Memory a rule firing (a rule reaching a cell) takes until the cells'
#: keys are found: its cell and rule, their concatenation and the sort of
#: the keys (:func:`_best_keys`), 8 bytes each.
FIRING_BYTES = 64


class Aggregation(NamedTuple):
    r"""How :class:`AppliedRules` make a candidate's score (see the
    module's description)."""
    #: One of :data:`AGGREGATIONS`.
    name: str
    #: The rules compared per candidate (best first).
    num_keys: int
    #: The weight :math:`\alpha` of the tie-break model's evidence.
    model_weight: float = 0.
    #: The overlap from which rules count once (see
    #: :mod:`pyg_degreembed.interpret.redundancy`), :obj:`None`: each rule
    #: counts.
    redundancy: Optional[float] = None


def check_aggregation(aggregation: Any, model_weight: Any = 0.,
                      redundancy: Any = None):
    r"""Refuses an aggregation that is not one of :data:`AGGREGATIONS`,
    a model weight outside :math:`[0, 1)` or with max-plus, and a
    redundancy threshold outside :math:`(0, 1]`."""
    check_redundancy(redundancy)
    if aggregation not in AGGREGATIONS:
        raise ValueError(f"'aggregation' must be one of {AGGREGATIONS}, got "
                         f'{aggregation!r}')
    if isinstance(model_weight, bool) or \
            not isinstance(model_weight, (int, float)) or \
            not 0 <= model_weight < 1:
        raise ValueError(f"'model_weight' must be a number in [0, 1), got "
                         f'{model_weight!r}')
    if model_weight and aggregation != 'noisy-or':
        raise ValueError("'model_weight' adds the model to the noisy-or "
                         f"aggregation, not to {aggregation!r}")


class AppliedRules(Module):
    r"""Ranks answers with explicit rules and their empirical confidences
    (see the module's description).  Build it with :meth:`mine`.

    Args:
        num_relations (int): The number :math:`R` of KG relations.
        num_steps (int): The longest rule :math:`L`.
        relation (torch.Tensor): Query relation of each rule in
            :math:`[0, 2R)`, shape :obj:`[M]`.
        pattern (torch.Tensor): Pattern id of each rule (see
            :mod:`pyg_degreembed.interpret.paths`), shape :obj:`[M]`.
        confidence (torch.Tensor): Confidence of each rule, shape
            :obj:`[M]`.
        num_keys (int, optional): How many rules are compared per candidate
            (best first). (default: :obj:`3`)
        tie_break (torch.nn.Module, optional): A model whose score breaks
            the ties left by the rules (e.g. a trained
            :class:`~pyg_degreembed.RuleReasoner`). (default: :obj:`None`)
        type_confidence (torch.Tensor, optional): Confidence of the
            answer-type rule :math:`q(X, Y) \Leftarrow s(Y, \_)`, shape
            :obj:`[2R, 2R]` (row :math:`q`, column :math:`s`). (default:
            :obj:`None`, no answer-type rules)
        support (torch.Tensor, optional): The graph's queries each rule
            answers (its correct predictions), shape :obj:`[M]`; kept to
            write the rules in AnyBURL's format
            (:mod:`pyg_degreembed.interpret.anyburl`). (default: :obj:`None`)
        groundings (torch.Tensor, optional): The pairs each rule's body
            joins (its predictions), shape :obj:`[M]`. (default:
            :obj:`None`)
        constant_rules (ConstantRules, optional): Rules that name their
            answer, for the :obj:`num_nodes` entities of the graph they
            were mined on (see
            :mod:`pyg_degreembed.interpret.constant_rules`). (default:
            :obj:`None`)
        aggregation (str, optional): :obj:`"max-plus"` or
            :obj:`"noisy-or"` (see the module's description). (default:
            :obj:`"max-plus"`)
        model_weight (float, optional): The weight :math:`\alpha \in [0,
            1)` of the tie-break model's evidence in the noisy-or (see the
            module's description). (default: :obj:`0.`, the model breaks
            ties only)
        overlap (RuleOverlap, optional): The overlaps of the rules'
            predictions (see :meth:`measure_overlap`), their indices those
            of the path rules in the order of the keys
            :math:`\mathrm{relation} \cdot (2R + 1)^L + \mathrm{pattern}`
            (of :attr:`rule_key`), then :math:`M` + those of the constant
            rules in their order. (default: :obj:`None`)
        redundancy (float, optional): The overlap :math:`\theta \in (0,
            1]` from which rules count once (see the module's
            description; needs :obj:`overlap`). (default: :obj:`None`,
            every rule counts)
    """
    num_relations: int
    num_edge_types: int
    num_steps: int
    num_keys: int
    aggregation: str
    model_weight: float
    tie_break: Optional[Module]
    constant_rules: Optional[ConstantRules]
    rule_key: Tensor
    rule_prefix: Tensor
    confidence: Tensor
    support: Optional[Tensor]
    groundings: Optional[Tensor]
    type_confidence: Tensor
    redundancy: Optional[float]
    overlap_pairs: Optional[Tensor]
    overlap_jaccard: Optional[Tensor]

    def __init__(self, num_relations: int, num_steps: int, relation: Tensor,
                 pattern: Tensor, confidence: Tensor, num_keys: int = 3,
                 tie_break: Optional[Module] = None,
                 type_confidence: Optional[Tensor] = None,
                 support: Optional[Tensor] = None,
                 groundings: Optional[Tensor] = None,
                 constant_rules: Optional[ConstantRules] = None,
                 aggregation: str = 'max-plus', model_weight: float = 0.,
                 overlap: Optional[RuleOverlap] = None,
                 redundancy: Optional[float] = None):
        super().__init__()
        check_positive_ints(num_relations=num_relations, num_keys=num_keys)
        check_aggregation(aggregation, model_weight, redundancy)
        self.aggregation = aggregation
        self.model_weight = float(model_weight)
        self.redundancy = None if redundancy is None else float(redundancy)
        check_rule_length(num_steps)
        self.num_relations = num_relations
        self.num_edge_types = 2 * num_relations
        self.num_steps = num_steps
        self.num_keys = num_keys
        self.tie_break = tie_break
        key, perm = torch.sort(relation * self._num_patterns + pattern)
        self.register_buffer('rule_key', key)
        self.register_buffer('rule_prefix', self._prefixes(key),
                             persistent=False)
        self.register_buffer('rule_suffix', suffix_keys(
            key, self.num_edge_types, num_steps), persistent=False)
        self.register_buffer('confidence', confidence.double()[perm])
        if (support is None) != (groundings is None):
            raise ValueError("'support' and 'groundings' go together")
        self.register_buffer('support', None if support is None else
                             support.long()[perm])
        self.register_buffer('groundings', None if groundings is None else
                             groundings.long()[perm])
        K = self.num_edge_types
        if type_confidence is None:
            type_confidence = torch.zeros(K, K, dtype=torch.double)
        if type_confidence.shape != (K, K):
            raise ValueError(f"'type_confidence' must have shape [{K}, {K}], "
                             f"got {list(type_confidence.shape)}")
        self.register_buffer('type_confidence', type_confidence.double())
        self.constant_rules = None if constant_rules is None else \
            constant_rules.to(self.rule_key.device)
        self.register_buffer('overlap_pairs', None)
        self.register_buffer('overlap_jaccard', None)
        # The clusters of each redundancy asked for (see clusters).
        self._clusters: Dict[Tuple[float, int, bool], Tensor] = {}
        if overlap is not None:
            self._set_overlap(overlap)
        if redundancy is not None and overlap is None:
            raise ValueError("'redundancy' clusters the rules by their "
                             "overlap: give an 'overlap' (measure_overlap)")
        # The answer-type ranks of the last graph (see _answer_types).
        self._types: Tuple[Any, Optional[Tensor]] = (None, None)
        #: Rules :func:`~pyg_degreembed.read_anyburl` skipped (not cyclic
        #: path rules, or longer than this library holds).
        self.skipped = 0

    def _apply(self, fn, *args, **kwargs):
        # Module.to / .cuda / .double: the constant rules move along.
        super()._apply(fn, *args, **kwargs)
        if self.constant_rules is not None:
            self.constant_rules = self.constant_rules.to(
                self.rule_key.device)
        return self

    @property
    def setting(self) -> Aggregation:
        r"""How these rules make a candidate's score."""
        return Aggregation(self.aggregation, self.num_keys, self.model_weight,
                           self.redundancy)

    def with_setting(self, setting: Aggregation) -> 'AppliedRules':
        r"""These rules under another aggregation (:obj:`setting`: its
        name, number of keys, model weight and redundancy), sharing their
        tensors (nothing is copied)."""
        name, keys, weight, redundancy = setting
        check_aggregation(name, weight, redundancy)
        check_positive_ints(num_keys=keys)
        if redundancy is not None and self.overlap is None:
            raise ValueError("'redundancy' clusters the rules by their "
                             "overlap: give an 'overlap' (measure_overlap)")
        out = copy.copy(self)
        # Their own registries, so that moving one does not move the other.
        out._buffers = dict(self._buffers)
        out._modules = dict(self._modules)
        out.aggregation, out.num_keys = name, int(keys)
        out.model_weight = float(weight)
        out.redundancy = None if redundancy is None else float(redundancy)
        return out

    @property
    def num_rules(self) -> int:
        r"""The path and constant rules."""
        return self.rule_key.numel() + (0 if self.constant_rules is None
                                        else len(self.constant_rules))

    def _set_overlap(self, overlap: RuleOverlap):
        pairs, jaccard = overlap
        M = self.num_rules
        if pairs.dim() != 2 or pairs.size(0) != 2 or \
                jaccard.shape != pairs.shape[1:] or \
                (pairs.numel() and (int(pairs.min()) < 0 or
                                    int(pairs.max()) >= M)):
            raise ValueError(f"'overlap' must pair rule indices in [0, {M}) "
                             '(shape [2, E]) with E Jaccard indices')
        self.overlap_pairs = pairs.long().to(self.rule_key.device)
        self.overlap_jaccard = jaccard.double().to(self.rule_key.device)
        self._clusters = {}

    @property
    def overlap(self) -> Optional[RuleOverlap]:
        r"""The overlaps of the rules' predictions (:obj:`None` if not
        measured)."""
        if self.overlap_pairs is None or self.overlap_jaccard is None:
            return None
        return RuleOverlap(self.overlap_pairs, self.overlap_jaccard)

    def measure_overlap(self, data: Any, **kwargs) -> 'AppliedRules':
        r"""Measures and keeps the overlaps of the rules' predictions on
        the KG :obj:`data` they were mined on
        (:func:`~pyg_degreembed.interpret.redundancy.rule_overlap`, whose
        keyword arguments it takes), for :obj:`redundancy`; returns
        :obj:`self`."""
        self._set_overlap(rule_overlap(self, data, **kwargs))
        return self

    def _identities(self) -> Tensor:
        # Each rule's identity, the same in rules mined with another u:
        # the path rules' keys, then the constant rules' (body key, answer)
        # above them.
        if self.constant_rules is None:
            return self.rule_key
        rules = self.constant_rules
        P = self.num_edge_types * self._num_patterns
        return torch.cat([self.rule_key,
                          P + rules.key * rules.num_nodes + rules.answer])

    def take_overlap(self, other: 'AppliedRules') -> 'AppliedRules':
        r"""Keeps the overlaps measured for :obj:`other`, rules mined from
        the same counts (e.g. with another :math:`u`, which keeps fewer
        constant rules), for the rules that both hold; returns
        :obj:`self`."""
        overlap = other.overlap
        if overlap is None:
            raise ValueError('the other rules hold no overlap')
        mine = self._identities()
        order = torch.argsort(mine)
        at, found = find_sorted(mine[order],
                                other._identities()[overlap.pairs])
        both = found.all(dim=0)
        pairs = order[at[:, both]]
        self._set_overlap(RuleOverlap(pairs.sort(dim=0).values,
                                      overlap.jaccard[both]))
        return self

    def clusters(self, redundancy: float,
                 max_length: Optional[int] = None,
                 constants: bool = True) -> Tensor:
        r"""The cluster of each rule (path rules, then constant rules, see
        :obj:`overlap`; the smallest index in it) under the overlap
        :obj:`redundancy` (see the module's description); with
        :obj:`max_length`, those of the rules of :meth:`shortened` (the
        longer path rules left out of the clusters, each on its own);
        without :obj:`constants`, those of :meth:`without_constants` (the
        constant rules left out of the clusters).

        :rtype: :class:`torch.Tensor` of shape :obj:`[num_rules]`
        """
        overlap = self.overlap
        if overlap is None:
            raise ValueError("'redundancy' clusters the rules by their "
                             "overlap: give an 'overlap' (measure_overlap)")
        key = (float(redundancy), self.num_steps if max_length is None
               else int(max_length), bool(constants))
        if key not in self._clusters:
            if key[1] < self.num_steps or not key[2]:
                kept = torch.cat([
                    self.rule_length <= key[1],
                    self.rule_key.new_full((self.num_rules -
                                            self.rule_key.numel(), ),
                                           key[2], dtype=torch.bool)])
                both = kept[overlap.pairs].all(dim=0)
                overlap = RuleOverlap(overlap.pairs[:, both],
                                      overlap.jaccard[both])
            self._clusters[key] = rule_clusters(self.num_rules, overlap,
                                                key[0])
        return self._clusters[key].to(self.rule_key.device)

    def _rule_groups(self, redundancy: Optional[float],
                     max_length: Optional[int] = None,
                     constants: bool = True) -> Optional[List[Tensor]]:
        # Per table of _best_keys (path rules, then constant rules), the
        # cluster of each rule (None: each rule on its own).
        if redundancy is None:
            return None
        cluster = self.clusters(redundancy, max_length, constants)
        M = self.rule_key.numel()
        return [cluster[:M]] if self.constant_rules is None or \
            not constants else [cluster[:M], cluster[M:]]

    def without_constants(self, unseen: Optional[float] = None
                          ) -> 'AppliedRules':
        r"""The same rules without the constant rules (for a graph with
        other entities than the one they were mined on); their overlaps
        between path rules kept.

        Args:
            unseen (float, optional): The path rules' confidences
                recomputed from their counts under this :math:`u` (what
                :meth:`mine` with it would give them: the path rules kept
                do not depend on :math:`u`). (default: :obj:`None`, as
                they are)
        """
        out = self._subset(torch.ones_like(self.rule_key, dtype=torch.bool),
                           None)
        if unseen is not None:
            if out.support is None or out.groundings is None:
                raise ValueError("other confidences need the rules' counts")
            out.confidence.copy_(rule_confidence(out.support, out.groundings,
                                                 float(unseen)))
        return out

    def pruned(self, min_support: int) -> 'AppliedRules':
        r"""The same rules without those (path and constant rules) that
        answer fewer than :obj:`min_support` queries of the graph they were
        mined on: what :meth:`mine` with this :obj:`min_support` and the
        same counts gives, a smaller rule set (what it costs on validation:
        :func:`~pyg_degreembed.training.scorer.choose_scorer`'s
        :obj:`min_supports`); the overlaps between the rules kept and the
        redundancy stay."""
        check_positive_ints(min_support=min_support)
        if self.support is None:
            raise ValueError("pruning by support needs the rules' counts")
        if bool(self.type_confidence.any()):
            raise ValueError("the answer-type rules' counts are not kept: "
                             'mine without answer_types')
        rules = self.constant_rules
        return self._subset(self.support >= min_support,
                            None if rules is None else
                            rules.support >= min_support)

    def _subset(self, paths: Tensor, constants: Optional[Tensor],
                num_steps: Optional[int] = None) -> 'AppliedRules':
        # These rules with the path rules where `paths` (a mask in the
        # order of rule_key) and the constant rules where `constants` (a
        # mask in their order; None: none, no constant rules), the
        # overlaps between the rules kept renumbered; the longest rule
        # `num_steps` if given.
        payload = self.to_payload()
        for key in ('relation', 'pattern', 'confidence', 'support',
                    'groundings'):
            if payload[key] is not None:
                payload[key] = payload[key][paths]
        if num_steps is not None:
            payload['config'] = {**payload['config'], 'num_steps': num_steps}
        rules = self.constant_rules
        if rules is None or constants is None:
            payload['constant_rules'] = None
            constants = paths.new_zeros(self.num_rules - paths.numel())
        else:
            payload['constant_rules'] = {
                **payload['constant_rules'],
                **{name: getattr(rules, name)[constants]
                   for name in ConstantRules.FIELDS}}
        overlap = self.overlap
        if overlap is not None:
            # Each rule's index among those kept (path rules first).
            kept = torch.cat([paths, constants])
            index = kept.long().cumsum(0) - 1
            both = kept[overlap.pairs].all(dim=0)
            payload['overlap_pairs'] = index[overlap.pairs[:, both]]
            payload['overlap_jaccard'] = overlap.jaccard[both]
        return AppliedRules.from_payload(payload, self.tie_break).to(
            self.rule_key.device)

    @property
    def rule_length(self) -> Tensor:
        r"""The number of edges of each path rule's body, in the order of
        :attr:`rule_key`, shape :obj:`[M]`."""
        pattern = self.rule_key % self._num_patterns
        base = self.num_edge_types + 1
        return torch.stack([pattern >= base**step for step in range(
            self.num_steps)]).sum(dim=0)

    def shortened(self, max_length: int) -> 'AppliedRules':
        r"""The same rules without the path rules longer than
        :obj:`max_length` edges (:math:`L` = :obj:`max_length`: their
        bodies are followed no further); the constant rules, the overlaps
        between the rules kept and the redundancy stay."""
        check_rule_length(max_length)
        if max_length > self.num_steps:
            raise ValueError(f"'max_length' must be at most the rules' "
                             f'length {self.num_steps}, got {max_length}')
        rules = self.constant_rules
        return self._subset(self.rule_length <= max_length,
                            None if rules is None else
                            torch.ones_like(rules.key, dtype=torch.bool),
                            max_length)

    def __getstate__(self):
        # The answer-type cache holds a weak reference (not picklable).
        state = super().__getstate__()
        state['_types'] = (None, None)
        return state

    @property
    def _num_patterns(self) -> int:
        return (self.num_edge_types + 1)**self.num_steps

    def _prefixes(self, rule_key: Tensor) -> Tensor:
        # Every rule's key and those of its pattern's prefixes, sorted: the
        # paths worth expanding for a query (see expand_paths).
        P, base = self._num_patterns, self.num_edge_types + 1
        relation, pattern = rule_key // P, rule_key % P
        out = []
        while pattern.numel():
            out.append(relation * P + pattern)
            pattern = pattern // base
            relation = relation[pattern > 0]
            pattern = pattern[pattern > 0]
        return torch.unique(torch.cat(out)) if out else rule_key.clone()

    @classmethod
    def mine(cls, data: Any, num_steps: int = 2, min_support: int = 2,
             unseen: float = 200., num_keys: int = 3,
             tie_break: Optional[Module] = None,
             counts: Optional['RuleCounts'] = None,
             answer_types: bool = False,
             constants: bool = True,
             constant_counts: Optional[ConstantRuleCounts] = None,
             aggregation: str = 'max-plus', model_weight: float = 0.,
             redundancy: Optional[float] = None) -> 'AppliedRules':
        r"""Every cyclic rule of length at most :obj:`num_steps` that holds
        for at least :obj:`min_support` queries of its relation in the
        observed graph,
        with its confidence (see the module's description).

        Args:
            data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads.
            num_steps (int, optional): The longest rule :math:`L`.
                (default: :obj:`2`)
            min_support (int, optional): Fewest known answers a rule must
                answer. (default: :obj:`2`)
            unseen (float, optional): The :math:`u` of the confidence.
                (default: :obj:`200.0`;
                :func:`~pyg_degreembed.training.scorer.choose_scorer`
                chooses it on validation)
            num_keys (int, optional): See :class:`AppliedRules`.
            tie_break (torch.nn.Module, optional): See
                :class:`AppliedRules`.
            counts (RuleCounts, optional): The counts of
                :func:`rule_counts` for :obj:`data` and :obj:`num_steps`, if
                already computed. (default: :obj:`None`)
            answer_types (bool, optional): Add the answer-type rules (with
                a model as tie-break they did not help on validation, see
                :obj:`benchmarks/applied_rules.py`). (default: :obj:`False`)
            constants (bool, optional): Add the constant rules, which hold
                for the entities of :obj:`data` only (chosen on validation,
                see :obj:`benchmarks/applied_rules.py`; for a new graph use
                :meth:`without_constants`). (default: :obj:`True`)
            constant_counts (ConstantRuleCounts, optional): The counts of
                :func:`~pyg_degreembed.interpret.constant_rules.constant_rule_counts`
                for :obj:`data`, if already computed. (default: :obj:`None`)
            aggregation (str, optional): See :class:`AppliedRules`.
                (default: :obj:`"max-plus"`)
            model_weight (float, optional): See :class:`AppliedRules`.
                (default: :obj:`0.`)
            redundancy (float, optional): See :class:`AppliedRules`; the
                overlaps are measured on :obj:`data`
                (:meth:`measure_overlap`). (default: :obj:`None`)
        """
        check_redundancy(redundancy)
        if counts is None:
            counts = rule_counts(data, num_steps)
        keep = counts.support >= min_support
        confidence = rule_confidence(counts.support[keep],
                                     counts.groundings[keep], unseen)
        type_confidence = None
        if answer_types:
            support, groundings = type_counts(data)
            type_confidence = torch.where(
                support >= min_support,
                rule_confidence(support, groundings, unseen), 0.)
        constant_rules = None
        if constants:
            constant_rules = ConstantRules.mine(data, min_support, unseen,
                                                counts=constant_counts)
        applied = cls(as_kg(data).num_relations, num_steps,
                      counts.relation[keep], counts.pattern[keep],
                      confidence, num_keys, tie_break, type_confidence,
                      counts.support[keep], counts.groundings[keep],
                      constant_rules, aggregation, model_weight)
        if redundancy is not None:
            applied.measure_overlap(data)
            applied.redundancy = float(redundancy)
        return applied

    def config(self) -> dict:
        r"""The constructor arguments other than the tensors and the
        tie-break."""
        config: Dict[str, Any] = dict(
            num_relations=self.num_relations, num_steps=self.num_steps,
            num_keys=self.num_keys)
        if self.aggregation != 'max-plus':  # files of max-plus as before
            config['aggregation'] = self.aggregation
        if self.model_weight:
            config['model_weight'] = self.model_weight
        if self.redundancy is not None:
            config['redundancy'] = self.redundancy
        return config

    def to_payload(self) -> dict:
        r"""The rules as a plain dictionary of numbers and tensors (for a
        checkpoint; :meth:`from_payload` rebuilds them)."""
        P = self._num_patterns
        return {'config': self.config(), 'relation': self.rule_key // P,
                'pattern': self.rule_key % P,
                'confidence': self.confidence,
                'type_confidence': self.type_confidence,
                'support': self.support, 'groundings': self.groundings,
                'constant_rules': None if self.constant_rules is None else
                self.constant_rules.to_dict(),
                'overlap_pairs': self.overlap_pairs,
                'overlap_jaccard': self.overlap_jaccard}

    @classmethod
    def from_payload(cls, payload: dict,
                     tie_break: Optional[Module] = None) -> 'AppliedRules':
        r"""Rebuilds the rules of :meth:`to_payload`."""
        return cls(**payload['config'], relation=payload['relation'],
                   pattern=payload['pattern'],
                   confidence=payload['confidence'],
                   type_confidence=payload['type_confidence'],
                   support=payload.get('support'),
                   groundings=payload.get('groundings'),
                   tie_break=tie_break,
                   constant_rules=ConstantRules.from_dict(
                       payload.get('constant_rules')),
                   overlap=None if payload.get('overlap_pairs') is None else
                   RuleOverlap(payload['overlap_pairs'],
                               payload['overlap_jaccard']))

    def rules(self, relation: int) -> List[Rule]:
        r"""The rules of query relation :obj:`relation` with their
        confidences, best first."""
        P = self._num_patterns
        sel = (self.rule_key // P == relation).nonzero().view(-1)
        out = [Rule(relation, pattern_of(int(key) % P, self.num_edge_types),
                    float(c)) for key, c in zip(self.rule_key[sel],
                                                self.confidence[sel])]
        out.sort(key=lambda rule: (-rule.confidence, rule.body))
        return out

    def constant_rules_of(self, relation: int) -> List[ConstantRule]:
        r"""The constant rules of query relation :obj:`relation` with
        their confidences, best first."""
        if self.constant_rules is None:
            return []
        return self.constant_rules.rules(relation)

    def type_rules(self, relation: int) -> List['AnswerTypeRule']:
        r"""The answer-type rules of query relation :obj:`relation` with
        their confidences, best first."""
        conf = self.type_confidence[relation]
        out = [AnswerTypeRule(relation, s, float(conf[s]))
               for s in conf.nonzero().view(-1).tolist()]
        out.sort(key=lambda rule: (-rule.confidence, rule.edge_type))
        return out

    @torch.no_grad()
    def explain(self, graph: Any, head: int, relation: int, tail: int
                ) -> Tuple[List[Union[Rule, ConstantRule]],
                           Optional['AnswerTypeRule']]:
        r"""Why :obj:`tail` answers :obj:`(head, relation, ?)`: the path
        rules whose body joins :obj:`head` to :obj:`tail` in :obj:`graph`
        (any graph input of :meth:`forward`) and the constant rules that
        predict :obj:`tail` for :obj:`head`, best first (the first
        :obj:`num_keys` are its keys), and the best answer-type rule that
        :obj:`tail` satisfies (:obj:`None` if none)."""
        graph = resolve_graph(graph, num_relations=self.num_relations,
                              device=self.rule_key.device)
        found_rules = [rule for rule, _ in
                       self._reaching(graph, head, relation, tail)]
        types = graph.pair_type[graph.pair_src == tail].tolist()
        candidates = [rule for rule in self.type_rules(relation)
                      if rule.edge_type in types]
        return found_rules, (candidates[0] if candidates else None)

    def _reaching(self, graph: TypedGraph, head: int, relation: int,
                  tail: int) -> List[Tuple[Union[Rule, ConstantRule], int]]:
        # The rules of explain() that reach `tail`, best first, each with its
        # index (path rules in the order of rule_key, then the constant
        # rules: the ids of _rule_groups' tables).
        P, M = self._num_patterns, self.rule_key.numel()
        found: List[Tuple[Union[Rule, ConstantRule], int]] = []
        if head != tail:
            for _, node, pattern, _ in expand_paths(
                    graph, torch.tensor([head], device=graph.device),
                    self.num_steps):
                pattern = pattern[node == tail]
                at, hit = find_sorted(self.rule_key, relation * P + pattern)
                found += [
                    (Rule(relation, pattern_of(int(p), self.num_edge_types),
                          float(self.confidence[i])), int(i))
                    for p, i in zip(pattern[hit], at[hit])]
        if self.constant_rules is not None:
            query = torch.tensor([head], device=graph.device)
            rules = self.constant_rules
            _, node, _, rule = rules.fire(
                graph, query, torch.tensor([relation], device=graph.device),
                with_rule=True)
            found += [(rules.rule(int(i)), M + int(i))
                      for i in rule[node == tail]]
        # Best first; equal confidences: path rules by body, then the
        # constant rules in their order.
        found.sort(key=lambda item: (-item[0].confidence,
                                     getattr(item[0], 'body', ())))
        return found

    def rule_keys(self, graph: TypedGraph, head: Tensor, relation: Tensor,
                  remove_tail: Optional[Tensor] = None) -> Tensor:
        r"""The confidences of the :obj:`num_keys` best rules that reach
        each entity, best first (0 where fewer rules reach it); the head
        itself is never reached (object identity).

        :rtype: :class:`torch.Tensor` of shape :obj:`[B, N, num_keys]`
        """
        B, N = head.numel(), graph.num_nodes
        best = self._fired(graph, head, relation, remove_tail,
                           self.num_keys)
        out = best.values.new_zeros(B * N, self.num_keys)
        out[best.cells] = best.values[best.levels]
        return out.view(B, N, self.num_keys)

    def _groups(self, graph: TypedGraph, head: Tensor,
                targets: Optional[Tensor] = None
                ) -> Tuple[List[Tuple[int, int]], Optional[Tensor]]:
        # The queries scored at once: consecutive ranges whose heads' walks
        # (with targets, the walks of the paths met in the middle) add up
        # to at most GROUP_WALKS (a hub's head alone). A hub's query fires
        # most rules on most entities (on a 1M-triple KG, 64 queries at
        # once took more than 24 GB); the firings of one group are reduced
        # to their cells' best keys before the next. With targets, also
        # each query's forward depth (see target_paths; None without).
        if targets is None:
            return walk_chunks(graph, head, self.num_steps, head.numel(),
                               max_walks=GROUP_WALKS, max_total=None), None
        walks, depth = forward_depths(graph, head,
                                      targets.reshape(-1).nonzero().view(-1),
                                      self.num_steps)
        return cost_ranges(walks, head.numel(), GROUP_WALKS), depth

    def _fired(self, graph, head, relation, remove_tail, num_columns,
               targets=None, depth=None):
        # The cells b * N + y that some rule reaches (of the targets), sorted,
        # their keys as confidence levels (num_columns of them), and the
        # confidence of each level (see _best_keys).
        path, constant = self._firings(graph, head, relation, remove_tail,
                                       targets, depth)
        tables, firings = [self.confidence], [path]
        if constant is not None:
            tables.append(self.constant_rules.confidence)
            firings.append(constant)
        return _best_keys(firings, tables, self.num_keys, num_columns,
                          self._rule_groups(self.redundancy))

    def _firings(self, graph, head, relation, remove_tail, targets=None,
                 depth=None):
        # Every rule that reaches an entity y for query b: the cells
        # b * N + y and the rules' indices, of the path rules, then of the
        # constant rules (None without them); with `targets`, those of the
        # target cells only (paths met in the middle, see target_paths,
        # at the forward depths `depth` if given, as _groups found them).
        N, P, L = graph.num_nodes, self._num_patterns, self.num_steps
        M = max(self.rule_key.numel(), 1)
        removed = None
        if remove_tail is not None:
            removed = graph.edge_range(*query_edges(
                head, relation, remove_tail, self.num_relations)[:3])
        # The target cells b * N + y, sorted.
        target = None if targets is None else \
            targets.reshape(-1).nonzero().view(-1)
        cell, rule = [head.new_empty(0)], [head.new_empty(0)]
        # The firings gathered; whether some state was reached in several
        # parts or paths (its firings then counted once at the end, and
        # checked against the memory as they are gathered: the parts'
        # expansions are bounded, what they reach is not).
        gathered, parted = [0], [target is not None]

        def reached(walk, node, pattern):
            # The firings of the rules whose pattern the paths complete.
            if targets is not None:  # the paths to targets (a lookup)
                keep = targets[walk, node]
                walk, node, pattern = walk[keep], node[keep], pattern[keep]
            at, found = find_sorted(self.rule_key,
                                    relation[walk] * P + pattern)
            found &= node != head[walk]  # never the head itself
            cell.append((walk * N + node)[found])
            rule.append(at[found])
            gathered[0] += cell[-1].numel()
            if parted[0]:
                check_memory(FIRING_BYTES * gathered[0],
                             f"The rules' {gathered[0]:,} firings on "
                             f'{head.numel()} queries')

        if target is not None:
            # The paths met in the middle (see target_paths): the cost
            # follows the targets' paths, not every entity a hub reaches.
            if depth is None:
                depth = forward_depths(graph, head, target, L)[1]
            for found in paths_to_targets(
                    graph, head, target, depth, L,
                    (relation, self.rule_prefix),
                    (relation, self.rule_suffix), self.rule_key):
                reached(*found)
        else:
            # The walk count sizes the chunks only, it does not refuse: the
            # expansion follows the rules' prefixes and merges equal states
            # (on a hub-heavy 1M-triple KG, 64 queries are 3.3e11 walks and
            # 32 of them ranked in 18 s); each step's memory is checked, and
            # states with more out-edges than MAX_WALKS are expanded in
            # parts (a hub's paths of two edges at 10M needed 6.2 GB at
            # once).
            for begin, end in walk_chunks(graph, head, L, head.numel(),
                                          max_total=None):
                part = None if removed is None else \
                    (removed[0][begin:end], removed[1][begin:end])
                for step, walk, node, pattern, whole in \
                        expand_paths_in_parts(
                            graph, head[begin:end], L, L, part,
                            (relation[begin:end], self.rule_prefix)):
                    parted[0] |= not whole
                    reached(walk + begin, node, pattern)
        if parted[0]:  # each firing once
            firing = torch.unique(torch.cat(cell) * M + torch.cat(rule))
            cell, rule = [firing // M], [firing % M]
        constant = None
        if self.constant_rules is not None:
            query, node, _, fired = self.constant_rules.fire(
                graph, head, relation, removed, with_rule=True)
            constant = (query * N + node, fired)
            if target is not None:
                keep = find_sorted(target, constant[0])[1]
                constant = (constant[0][keep], constant[1][keep])
        return (torch.cat(cell), torch.cat(rule)), constant

    @torch.no_grad()
    def forward(self, edge_index: Any, edge_type: Optional[Tensor] = None,
                head: Optional[Tensor] = None,
                relation: Optional[Tensor] = None, *,
                num_nodes: Optional[int] = None,
                remove_tail: Optional[Tensor] = None,
                targets: Optional[Tensor] = None) -> Tensor:
        r"""Scores every entity as the answer of :obj:`(head, relation,
        ?)`, called like :meth:`RuleReasoner.forward`: higher is better,
        equal keys give equal scores.

        With :obj:`targets`, a boolean mask :obj:`[B, N]`, only the target
        entities of each query are scored (what sampled-candidate
        evaluation ranks), in the same order as without it; the others
        score :math:`-\infty`.  The rules' paths are then met in the
        middle: :math:`a` edges out of the head, the rest read backwards
        from the targets, :math:`a` chosen per query for the fewest walks
        (:mod:`~pyg_degreembed.interpret.target_paths`), so that a hub's
        query costs the targets' paths rather than every entity the rules
        reach (not with :obj:`remove_tail`).

        :rtype: :class:`torch.Tensor` of shape :obj:`[B, N]`
        """
        if not isinstance(edge_index, Tensor):  # (graph, head, relation)
            head, relation, edge_type = edge_type, head, None
        graph = resolve_graph(edge_index, edge_type, num_nodes,
                              num_relations=self.num_relations,
                              device=self.rule_key.device)
        head = index_tensor(head, 'head').to(graph.device)
        relation = index_tensor(relation, 'relation').to(graph.device)
        targets = _check_targets(targets, head.numel(), graph, remove_tail)
        if self.model_weight:
            self._weighted_model()  # refused before any work without one
        return torch.cat([self._forward_group(graph, part) for part in
                          self._group_parts(graph, head, relation,
                                            remove_tail, targets)])

    def _group_parts(self, graph, head, relation, remove_tail, targets):
        # Per group of _groups: its queries' head, relation, remove_tail,
        # targets and forward depths (None where not given).
        groups, depth = self._groups(graph, head, targets)
        for a, b in groups if len(groups) > 1 else [(0, head.numel())]:
            yield tuple(None if x is None else x[a:b] for x in
                        (head, relation, remove_tail, targets, depth))

    def _forward_group(self, graph, part) -> Tensor:
        # forward's scores of one group of queries (a part of _group_parts).
        head, relation, remove_tail, targets, depth = part
        B, N = head.numel(), graph.num_nodes
        best = self._fired(graph, head, relation, remove_tail,
                           self.num_keys if self.aggregation == 'max-plus'
                           else min(self.num_keys, TIE_KEYS), targets, depth)
        tail, tie = self._later_keys(graph, head, relation, remove_tail)
        keys, bound, noisy = self._ranking_keys(best, self.num_keys)
        score = self._score(keys, bound, best.cells, tail, N)
        if self.model_weight:
            assert tie is not None and noisy is not None  # checked above
            score = _combined(score, best.cells, noisy, self.model_weight *
                              _model_probability(tie.view(B, N)).view(-1), N)
        return _outside_targets(score.view(B, N), targets)

    @torch.no_grad()
    def evidence(self, graph: Any, head: int, relation: int, tail: int
                 ) -> 'Evidence':
        r"""The parts of the noisy-or score of :obj:`tail` for
        :obj:`(head, relation, ?)`: its :obj:`num_keys` best rules (of
        :meth:`explain`, with a :obj:`redundancy` the best of each cluster)
        and, with a :obj:`model_weight`, the model; the
        score :meth:`forward` gives it (to the :math:`10^{-9}` of its
        ranking keys) is their :attr:`Evidence.score`."""
        if self.aggregation != 'noisy-or':
            raise ValueError('max-plus ranks by the best rules, not by '
                             'adding their evidence: see explain()')
        graph = resolve_graph(graph, num_relations=self.num_relations,
                              device=self.rule_key.device)
        cluster = None if self.redundancy is None else \
            self.clusters(self.redundancy)
        counted = set()
        parts: List[Tuple[Union[Rule, ConstantRule, str], float]] = []
        for rule, index in self._reaching(graph, head, relation, tail):
            key = index if cluster is None else int(cluster[index])
            if key not in counted and len(parts) < self.num_keys:
                counted.add(key)  # a cluster counts by its best rule
                parts.append((rule, rule.confidence))
        if self.model_weight:
            query = torch.tensor([head], device=graph.device), \
                torch.tensor([relation], device=graph.device)
            score = self._weighted_model()(graph, *query).double()
            parts.append(('model', float(
                self.model_weight * _model_probability(score)[0, tail])))
        return Evidence(head, relation, tail, parts)

    def _weighted_model(self) -> Module:
        # The tie-break model, whose evidence a model_weight adds.
        if self.tie_break is None:
            raise ValueError("a 'model_weight' needs the model: give a "
                             "'tie_break'")
        return self.tie_break

    @torch.no_grad()
    def score_with_unseen(self, graph: TypedGraph, head: Tensor,
                          relation: Tensor, unseen: Sequence[float],
                          remove_tail: Optional[Tensor] = None,
                          aggregations: Optional[
                              Sequence[Tuple[Any, ...]]] = None,
                          targets: Optional[Tensor] = None,
                          max_lengths: Optional[Sequence[int]] = None,
                          constants: Sequence[bool] = (True, )
                          ) -> Tensor:
        r"""The scores of :meth:`forward` under the confidences of several
        :math:`u` at once, and the tie-break's own scores: what
        :obj:`AppliedRules.mine(..., unseen=u)` with the same counts would
        score, for each :math:`u` of :obj:`unseen` (and, with
        :obj:`max_lengths`, what its :meth:`shortened` rules would score,
        and without :obj:`constants`, what its :meth:`without_constants`
        rules would), with the rules' bodies followed and the tie-break run
        once.

        The path rules' confidences are recomputed from their counts
        (:obj:`support`, :obj:`groundings`); the constant rules' too, those
        below :data:`~pyg_degreembed.interpret.constant_rules.MIN_CONFIDENCE`
        left out, so that each :math:`u` must be at least the one these
        rules were mined with (they hold the rules that :math:`u` keeps).

        Args:
            graph (TypedGraph): The observed graph.
            head (torch.Tensor): Head entities, shape :obj:`[B]`.
            relation (torch.Tensor): Query relations, shape :obj:`[B]`.
            unseen (Sequence[float]): The values of :math:`u`.
            remove_tail (torch.Tensor, optional): As in :meth:`forward`.
            aggregations (Sequence[Aggregation], optional): The
                aggregations to score with, each with its number of keys
                (:obj:`num_keys`) and model weight (:obj:`0.` if left
                out), under every :math:`u`. (default: this one's)
            targets (torch.Tensor, optional): As in :meth:`forward`: only
                these entities scored (the tie-break's scores too).
                (default: :obj:`None`, every entity)
            max_lengths (Sequence[int], optional): The longest path rules
                that score, each a ranking (:math:`V` of them).
                (default: :obj:`None`, :math:`V = 1`: every rule)
            constants (Sequence[bool], optional): Whether the constant
                rules score, each a ranking (:math:`C` of them; the choice
                of a model for new graphs ranks without them).
                (default: :obj:`(True, )`)

        :rtype: :class:`torch.Tensor` of shape :obj:`[S C V A + 1, B, N]`
            (:math:`S` values of :math:`u` in order, under each the
            :math:`C` of :obj:`constants`, under each the :math:`V`
            longest lengths, under each the :math:`A` aggregations; the
            tie-break's scores last)
        """
        choices = [Aggregation(*a) for a in (
            [(self.aggregation, self.num_keys, self.model_weight)]
            if aggregations is None else aggregations)]
        if not choices:
            raise ValueError("'aggregations' must hold at least one")
        for aggregation, keys, weight, redundancy in choices:
            check_aggregation(aggregation, weight, redundancy)
            check_positive_ints(num_keys=keys)
        most = max(a.num_keys for a in choices)
        columns = min(most, max([TIE_KEYS] + [
            a.num_keys for a in choices if a.name == 'max-plus']))
        if self.support is None or self.groundings is None or \
                self.tie_break is None:
            raise ValueError('scoring under other confidences needs the '
                             "rules' counts and a tie-break model")
        if bool(self.type_confidence.any()):
            raise ValueError("the answer-type rules' counts are not kept: "
                             'mine without answer_types')
        lengths = [self.num_steps] if max_lengths is None else \
            [int(length) for length in max_lengths]
        if not lengths or not all(1 <= length <= self.num_steps
                                  for length in lengths):
            raise ValueError(f"'max_lengths' must be rule lengths in [1, "
                             f'{self.num_steps}], got {max_lengths}')
        constants = [bool(c) for c in constants]
        if not constants:
            raise ValueError("'constants' must hold at least one value")
        targets = _check_targets(targets, head.numel(), graph, remove_tail)
        scored = [(length, a) for length in lengths for a in choices]
        return torch.cat([
            self._unseen_group(graph, part, unseen, scored, most, columns,
                               constants)
            for part in self._group_parts(graph, head, relation,
                                          remove_tail, targets)], dim=1)

    def _unseen_group(self, graph, part, unseen, choices, most,
                      columns, with_constants) -> Tensor:
        # score_with_unseen's scores of one group of queries (a part of
        # _group_parts); `choices`: (longest rule length, aggregation);
        # `with_constants`: whether the constant rules score, each.
        head, relation, remove_tail, targets, depth = part
        constants = self.constant_rules
        B, N = head.numel(), graph.num_nodes
        path, constant = self._firings(graph, head, relation, remove_tail,
                                       targets, depth)
        tail, tie = self._later_keys(graph, head, relation, remove_tail)
        # The counts and the tie-break are checked by score_with_unseen.
        assert tie is not None and self.support is not None \
            and self.groundings is not None
        # The model's evidence, where some aggregation weighs it.
        model = _model_probability(tie.view(B, N)).view(-1) \
            if any(a.model_weight for _, a in choices) else None
        # The path rules' firings of each longest length (their lengths
        # looked up only where some are cut).
        paths = {self.num_steps: path}
        cuts = {m for m, _ in choices if m < self.num_steps}
        if cuts:
            length = self.rule_length[path[1]]
            paths.update({m: (path[0][length <= m], path[1][length <= m])
                          for m in cuts})
        out: List[Tensor] = []
        for u in unseen:
            tables = [rule_confidence(self.support, self.groundings, u)]
            firings = [path]
            if constant is not None and constants is not None:
                value = rule_confidence(constants.support,
                                        constants.groundings, u)
                if bool((value > constants.confidence).any()):
                    raise ValueError(
                        f'u = {u:g} is below the u these rules were mined '
                        f'with: their constant rules lack some it keeps')
                kept = value[constant[1]] >= MIN_CONFIDENCE
                tables.append(value)
                firings.append((constant[0][kept], constant[1][kept]))
            bests = self._unseen_bests(paths, firings, tables, choices,
                                       with_constants, most, columns)
            for with_constant in with_constants:
                scores: List[Tensor] = [tail] * len(choices)
                for m, redundancy in dict.fromkeys(
                        (m, a.redundancy) for m, a in choices):
                    best = bests[with_constant, m, redundancy]
                    for i, (n, (a, keys, weight, clusters)) in enumerate(
                            choices):
                        if (n, clusters) != (m, redundancy):
                            continue
                        ranking, bound, noisy = self._ranking_keys(best, keys,
                                                                   a)
                        score = self._score(ranking, bound, best.cells, tail,
                                            N)
                        scores[i] = score if noisy is None or \
                            model is None or not weight else \
                            _combined(score, best.cells, noisy,
                                      weight * model, N)
                out += scores
        out.append(tie.view(-1))
        return _outside_targets(torch.stack(out).view(-1, B, N), targets)

    def _unseen_bests(self, paths, firings, tables, choices, with_constants,
                      most, columns) -> Dict[Tuple[bool, int, Any],
                                             '_BestKeys']:
        # The best `most` rules of each cell (_best_keys) for each use of
        # the constant rules and (longest length, redundancy) of `choices`.
        # Without clusters, those with the constant rules are found from
        # the best path rules of each cell and the constant rules' firings
        # (the best `most` of a union are among the best `most` of each
        # part), so that the path firings are sorted once.
        bests: Dict[Tuple[bool, int, Any], _BestKeys] = {}
        for with_constant in sorted(with_constants):  # paths only first
            used = len(tables) if with_constant else 1
            for m, redundancy in dict.fromkeys(
                    (m, a.redundancy) for m, a in choices):
                groups = self._rule_groups(redundancy, m, with_constant)
                part = bests.get((False, m, redundancy))
                if used > 1 and groups is None and part is not None:
                    bests[True, m, redundancy] = _best_keys(
                        [part.firings()] + firings[1:],
                        [part.values] + tables[1:], most, columns)
                else:
                    bests[with_constant, m, redundancy] = _best_keys(
                        [paths[m]] + firings[1:used], tables[:used], most,
                        columns, groups)
        return bests

    def _later_keys(self, graph, head, relation, remove_tail):
        # The later keys: the answer-type rank (an integer), then the
        # tie-break's score scaled into [0, 1), so that their sum orders
        # the entities that no path rule reaches; and the tie-break's score
        # itself (None without one).
        tail = self._answer_types(graph)[relation].double().view(-1)
        tie = None
        if self.tie_break is not None:
            tie = (self.tie_break(graph, head, relation)
                   if remove_tail is None else
                   self.tie_break(graph, head, relation,
                                  remove_tail=remove_tail)).double()
            tail = tail + tie.view(-1) / (float(tie.abs().max()) + 1.)
        return tail, tie

    def _ranking_keys(self, best: '_BestKeys', num_keys: int,
                      aggregation: Optional[str] = None
                      ) -> Tuple[Tensor, int, Optional[Tensor]]:
        # The keys a reached cell is ranked by, as non-negative integers
        # below the returned bound: the levels of its num_keys best rules
        # (max-plus); with aggregation="noisy-or" (this one's aggregation by
        # default), the dense rank of their noisy-or, then the first
        # TIE_KEYS of those levels; and the noisy-or (None with max-plus).
        V = best.values.numel()
        if (aggregation or self.aggregation) == 'max-plus':
            return best.levels[:, :num_keys], V, None
        noisy = best.noisy_or(num_keys)
        # Rounded: equal products of other factors (207/209 * 208/210 and
        # 207/210 * 208/209) differ in the last bits; they tie.
        distinct, rank = torch.unique(noisy.round(decimals=12),
                                      return_inverse=True)
        ties = best.levels[:, :min(num_keys, TIE_KEYS)]
        return torch.cat([rank.view(-1, 1), ties], dim=1), \
            max(V, distinct.numel()), noisy

    @staticmethod
    def _score(levels, num_levels, cell, tail, N):
        # Scores [B * N]: the later keys where no rule reaches; the cells
        # that rules reach come above, in the lexicographic order of
        # (query, rule keys, later keys): their dense rank is monotone
        # within each query.
        score = tail.clone()
        if cell.numel():
            rank = _dense_rank(_pack_rows(
                torch.cat([(cell // N).unsqueeze(-1), levels], dim=-1),
                num_levels), tail[cell])
            score[cell] = float(tail.max()) + 1. + rank.double()
        return score

    def _answer_types(self, graph: TypedGraph) -> Tensor:
        # [2R, N]: for query relation q and entity y, the dense rank
        # (1 = the lowest positive confidence of q) of the best answer-type
        # rule of q that y satisfies in `graph`, 0 if none; kept for the
        # last graph (the prepared graphs are cached, so it is often the
        # same object).
        last, table = self._types
        if last is not None and last() is graph and table is not None:
            return table
        K, N = self.num_edge_types, graph.num_nodes
        conf = self.type_confidence.to(graph.device)
        if not bool(conf.any()):  # no answer-type rules (the default)
            table = torch.zeros(K, N, dtype=torch.long, device=graph.device)
            self._types = (weakref.ref(graph), table)
            return table
        level = torch.zeros_like(conf, dtype=torch.long)
        for q in range(K):
            values, index = torch.unique(conf[q], return_inverse=True)
            level[q] = index + int(values[0] > 0)
        has = torch.zeros(N, K, dtype=torch.long, device=graph.device)
        has[graph.pair_src, graph.pair_type] = 1
        table = torch.cat([
            (has.unsqueeze(0) * level[q:q + 8].unsqueeze(1)).amax(-1)
            for q in range(0, K, 8)]) if N else level.new_zeros(K, 0)
        self._types = (weakref.ref(graph), table)
        return table


@dataclass(frozen=True)
class AnswerTypeRule:
    r"""The answer-type rule :math:`q(X, Y) \Leftarrow s(Y, \_)` (the
    answer has an edge of type :math:`s`).

    Attributes:
        head (int): The query relation :math:`q` in :math:`[0, 2R)`.
        edge_type (int): The edge type :math:`s` in :math:`[0, 2R)`.
        confidence (float): Its confidence.
    """
    head: int
    edge_type: int
    confidence: float

    def format(self, relation_names: Sequence[str]) -> str:
        r"""The rule as text, e.g. :obj:`brother(X,Y) <= son(Y,_)  0.02`
        (an inverse type :obj:`inv_r` is written :obj:`r(_,Y)`)."""
        return (f"{format_atom(self.head, 'X', 'Y', relation_names)} <= "
                f"{format_atom(self.edge_type, 'Y', '_', relation_names)}  "
                f"{self.confidence:.3g}")


class RuleCounts(NamedTuple):
    r"""Per rule (query relation, pattern): the graph's queries its body
    answers (:obj:`support`) and the pairs its body joins
    (:obj:`groundings`), see :func:`rule_counts`."""
    relation: Tensor
    pattern: Tensor
    support: Tensor
    groundings: Tensor


@torch.no_grad()
def rule_counts(data: Any, num_steps: int = 2,
                chunk_size: int = 256) -> RuleCounts:
    r"""Support and groundings of every cyclic rule of length at most
    :obj:`num_steps` that answers at least one query of the observed graph
    (:func:`~pyg_degreembed.data.kg.graph_queries`; see the module's
    description).  A body grounding
    :math:`(x, y)` needs :math:`x \neq y` (object identity, as AnyBURL);
    a pair that is a known answer of :math:`q` counts only if the body
    joins it without that query's own edge (as for the support).

    Args:
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads.
        num_steps (int, optional): The longest rule :math:`L`.
            (default: :obj:`2`)
        chunk_size (int, optional): Start entities expanded at once.
            (default: :obj:`256`)
    """
    kg = as_kg(data)
    R = kg.num_relations
    check_rule_length(num_steps)
    check_positive_ints(chunk_size=chunk_size)
    P = (2 * R + 1)**num_steps
    graph = resolve_graph(data, num_relations=R)
    queries = graph_queries(kg)
    found = query_paths(graph, queries, num_steps, R, chunk_size)
    rule_of = queries[1, found.query] * P + found.pattern
    # Every body grounding (x, y) of every rule, minus the known answers
    # it reaches with their own edge, plus those it reaches without (the
    # support).
    rule, support = torch.unique(rule_of[found.avoiding > 0],
                                 return_counts=True)
    reached = torch.zeros_like(rule)
    _count_into(reached, rule, rule_of)
    pairs = found.body_pairs[torch.searchsorted(found.body, rule % P)]
    groundings = pairs - reached + support
    return RuleCounts(rule // P, rule % P, support, groundings)


def check_mining(data: Any, num_steps: int, chunk_size: int = 256):
    r"""Refuses, before any work, a rule length whose mining
    (:func:`rule_counts`) would not fit: pattern ids beyond 64 bits, or
    more walks than :data:`~pyg_degreembed.interpret.paths.MAX_TOTAL_WALKS`."""
    kg = as_kg(data)
    R, N = kg.num_relations, kg.num_nodes
    check_rule_length(num_steps)
    check_positive_ints(chunk_size=chunk_size)
    check_pattern_keys(2 * R, num_steps, max(2 * R, chunk_size * N))
    walk_chunks(resolve_graph(data, num_relations=R), torch.arange(N),
                num_steps, chunk_size)


@torch.no_grad()
def type_counts(data: Any, chunk_size: int = 4096) -> Tuple[Tensor, Tensor]:
    r"""Support and groundings of every answer-type rule :math:`q(X, Y)
    \Leftarrow s(Y, \_)` (see the module's description) on the observed
    graph and its queries.

    :rtype: (support, groundings), each of shape :obj:`[2R, 2R]` (row
        :math:`q`, column :math:`s`)
    """
    kg = as_kg(data)
    R, N = kg.num_relations, kg.num_nodes
    K = 2 * R
    graph = resolve_graph(data, num_relations=R)
    queries = graph_queries(kg)
    # Edges of each type out of each entity.
    count = torch.zeros(N, K, dtype=torch.long)
    count[graph.pair_src, graph.pair_type] = graph.pair_count
    support = torch.zeros(K, K, dtype=torch.long)
    for begin in range(0, queries.size(1), chunk_size):
        x, q, y = queries[:, begin:begin + chunk_size]
        edges = count[y]
        # Without the query's own edge: y -> x of the inverse type.
        inverse = (q + R) % K
        lo, hi = graph.edge_range(y, inverse, x)
        rows = torch.arange(y.numel())
        edges[rows, inverse] -= hi - lo
        support.index_add_(0, q, (edges > 0).long())
    heads = torch.bincount(torch.unique(queries[1] * N + queries[0]) // N,
                           minlength=K)
    groundings = heads.view(-1, 1) * (count > 0).sum(0).view(1, -1)
    return support, groundings


class _BestKeys(NamedTuple):
    r"""The rules that reach each cell, best first (see
    :func:`_best_keys`)."""
    #: The distinct cells that rules reach, sorted, shape :obj:`[C]`.
    cells: Tensor
    #: Per cell, the levels of its first rules, shape :obj:`[C, columns]`.
    levels: Tensor
    #: The confidence of each level, shape :obj:`[V]`.
    values: Tensor
    #: Per cell, how many rules reach it (at most :obj:`num_keys`),
    #: shape :obj:`[C]`.
    counts: Tensor
    #: The level and the place in its cell of each of those, in cell order,
    #: best first within a cell, shapes :obj:`[F]`.
    level: Tensor
    position: Tensor

    def firings(self) -> Tuple[Tensor, Tensor]:
        r"""The cell and level of each rule kept, as firings of the table
        :obj:`values` (for :func:`_best_keys`)."""
        return self.cells.repeat_interleave(self.counts), self.level

    def noisy_or(self, num_keys: int) -> Tensor:
        r"""Per cell, :math:`1 - \prod (1 - \mathrm{conf})` of its
        :obj:`num_keys` best rules (summed in a fixed order: equal rules,
        equal values), shape :obj:`[C]`."""
        if not self.counts.numel():  # segment_reduce refuses no segments
            return self.values.new_zeros(0)
        take = self.position < num_keys
        logs = torch.log1p(-self.values[self.level[take]])
        return -torch.expm1(torch.segment_reduce(
            logs, 'sum', lengths=self.counts.clamp(max=num_keys)))


def _check_targets(targets: Optional[Tensor], B: int, graph: TypedGraph,
                   remove_tail: Optional[Tensor]) -> Optional[Tensor]:
    # The target mask of AppliedRules.forward, checked.
    if targets is None:
        return None
    if remove_tail is not None:
        raise ValueError("'targets' and 'remove_tail' do not go together: "
                         'the paths read backwards from the targets do '
                         'not leave the query\'s own edge out')
    if targets.dtype != torch.bool or \
            tuple(targets.shape) != (B, graph.num_nodes):
        raise ValueError(f"'targets' must be a boolean mask of shape "
                         f'[{B}, {graph.num_nodes}], got '
                         f'{targets.dtype} {list(targets.shape)}')
    return targets.to(graph.device)


def _outside_targets(score: Tensor, targets: Optional[Tensor]) -> Tensor:
    # The scores [..., B, N] with -inf outside the targets (if any).
    return score if targets is None else \
        score.masked_fill(~targets, float('-inf'))


def _best_keys(firings: List[Tuple[Tensor, Tensor]], tables: List[Tensor],
               num_keys: int, num_columns: int,
               groups: Optional[List[Tensor]] = None) -> _BestKeys:
    r"""The distinct cells (sorted) that rules reach and, per cell, the
    confidences of its :obj:`num_keys` best rules (with :obj:`groups`, the
    best rule of each group), best first, as levels:
    the confidences of the firings, 0 included, sorted and numbered from 0, so
    that a cell reached by fewer rules has level 0 (confidence 0) in the
    rest; the first :obj:`num_columns` as a matrix.  The firings are sorted
    once, by the integer :math:`\mathrm{cell} \cdot V + (V - 1 -
    \mathrm{level})` of :math:`V` levels.

    Args:
        firings (List[Tuple[torch.Tensor, torch.Tensor]]): Per table, the
            cell each rule firing reaches and the rule's row in the table,
            shapes :obj:`[F_i]`.
        tables (List[torch.Tensor]): Per table, the rules' confidences
            (:math:`\geq 0`).
        num_keys (int): Rules kept per cell.
        num_columns (int): The columns of :attr:`_BestKeys.levels`
            (:math:`\leq` :obj:`num_keys`).
        groups (List[torch.Tensor], optional): Per table, the group of
            each rule (ids distinct between tables): a group counts once
            per cell, by its best rule. (default: :obj:`None`, each rule)
    """
    # The levels of the confidences that fire (not of every rule in the
    # tables: a batch of queries fires few of millions of rules).
    confidence = torch.cat([tables[0].new_zeros(1)] + [
        table[rule] for (_, rule), table in zip(firings, tables)])
    values, inverse = torch.unique(confidence, return_inverse=True)
    V = values.numel()
    level = inverse[1:]
    cell = torch.cat([c for c, _ in firings])
    if groups is not None and cell.numel():
        # One firing per (cell, group): the group's best level.
        group = torch.cat([table_group[rule] for (_, rule), table_group
                           in zip(firings, groups)])
        G = int(group.max()) + 1
        pair, inverse = torch.unique(cell * G + group, return_inverse=True)
        level = level.new_zeros(pair.numel()).scatter_reduce_(
            0, inverse, level, 'amax', include_self=False)
        cell = pair // G
    # Ascending cells; within a cell, descending confidence.
    key = torch.sort(cell * V + (V - 1 - level)).values
    cell = key // V
    level = (V - 1) - (key - cell * V)
    cells, index, counts = torch.unique_consecutive(
        cell, return_inverse=True, return_counts=True)
    # Each firing's place among its cell's, from the cell's first firing.
    position = torch.arange(cell.numel(), device=cell.device) - \
        (counts.cumsum(0) - counts)[index]
    keep = position < num_keys
    index, position, level = index[keep], position[keep], level[keep]
    columns = position < num_columns
    levels = level.new_zeros(cells.numel(), num_columns)
    levels[index[columns], position[columns]] = level[columns]
    return _BestKeys(cells, levels, values, counts.clamp(max=num_keys),
                     level, position)


def _model_probability(score: Tensor) -> Tensor:
    r"""The model's scores :obj:`[B, N]` as :math:`\max(s, 0) / \max_{y'}
    s` (0 in a row without a positive score), its evidence before the
    weight :math:`\alpha`."""
    score = score.clamp(min=0.)
    best = score.amax(dim=1, keepdim=True) if score.size(1) else score
    return score / best.clamp(min=torch.finfo(score.dtype).tiny)


def _combined(order: Tensor, cell: Tensor, noisy: Tensor, model: Tensor,
              N: int) -> Tensor:
    r"""The scores :obj:`[B * N]` of rules and model combined (see the
    module's description) from the rules' scores :obj:`order`, which break
    its ties, the reached cells with the noisy-or of their rules and the
    model's evidence :obj:`model` (:func:`_model_probability`,
    :obj:`[B * N]`)."""
    combined = model.clone()
    if cell.numel():
        combined[cell] = noisy + model[cell] * (1. - noisy)
    if not order.numel():
        return combined
    order = order.view(-1, N)  # each query's order, scaled into [0, 1)
    low = order.amin(dim=1, keepdim=True)
    scale = KEY_WEIGHT / (order.amax(dim=1, keepdim=True) - low + 1.)
    return combined.add_(((order - low) * scale).view(-1))


@dataclass(frozen=True)
class Evidence:
    r"""The parts of an answer's noisy-or score
    (:meth:`AppliedRules.evidence`): each a rule (or :obj:`"model"`) with
    its probability :math:`p`.  The score is
    :math:`1 - \prod (1 - p)`; in evidence :math:`-\log(1 - p)` the parts
    add up to the score's, :math:`-\log(1 - \mathrm{score})`."""
    head: int
    relation: int
    tail: int
    parts: List[Tuple[Union[Rule, ConstantRule, str], float]]

    @property
    def score(self) -> float:
        return 1. - math.prod(1. - p for _, p in self.parts)

    @property
    def weights(self) -> List[float]:
        r"""The evidence :math:`-\log(1 - p)` of each part."""
        return [-math.log1p(-p) for _, p in self.parts]


def _pack_rows(rows: Tensor, base: int) -> Tensor:
    r"""Rows of non-negative integers, their last columns below
    :obj:`base`, as one integer each in the same lexicographic order where
    that fits in 63 bits (else the rows themselves)."""
    largest = int(rows[:, 0].max()) + 1
    if largest * base ** (rows.size(1) - 1) >= 2 ** 63:
        return rows
    packed = rows[:, 0].clone()
    for column in range(1, rows.size(1)):
        packed.mul_(base).add_(rows[:, column])
    return packed.unsqueeze(-1)


def _dense_rank(rows: Tensor, last: Tensor) -> Tensor:
    # The rank of each row of [rows | last] among the distinct rows in
    # lexicographic order (what unique(dim=0, return_inverse=True) gives, a
    # few times faster): stable sorts by the last column first.
    columns = [last] + [rows[:, c] for c in range(rows.size(1) - 1, -1, -1)]
    order = torch.arange(rows.size(0), device=rows.device)
    for column in columns:
        order = order[torch.argsort(column[order], stable=True)]
    new = torch.ones(rows.size(0), dtype=torch.long, device=rows.device)
    new[1:] = (rows[order[1:]] != rows[order[:-1]]).any(dim=1) | \
        (last[order[1:]] != last[order[:-1]])
    rank = torch.empty_like(new)
    rank[order] = new.cumsum(0) - 1
    return rank


def _count_into(counts: Tensor, keys: Tensor, values: Tensor):
    # counts[i] += how often keys[i] occurs in values (others are ignored).
    at, found = find_sorted(keys, values)
    counts.index_add_(0, at[found], torch.ones_like(values[found]))
