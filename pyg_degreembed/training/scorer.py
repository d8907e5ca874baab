r"""What ranks the answers after training: the trained model's own score,
or the applied rules (:class:`~pyg_degreembed.AppliedRules`) mined from the
training graph with the model as tie-break, the better on validation for
each query relation."""
import time
from typing import Any, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch.nn import Module

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import index_tensor, split_triples
from pyg_degreembed.data.resolve import resolve_graph
from pyg_degreembed.evaluation.ranks import Ranks, compute_ranks
from pyg_degreembed.interpret.applied_rules import (Aggregation, AppliedRules,
                                                    rule_counts)
from pyg_degreembed.interpret.constant_rules import constant_rule_counts
from pyg_degreembed.interpret.mining import MinedCounts
from pyg_degreembed.training.budget import ResourceError
from pyg_degreembed.training.distributed import all_reduce_number


class PerRelationScorer(Module):
    r"""Ranks the answers of a query :math:`(h, q, ?)` with the model where
    :obj:`use_model[q]`, with the applied rules otherwise, each query
    relation under its own aggregation where :obj:`settings` are given (the
    scores of one query come from one of them, so its ranks are theirs).

    Args:
        rules (AppliedRules): The applied rules, the model as their
            tie-break.
        use_model (torch.Tensor): Per query relation :math:`q \in [0, 2R)`,
            whether the model ranks, shape :obj:`[2R]`.
        settings (Sequence[Aggregation], optional): The aggregations the
            rules rank under (:meth:`AppliedRules.with_setting`).
            (default: :obj:`None`, the rules' own)
        relation_setting (torch.Tensor, optional): Per query relation, the
            index of its aggregation in :obj:`settings`, shape :obj:`[2R]`.
            (default: :obj:`None`, the rules' own)
    """
    def __init__(self, rules: AppliedRules, use_model: Tensor,
                 settings: Optional[Sequence[Aggregation]] = None,
                 relation_setting: Optional[Tensor] = None):
        super().__init__()
        if rules.tie_break is None:
            raise ValueError('the applied rules need the model as tie-break')
        K = rules.num_edge_types
        if use_model.shape != (K, ):
            raise ValueError(f"'use_model' must have shape [{K}], got "
                             f"{list(use_model.shape)}")
        if (settings is None) != (relation_setting is None):
            raise ValueError("'settings' and 'relation_setting' go together")
        self.settings = [rules.setting] if settings is None else \
            [Aggregation(*a) for a in settings]
        if relation_setting is None:
            relation_setting = torch.zeros(K, dtype=torch.long)
        if relation_setting.shape != (K, ) or (K and not (
                0 <= int(relation_setting.min()) and
                int(relation_setting.max()) < len(self.settings))):
            raise ValueError(f"'relation_setting' must hold an index of "
                             f"'settings' per query relation (shape [{K}])")
        self.rules = rules
        self.num_relations = rules.num_relations
        self.register_buffer('use_model', use_model.bool())
        self.register_buffer('relation_setting', relation_setting.long())
        for setting in self.settings:  # refused here, not when ranking
            rules.with_setting(setting)

    use_model: Tensor
    relation_setting: Tensor

    @property
    def model(self) -> Module:
        tie_break = self.rules.tie_break
        assert tie_break is not None  # checked in __init__
        return tie_break

    def ranker(self, relation: int) -> Module:
        r"""What ranks the queries of query relation :obj:`relation`: the
        model, or the rules under that relation's aggregation."""
        if bool(self.use_model[relation]):
            return self.model
        return self.rules.with_setting(
            self.settings[int(self.relation_setting[relation])])

    def forward(self, graph: Any, head: Any, relation: Any, *,
                remove_tail: Optional[Tensor] = None,
                targets: Optional[Tensor] = None) -> Tensor:
        r"""Scores every entity as the answer of each query, called like
        :meth:`AppliedRules.forward` with a graph (the queries the model
        ranks score every entity, :obj:`targets` or not).

        :rtype: :class:`torch.Tensor` of shape :obj:`[B, N]`
        """
        device = self.use_model.device
        head = index_tensor(head, 'head').to(device)
        relation = index_tensor(relation, 'relation').to(device)
        # Who ranks each query: -1 the model, else its setting's index.
        ranked_by = torch.where(self.use_model[relation], -1,
                                self.relation_setting[relation])
        N = resolve_graph(graph, num_relations=self.num_relations,
                          device=device).num_nodes
        out = torch.zeros(head.numel(), N, dtype=torch.double, device=device)
        for index in torch.unique(ranked_by).tolist():
            rows = ranked_by == index
            scorer = self.model if index < 0 else \
                self.rules.with_setting(self.settings[index])
            extra = {} if remove_tail is None else \
                {'remove_tail': remove_tail[rows]}
            if targets is not None and index >= 0:
                extra['targets'] = targets[rows]
            out[rows] = scorer(graph, head[rows], relation[rows],
                               **extra).double()
        return out


def query_relations(ranks: Ranks, num_relations: int) -> Tensor:
    r"""The query relation :math:`q \in [0, 2R)` of each ranked query
    (its relation, :math:`+R` for head queries)."""
    return ranks.relation + num_relations * ranks.direction


def chosen_reciprocal_ranks(options: Sequence[Ranks],
                            choice: Tensor) -> Tensor:
    r"""Per query (every ranking of the same queries, in one order), the
    reciprocal rank (realistic ties) in the ranking :obj:`options[i]` that
    :obj:`choice` picks for its query relation.

    Args:
        options (Sequence[Ranks]): Rankings of the same queries.
        choice (torch.Tensor): Per query relation :math:`q \in [0, 2R)`,
            the index of its ranking, shape :obj:`[2R]`.
    """
    query = query_relations(options[0], choice.numel() // 2)
    rr = torch.stack([1. / ranks.ranks['realistic'].double()
                      for ranks in options])
    return rr[choice[query], torch.arange(query.numel())]


#: The weight, in validation queries, of a ranking's MRR over all query
#: relations in the estimate of its MRR on one relation
#: (:func:`relation_choice`).
PRIOR_QUERIES = 10.


def relation_choice(options: Sequence[Ranks], num_relations: int,
                    prior_queries: float = PRIOR_QUERIES) -> Tensor:
    r"""Per query relation :math:`q \in [0, 2R)` (relation and direction of
    the validation queries): the index of the ranking in :obj:`options`
    with the best estimated MRR (realistic ties) on the queries of
    :math:`q`, the earliest one among equals.  A ranking's MRR on
    :math:`q` is estimated from its :math:`n_q` queries of :math:`q`,
    shrunk towards its MRR over all queries :math:`\bar{m}` as if that
    were :math:`k` = :obj:`prior_queries` more queries,

    .. math::
        \hat{m}_q = \frac{\sum_{i \in q} 1 / \mathrm{rank}_i + k
        \bar{m}}{n_q + k},

    so that a relation with a handful of validation queries does not leave
    the ranking that is better overall on the strength of one or two of
    them.  The ranking chosen overall is :func:`preferred_choice`'s (the
    first unless another is better beyond noise); where another has the
    better MRR over all queries but within noise, every ranking is shrunk
    towards the chosen one's :math:`\bar{m}` instead (on a few validation
    triples, as a large KG's choice ranks, a lead within noise would
    otherwise carry every relation).  Relations without validation queries
    take the ranking chosen overall.

    Args:
        options (Sequence[Ranks]): Rankings of the same validation queries
            (e.g. by the rules with several confidences and by the model).
        num_relations (int): The number :math:`R` of KG relations.
        prior_queries (float, optional): :math:`k`. (default:
            :data:`PRIOR_QUERIES`; :obj:`benchmarks/relation_choice.py`
            measures others)

    :rtype: :class:`torch.Tensor` of shape :obj:`[2R]` (long)
    """
    K = 2 * num_relations
    query = query_relations(options[0], num_relations)
    if any(not torch.equal(query_relations(ranks, num_relations), query)
           for ranks in options[1:]):
        raise ValueError('the rankings to choose from must rank the same '
                         'queries')
    total = torch.stack([
        torch.zeros(K, dtype=torch.double).index_add_(
            0, query, 1. / ranks.ranks['realistic'].double())
        for ranks in options])
    count = torch.bincount(query, minlength=K)
    overall = total.sum(dim=1, keepdim=True) / max(query.numel(), 1)
    chosen = preferred_choice(options)
    prior = overall if int(overall.argmax()) == chosen else \
        overall[chosen].expand_as(overall)
    # argmax returns the first of equal maxima.
    return torch.where(count > 0, ((total + prior_queries * prior) /
                                   (count + prior_queries)).argmax(dim=0),
                       chosen)


#: The weight, in validation queries, of a ranking's MRR over all query
#: relations when :func:`choose_scorer` chooses per query relation of the
#: training KG among the rules under each aggregation and the model
#: (:func:`relation_choice`): of 10, 30 and 100, the best mean two-fold
#: validation MRR over six KGs (:obj:`benchmarks/relation_choice.py`).
SETTING_PRIOR_QUERIES = 100.


#: The values of :math:`u` (the confidences' unseen groundings, see
#: :meth:`AppliedRules.mine`) that :func:`choose_scorer` chooses from, the
#: preferred first (AnyBURL's default; some dense KGs want the larger, see
#: :obj:`benchmarks/applied_rules.py`).
UNSEEN_CHOICES = (5., 200.)
#: How many standard errors of the per-query differences of reciprocal
#: ranks an option must gain over the preferred one to be chosen
#: (:func:`preferred_choice`).
CHOICE_MARGIN = 2.


def preferred_choice(options: Sequence[Ranks]) -> int:
    r"""The index of the ranking in :obj:`options` (rankings of the same
    validation queries, the preferred first) to choose: the one with the
    best MRR (realistic ties) among the preferred and those whose MRR
    exceeds the preferred one's by more than :data:`CHOICE_MARGIN` standard
    errors of the per-query differences (a paired test: on a few hundred
    sampled queries, smaller gains are mostly noise)."""
    rr = torch.stack([1. / ranks.ranks['realistic'].double()
                      for ranks in options])
    diff = rr - rr[0]
    n = rr.size(1)
    error = diff.std(dim=1) / n**.5 if n > 1 else torch.zeros(len(options))
    allowed = diff.mean(dim=1) > CHOICE_MARGIN * error
    allowed[0] = True
    mrr = rr.mean(dim=1)
    return int(torch.where(allowed, mrr, torch.full_like(mrr, -1.)).argmax())


#: The aggregations of the rules (:class:`AppliedRules`) by name, each
#: with the number of rules it reads per answer (:obj:`num_keys`), the
#: model's weight and the redundancy: max-plus of 3; noisy-or of 50, which
#: adds up more evidence (see :obj:`benchmarks/aggregation.py`); noisy-or
#: of the rules and the model, with 3 or 50 rules and the model's weight
#: 0.1, 0.3 or 0.5 (see :obj:`benchmarks/combination.py`); and the
#: non-redundant noisy-or of 3 or 50 rules, rules overlapping by a Jaccard
#: index of 0.7 counted once (see :obj:`benchmarks/redundancy.py`).
AGGREGATION_SETTINGS = {
    'max-plus': (Aggregation('max-plus', 3), ),
    'noisy-or': (Aggregation('noisy-or', 50), ),
    'combined': tuple(Aggregation('noisy-or', keys, weight)
                      for keys in (3, 50) for weight in (0.1, 0.3, 0.5)),
    'non-redundant': tuple(Aggregation('noisy-or', keys, 0., 0.7)
                           for keys in (3, 50))}
#: The share of the choice's time (with a deadline) that measuring the
#: rules' overlaps may take (for a redundancy).
OVERLAP_SHARE = 0.2
#: The most settings of :math:`u` and aggregation that the reason of
#: :func:`choose_scorer` lists (else the best and the first).
MAX_LISTED = 6
#: The settings of :data:`AGGREGATION_SETTINGS` that :obj:`train
#: --aggregation auto` chooses from: all but the non-redundant noisy-or,
#: which did not gain on validation where measured (its overlaps would take
#: a share of the choice's time; see :obj:`benchmarks/redundancy.py`).
AUTO_AGGREGATIONS = ('max-plus', 'noisy-or', 'combined')
#: Those :func:`choose_scorer` chooses from by default, the preferred first:
#: those of :data:`AUTO_AGGREGATIONS`.
AGGREGATION_CHOICES = tuple(a for name in AUTO_AGGREGATIONS
                            for a in AGGREGATION_SETTINGS[name])


#: The supports :obj:`train --prune` tries (:func:`choose_scorer`'s
#: :obj:`min_supports`): the rules that answer fewer queries of the
#: training graph are left out where validation loses little (measured in
#: :obj:`benchmarks/rule_pruning.py`).
PRUNE_SUPPORTS = (3, 5, 10, 20)
#: The most validation MRR (of the rules' ranking) that a prune may cost.
PRUNE_TOLERANCE = 1e-3
#: The share of the choice's time (with a deadline) that the prune takes.
PRUNE_SHARE = 0.25


class UnseenChoices(Module):
    r"""Applied rules scored under the confidences of several :math:`u` at
    once, and their tie-break model alone
    (:meth:`~pyg_degreembed.AppliedRules.score_with_unseen`): with
    :func:`~pyg_degreembed.compute_ranks`, one ranking per :math:`u` (and
    longest rule length and aggregation) and the model's, from one pass
    over the queries.

    Args:
        rules (AppliedRules): Rules mined with a :math:`u` no larger than
            any of :obj:`unseen`, with a tie-break model.
        unseen (Sequence[float]): The values of :math:`u`.
        aggregations (Sequence[Aggregation], optional): The
            aggregations, each under every :math:`u` and longest length.
            (default: :obj:`None`, that of :obj:`rules`)
        max_lengths (Sequence[int], optional): The longest path rules
            that score, each under every :math:`u`. (default: :obj:`None`,
            every rule)
        constants (Sequence[bool], optional): Whether the constant rules
            score, each under every :math:`u`. (default: :obj:`(True, )`)
    """
    def __init__(self, rules: AppliedRules, unseen: Sequence[float],
                 aggregations: Optional[Sequence[Tuple[Any, ...]]] = None,
                 max_lengths: Optional[Sequence[int]] = None,
                 constants: Sequence[bool] = (True, )):
        super().__init__()
        self.rules = rules
        self.unseen = [float(u) for u in unseen]
        self.aggregations = None if aggregations is None else \
            [Aggregation(*a) for a in aggregations]
        self.max_lengths = None if max_lengths is None else \
            [int(length) for length in max_lengths]
        self.constants = [bool(c) for c in constants]

    def forward(self, graph: Any, head: Tensor, relation: Tensor, *,
                remove_tail: Optional[Tensor] = None,
                targets: Optional[Tensor] = None) -> Tensor:
        r"""The rules' scores under each :math:`u`, use of the constant
        rules, longest length and aggregation, then the model's (of the
        :obj:`targets` only, if given, as in
        :meth:`~pyg_degreembed.AppliedRules.forward`).

        :rtype: :class:`torch.Tensor` of shape :obj:`[S C V A + 1, B, N]`
            (:math:`S` values of :math:`u`, :math:`C` of
            :obj:`constants`, :math:`V` longest lengths, :math:`A`
            aggregations)
        """
        return self.rules.score_with_unseen(graph, head, relation,
                                            self.unseen, remove_tail,
                                            self.aggregations, targets,
                                            self.max_lengths, self.constants)


class NewGraphChoice(NamedTuple):
    r"""What ranks on a new graph (other entities than the training KG's,
    where the constant rules, which name them, do not apply): chosen as
    :func:`choose_scorer` chooses, on the same validation queries, but
    ranked by the rules without their constant rules: :math:`u`, and per
    query relation the model or the rules (under the aggregation and rule
    length chosen for the training KG)."""
    #: :obj:`"rules"`, :obj:`"model"` or :obj:`"per-relation"`.
    name: str
    #: The :math:`u` of the path rules' confidences.
    unseen: float
    #: Why, in words (the validation MRRs without the constant rules).
    reason: str
    #: Per query relation, whether the model ranks (:obj:`None` unless
    #: :obj:`name` is :obj:`"per-relation"`).
    use_model: Optional[Tensor] = None

    def to_payload(self) -> dict:
        r"""The choice as a checkpoint keeps it (its field
        :obj:`new_graph`)."""
        return {'scorer': self.name, 'unseen': self.unseen,
                'model_relations': self.use_model}


class ScorerChoice(NamedTuple):
    r"""The outcome of :func:`choose_scorer`."""
    #: The module that ranks: the model, :obj:`applied` or a
    #: :class:`PerRelationScorer` of both.
    scorer: Module
    #: :obj:`"rules"`, :obj:`"model"` or :obj:`"per-relation"`.
    name: str
    #: Why, in words (the validation MRRs).
    reason: str
    #: The mined rules.
    applied: AppliedRules
    #: Seconds the mining and the choices took.
    mining_seconds: float
    #: Per query relation, whether the model ranks (:obj:`None` unless
    #: :obj:`name` is :obj:`"per-relation"`).
    use_model: Optional[Tensor] = None
    #: The :math:`u` of the rules' confidences.
    unseen: float = UNSEEN_CHOICES[0]
    #: The validation rankings :math:`u` was chosen on: by the rules with
    #: each :math:`u` of :obj:`unseen` (under the first aggregation), then
    #: by the model; :obj:`None` without validation triples.
    valid_ranks: Optional[List[Ranks]] = None
    #: The aggregation of the rules.
    aggregation: Aggregation = AGGREGATION_CHOICES[0]
    #: With several aggregations or rule lengths, the validation rankings
    #: they were chosen on (the first triples of :obj:`valid_ranks`): by
    #: the rules with :obj:`unseen` cut at each longest length under each
    #: aggregation, then by the model.
    aggregation_ranks: Optional[List[Ranks]] = None
    #: What ranks on a new graph, where constant rules were mined and
    #: validation triples rank (:obj:`None` otherwise: the same as here,
    #: without the constant rules).
    new_graph: Optional[NewGraphChoice] = None
    #: What the prune kept, and why, in words (:obj:`None` without a
    #: prune).
    pruned: Optional[str] = None
    #: Per-relation, where query relations rank under other aggregations
    #: than :obj:`aggregation`: the aggregations (that one first) and
    #: each query relation's index among them (:obj:`None` otherwise).
    settings: Optional[List[Aggregation]] = None
    relation_setting: Optional[Tensor] = None

    def relation_settings(self) -> Optional[dict]:
        r"""The aggregation of each query relation as a checkpoint keeps
        it (its field :obj:`relation_settings`; :obj:`None`: the rules'
        own for all)."""
        if self.settings is None or self.relation_setting is None:
            return None
        return {'settings': [list(a) for a in self.settings],
                'index': self.relation_setting}


def choose_scorer(model: Module, data: Any, num_steps: int,
                  scorer: str = 'auto', device: Optional[Any] = None,
                  unseen: Sequence[float] = UNSEEN_CHOICES,
                  constants: bool = True,
                  mined: Optional[MinedCounts] = None,
                  deadline: Optional[float] = None,
                  seed: int = 0,
                  aggregations: Sequence[Tuple[Any, ...]] = (
                      AGGREGATION_CHOICES),
                  num_candidates: Optional[int] = None,
                  max_lengths: Optional[Sequence[int]] = None,
                  min_supports: Sequence[int] = ()
                  ) -> ScorerChoice:
    r"""Mines the applied rules of length at most :obj:`num_steps` with
    :obj:`model` as tie-break, with the confidences
    :math:`\mathrm{support} / (\mathrm{groundings} + u)` of the
    :math:`u \in` :obj:`unseen` chosen on the filtered validation MRR
    (realistic ties; the first unless another is better beyond noise,
    :func:`preferred_choice`) under the first of :obj:`aggregations`,
    then, under that :math:`u`, the aggregation and the longest rules
    kept (:obj:`max_lengths`,
    :meth:`~pyg_degreembed.AppliedRules.shortened`) chosen alike, and
    chooses the scorer.  With
    :obj:`scorer="auto"`, for each query relation :math:`q \in [0, 2R)` the
    model or the rules under one of the aggregations (at the rule length
    chosen), whichever has the best validation MRR on the validation
    queries of :math:`q`, shrunk towards its MRR over all queries as if that
    were :data:`SETTING_PRIOR_QUERIES` more (:func:`relation_choice`; the
    rules under the aggregation chosen among equals): the rules where they
    win everywhere under that aggregation, the model where it does, a
    :class:`PerRelationScorer` otherwise.
    :obj:`"rules"` takes the rules.  Where the KG has no validation
    triples, the rules with the first :math:`u`.  With constant rules, the
    choice for new graphs (:class:`NewGraphChoice`) is made alike in the
    same pass over the validation queries, the rules ranking without their
    constant rules.

    Args:
        model (torch.nn.Module): The trained model.
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads.
        num_steps (int): The longest rule :math:`L`.
        scorer (str, optional): :obj:`"auto"` or :obj:`"rules"`.
            (default: :obj:`"auto"`)
        device (torch.device, optional): Where the rules rank. (default:
            the model's device)
        unseen (Sequence[float], optional): The values of :math:`u` to
            choose from, the preferred first. (default:
            :data:`UNSEEN_CHOICES`)
        constants (bool, optional): Mine the constant rules too (they name
            the entities of :obj:`data`: leave them out for a model meant
            for other graphs). (default: :obj:`True`)
        mined (MinedCounts, optional): The rules' counts, if already
            mined (:func:`~pyg_degreembed.interpret.mining.mine_counts`;
            its constant rules are used where :obj:`constants`).
            (default: :obj:`None`: counted here, exactly)
        deadline (float, optional): A :func:`time.perf_counter` reading by
            which the choice should be made: the validation triples are
            ranked in a seeded random order, in parts growing as the pace
            allows, until it has passed (at least
            :data:`MIN_CHOICE_TRIPLES`), and the
            choice is made on those; with several aggregations, :math:`u`
            is chosen on those ranked by half the time left, the
            aggregation on the first of them ranked by the deadline.
            (default: :obj:`None`, every validation triple)
        seed (int, optional): Seed of that order. (default: :obj:`0`)
        aggregations (Sequence[Aggregation], optional): The rules'
            aggregations (:class:`~pyg_degreembed.AppliedRules`), each with
            its number of keys and model weight, to choose from with
            :math:`u`, the preferred first. (default:
            :data:`AGGREGATION_CHOICES`)
        num_candidates (int, optional): Choose on validation ranked against
            this many sampled candidates, drawn with :obj:`seed` (as
            :func:`~pyg_degreembed.compute_ranks` does; the rules follow
            their paths to the candidates only): the protocol of a large
            KG's test ranking, where ranking against every entity can cost
            minutes per query (a hub's paths at 10M triples: 182M rule
            firings, refused after 173 s).  (default: :obj:`None`, against
            every entity)
        max_lengths (Sequence[int], optional): The longest path rules to
            keep, chosen with the aggregation, the preferred first (e.g.
            :obj:`range(num_steps, 1, -1)`: the full length unless a cut
            gains beyond noise; :obj:`train --cut-rules`).
            (default: :obj:`None`, :obj:`[num_steps]`: no cut)
        min_supports (Sequence[int], optional): Supports at which to
            prune the rules chosen
            (:meth:`~pyg_degreembed.AppliedRules.pruned`),
            tried from the smallest on the validation triples of their
            choice: the rules are pruned at the largest support tried
            whose ranking loses at most :data:`PRUNE_TOLERANCE` of
            validation MRR to theirs, the supports tried until one loses
            more (the choice per relation is made before, on the rules
            unpruned); with a deadline, the prune takes the last
            :data:`PRUNE_SHARE` of the time, and a support whose ranking
            does not finish by the deadline is not taken
            (:data:`PRUNE_SUPPORTS`: :obj:`train --prune`).
            (default: :obj:`()`, no prune)
    """
    if scorer not in ('auto', 'rules'):
        raise ValueError(f"'scorer' must be 'auto' or 'rules', got "
                         f'{scorer!r}')
    unseen = [float(u) for u in unseen]
    if not unseen:
        raise ValueError("'unseen' must hold at least one value")
    if device is None:
        device = next(model.parameters()).device
    kg = as_kg(data)
    start = time.perf_counter()
    if mined is None:
        counts = rule_counts(data, num_steps)
        constant_counts = constant_rule_counts(data) if constants else None
    else:
        counts = mined.counts
        constant_counts = mined.constant_counts if constants else None
        if constants and constant_counts is None:
            raise ValueError("'mined' holds no constant rules: mine them "
                             'or pass constants=False')

    choices = [Aggregation(*a) for a in aggregations]
    if not choices:
        raise ValueError("'aggregations' must hold at least one value")
    lengths = [num_steps] if max_lengths is None else \
        [int(length) for length in max_lengths]
    if not lengths or not all(1 <= n <= num_steps for n in lengths):
        raise ValueError(f"'max_lengths' must be rule lengths in [1, "
                         f'{num_steps}], got {max_lengths}')
    # The options of stage 2: (longest rules, aggregation), the preferred
    # first.
    options = [(n, a) for n in lengths for a in choices]

    overlap_deadline = None if deadline is None else \
        start + OVERLAP_SHARE * (deadline - start)
    # The deadline of stages 1 and 2: the prune takes the time after it.
    prune_deadline = deadline
    if deadline is not None and min_supports:
        deadline = start + (1. - PRUNE_SHARE) * (deadline - start)

    def mine(u, setting=choices[0], overlap_of=None, measure=False):
        # The rules under u and the setting; the overlaps (of a redundancy,
        # or if `measure`) measured here, or taken from the rules
        # `overlap_of`.
        applied = AppliedRules.mine(
            data, num_steps, unseen=u, tie_break=model, counts=counts,
            constants=constants, constant_counts=constant_counts,
            aggregation=setting.name, num_keys=setting.num_keys,
            model_weight=setting.model_weight)
        if setting.redundancy is not None or measure:
            if overlap_of is None:
                applied.measure_overlap(data, seed=seed,
                                        deadline=overlap_deadline)
            else:
                applied.take_overlap(overlap_of)
            applied.redundancy = setting.redundancy
        return applied.to(device)

    if kg.valid_edge_type.numel() == 0:
        applied = mine(unseen[0])
        return ScorerChoice(applied, 'rules', 'no validation triples to '
                            'choose on', applied, time.perf_counter() - start,
                            unseen=unseen[0], aggregation=choices[0])
    # Stage 1, one pass over the validation queries: the rules' bodies
    # followed and the model run once, the rules scored under each u (those
    # mined with the smallest u hold every constant rule that a larger one
    # keeps) with the first aggregation. Stage 2: each aggregation under
    # the u chosen, on the triples of stage 1 in the same order. With a
    # deadline, the triples in a seeded order, each stage until its own.
    smallest = min(unseen)
    applied_smallest = mine(smallest, measure=any(
        a.redundancy is not None for a in choices))
    valid = split_triples(kg, 'valid')
    if deadline is not None:
        valid = valid[:, torch.randperm(
            valid.size(1), generator=torch.Generator().manual_seed(seed))]
    first = choices[0]
    sample = None if num_candidates is None else (num_candidates, seed)
    stage_deadline = deadline
    if deadline is not None and len(options) > 1:
        now = time.perf_counter()
        stage_deadline = now + max(deadline - now, 0.) / 2
    try:
        # The rules with and without the constant rules, under each u.
        with_constants = (True, False) if constant_counts is not None \
            else (True, )
        *ranked, model_ranks = _rank_until(
            UnseenChoices(applied_smallest, unseen, [first],
                          constants=with_constants),
            data, valid, stage_deadline, sample)
        paths_ranked = ranked[1::2] if len(with_constants) > 1 else None
        ranked = ranked[::len(with_constants)]
        chosen = preferred_choice(ranked)
        aggregation_ranks = None
        if len(options) > 1:
            shown = model_ranks.relation.numel() // 2
            aggregation_ranks = _rank_until(
                UnseenChoices(applied_smallest, [unseen[chosen]], choices,
                              lengths),
                data, valid[:, :shown], deadline, sample)
        ranked.append(model_ranks)
    except ResourceError as e:  # hubs: the rules' paths cannot be followed
        if scorer == 'rules':
            raise
        return ScorerChoice(model, 'model', f'the applied rules cannot rank '
                            f'on this graph ({e}); the model ranks',
                            applied_smallest, time.perf_counter() - start,
                            unseen=smallest, aggregation=first)
    u = unseen[chosen]
    reason = ', '.join(f"{ranks.mrr():.4f} (u = {u_:g})"
                       for u_, ranks in zip(unseen, ranked[:-1]))
    # The choice per relation compares the rules' ranking with the model's
    # on the same triples: those of stage 2 where an aggregation other than
    # the first is chosen (stage 2 may stop before stage 1's triples end).
    rules_ranks, relation_model_ranks = ranked[chosen], model_ranks
    length, aggregation = options[0]
    rules_options, settings = [rules_ranks], [aggregation]
    if aggregation_ranks is not None:
        values = [ranks.mrr() for ranks in aggregation_ranks[:-1]]
        best = preferred_choice(aggregation_ranks[:-1])
        length, aggregation = options[best]
        stage = aggregation_ranks[-1].relation.numel()
        reason += f' with {describe(first)}; at u = {u:g}' + (
            f' on {stage // 2} of those triples'
            if stage < model_ranks.relation.numel() else '') + ': ' + (
            ', '.join(f'{v:.4f} ({_option(o, num_steps)})'
                      for o, v in zip(options, values))
            if len(options) <= MAX_LISTED else
            f'{values[best]:.4f} ({_option(options[best], num_steps)}), '
            f'chosen of {len(options)} settings' +
            (f' (the first: {values[0]:.4f})' if best else ''))
        # The choice per relation on the triples of stage 2, among the
        # aggregations at the length chosen (the chosen one first).
        same = [best] + [i for i, (n, _) in enumerate(options)
                         if n == length and i != best]
        rules_options = [aggregation_ranks[i] for i in same]
        settings = [options[i][1] for i in same]
        rules_ranks, relation_model_ranks = rules_options[0], \
            aggregation_ranks[-1]
    applied = mine(u, aggregation, applied_smallest) \
        if u != smallest or aggregation != first else applied_smallest
    if length < num_steps:
        applied = applied.shortened(length)
    pruned = None
    if min_supports:
        triples = valid[:, :rules_ranks.relation.numel() // 2]
        applied, pruned = _prune(applied, rules_ranks, data, triples,
                                 min_supports, prune_deadline, sample)
    shown = ranked[0].relation.numel() // 2
    reason = ('' if shown == valid.size(1) else
              f'on {shown} of {valid.size(1)} validation triples, ') + \
        'validation MRR' + ('' if sample is None else
                            f' ({num_candidates} sampled candidates)') + \
        ': applied rules ' + reason
    new_graph = None if paths_ranked is None else \
        _new_graph_choice(paths_ranked, model_ranks, unseen, scorer,
                          kg.num_relations)
    if scorer == 'rules':
        return ScorerChoice(applied, 'rules', f'asked for; {reason}',
                            applied, time.perf_counter() - start, unseen=u,
                            valid_ranks=ranked, aggregation=aggregation,
                            aggregation_ranks=aggregation_ranks,
                            new_graph=new_graph, pruned=pruned)
    name, use_model, relation_setting, words = _per_relation(
        rules_options, relation_model_ranks, u, kg.num_relations,
        SETTING_PRIOR_QUERIES, settings)
    used = None if relation_setting is None else settings
    if used is not None and applied.overlap is None and any(
            a.redundancy is not None for a in used):
        applied.take_overlap(applied_smallest)
    ranking: Module = model if name == 'model' else applied
    if use_model is not None:  # per-relation
        ranking = PerRelationScorer(applied, use_model, used,
                                    relation_setting).to(device)
    return ScorerChoice(ranking, name, reason + words, applied,
                        time.perf_counter() - start, use_model, u, ranked,
                        aggregation, aggregation_ranks, new_graph, pruned,
                        used, relation_setting)


def _prune(applied: AppliedRules, ranks: Ranks, data: Any, triples: Tensor,
           min_supports: Sequence[int], deadline: Optional[float],
           sample: Optional[Tuple[int, int]]) -> Tuple[AppliedRules, str]:
    # The rules pruned at the largest of `min_supports` (from the smallest
    # on) whose ranking of `triples` (those `ranks`, the rules' own, ranks)
    # loses at most PRUNE_TOLERANCE of validation MRR; a ranking not done by
    # the deadline ends the tries. And what it kept, in words.
    full = ranks.mrr()
    kept, support, tried = applied, None, []
    supports = sorted({int(s) for s in min_supports})
    for i, min_support in enumerate(supports):
        pruned = applied.pruned(min_support)
        level = None
        if deadline is not None:  # an equal share for each support left
            now = time.perf_counter()
            level = now + max(deadline - now, 0.) / (len(supports) - i)
        part = _rank_until(pruned, data, triples, level, sample)[0]
        if part.relation.numel() < ranks.relation.numel():
            tried.append(f'>= {min_support}: not ranked in time')
            break
        mrr = part.mrr()
        tried.append(f'>= {min_support}: {mrr:.4f}')
        if mrr < full - PRUNE_TOLERANCE:
            break
        kept, support = pruned, min_support
    path_rules, constants = applied.rule_key.numel(), applied.constant_rules
    words = (f'{kept.rule_key.numel()} of {path_rules} path rules' +
             ('' if constants is None else
              f', {len(kept.constant_rules or [])} of {len(constants)} '
              'constant rules'))
    return kept, ('rules kept: all, ' if support is None else
                  f'rules kept: those met >= {support} times, ') + words + \
        f' (validation MRR of the rules {full:.4f}; with those met ' + \
        ', '.join(tried) + ')'


def _per_relation(rules_ranks: Sequence[Ranks], model_ranks: Ranks,
                  unseen: float, num_relations: int,
                  prior_queries: float = PRIOR_QUERIES,
                  settings: Optional[Sequence[Aggregation]] = None
                  ) -> Tuple[str, Optional[Tensor], Optional[Tensor], str]:
    # The scorer chosen per query relation (relation_choice) among the
    # rules under each of `settings` (rankings `rules_ranks`, the chosen
    # first) and the model: its name, where the model ranks and each
    # relation's setting (per-relation only; the setting None where every
    # relation that the rules rank takes the first) and why, in words.
    options = list(rules_ranks) + [model_ranks]
    pick = relation_choice(options, num_relations, prior_queries)
    use_model = pick == len(options) - 1
    words = f", model {model_ranks.mrr():.4f}"
    if use_model.all():
        return 'model', None, None, words
    setting = torch.where(use_model, 0, pick)
    relation_setting = setting if bool(setting.any()) else None
    if relation_setting is None and not use_model.any():
        return 'rules', None, None, words
    valid_mrr = float(chosen_reciprocal_ranks(options, pick).mean())
    others = '' if relation_setting is None or settings is None else \
        '; ' + other_settings(settings, relation_setting)
    return 'per-relation', use_model, relation_setting, words + (
        f'; the model for {int(use_model.sum())} of {use_model.numel()} '
        f'query relations, the rules (u = {unseen:g}) for the others'
        f'{others}: {valid_mrr:.4f}')


def other_settings(settings: Sequence[Aggregation],
                   relation_setting: Tensor) -> str:
    r"""In words, the aggregations other than the first that query
    relations rank under, each with how many (e.g. :obj:`"noisy-or of 50
    rules for 5"`; the query relations the model ranks hold index 0)."""
    return ', '.join(
        f'{describe(settings[i])} for {int((relation_setting == i).sum())}'
        for i in range(1, len(settings)) if (relation_setting == i).any())


def _new_graph_choice(paths_ranked: Sequence[Ranks], model_ranks: Ranks,
                      unseen: Sequence[float], scorer: str,
                      num_relations: int) -> NewGraphChoice:
    # The choice for new graphs on the validation rankings by the rules
    # without their constant rules (under each u) and the model's.
    chosen = preferred_choice(paths_ranked)
    u = unseen[chosen]
    reason = 'validation MRR without the constant rules: ' + ', '.join(
        f"{ranks.mrr():.4f} (u = {u_:g})"
        for u_, ranks in zip(unseen, paths_ranked))
    if scorer == 'rules':
        return NewGraphChoice('rules', u, f'asked for; {reason}')
    name, use_model, _, words = _per_relation([paths_ranked[chosen]],
                                              model_ranks, u, num_relations)
    return NewGraphChoice(name, u, reason + words, use_model)


def _option(option: Tuple[int, Aggregation], num_steps: int) -> str:
    # A setting of stage 2 in words: the aggregation, and the longest
    # rules where some are left out.
    length, aggregation = option
    return describe(aggregation) + (
        '' if length == num_steps else f', rules of <= {length} edges')


def describe(aggregation: Aggregation) -> str:
    r"""An aggregation in words, e.g. :obj:`"noisy-or of 50 rules and the
    model (weight 0.3)"`."""
    name, keys, weight, redundancy = aggregation
    text = f'{name} of {keys} rules'
    if redundancy is not None:
        text += f' (those overlapping >= {redundancy:g} counted once)'
    return text + f' and the model (weight {weight:g})' if weight else text


#: The validation triples the choice ranks however close its deadline: the
#: first part of :func:`_rank_until`, whose pace sizes the next (the parts
#: double while the time allows).  Small, so that the choice keeps to its
#: share where one triple costs seconds (on the 1M-triple synthetic KG of
#: :obj:`benchmarks/scale_end_to_end.py`, ranking one validation triple
#: against all entities with 100k path rules takes about 20 s).
MIN_CHOICE_TRIPLES = 2


def _rank_until(model: Module, data: Any, triples: Tensor,
                deadline: Optional[float],
                sample: Optional[Tuple[int, int]] = None,
                first: int = MIN_CHOICE_TRIPLES) -> List[Ranks]:
    # The rankings of compute_ranks on `triples` (against the sampled
    # candidates (num_candidates, seed) if given): all of them without a
    # deadline, else parts of them in their order until the deadline (at
    # least `first` triples; each part up to twice the last, and no more
    # than the last part's pace fits before the deadline), joined.
    def rankings(triples: Tensor) -> List[Ranks]:
        ranks = compute_ranks(
            model, data, triples, num_candidates=None if sample is None
            else sample[0], candidate_seed=0 if sample is None else sample[1])
        return ranks if isinstance(ranks, list) else [ranks]

    if deadline is None:
        return rankings(triples)
    parts, begin, size = [], 0, first
    while begin < triples.size(1):
        start = time.perf_counter()
        parts.append(rankings(triples[:, begin:begin + size]))
        begin += size
        pace = size / max(time.perf_counter() - start, 1e-6)
        size = min(2 * size, int(pace * (deadline - time.perf_counter())))
        # Processes rank the same triples: the smallest part of any.
        size = int(all_reduce_number(size, 'min'))
        if size < 1:
            break
    return [_join_ranks([part[i] for part in parts])
            for i in range(len(parts[0]))]


def _join_ranks(parts: Sequence[Ranks]) -> Ranks:
    # One Ranks of the queries of several (of one model, on one KG).
    return Ranks({tie: torch.cat([p.ranks[tie] for p in parts])
                  for tie in parts[0].ranks},
                 torch.cat([p.relation for p in parts]),
                 torch.cat([p.direction for p in parts]),
                 None if parts[0].candidates is None else
                 torch.cat([p.candidates for p in parts
                            if p.candidates is not None]), parts[0].typed)


__all__ = ['PerRelationScorer', 'ScorerChoice', 'NewGraphChoice',
           'UNSEEN_CHOICES', 'PRUNE_SUPPORTS',
           'PRIOR_QUERIES', 'SETTING_PRIOR_QUERIES', 'UnseenChoices',
           'choose_scorer', 'relation_choice']
