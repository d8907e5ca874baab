r"""What ranks the answers after training: the trained model's own score,
or the applied rules (:class:`~pyg_degreembed.AppliedRules`) mined from the
training graph with the model as tie-break, the better on validation for
each query relation."""
import time
from typing import Any, NamedTuple, Optional

import torch
from torch import Tensor
from torch.nn import Module

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import index_tensor
from pyg_degreembed.evaluation.ranks import Ranks, compute_ranks
from pyg_degreembed.interpret.applied_rules import AppliedRules


class PerRelationScorer(Module):
    r"""Ranks the answers of a query :math:`(h, q, ?)` with the model where
    :obj:`use_model[q]`, with the applied rules otherwise (the scores of
    one query come from one of them, so its ranks are theirs).

    Args:
        rules (AppliedRules): The applied rules, the model as their
            tie-break.
        use_model (torch.Tensor): Per query relation :math:`q \in [0, 2R)`,
            whether the model ranks, shape :obj:`[2R]`.
    """
    def __init__(self, rules: AppliedRules, use_model: Tensor):
        super().__init__()
        if rules.tie_break is None:
            raise ValueError('the applied rules need the model as tie-break')
        if use_model.shape != (rules.num_edge_types, ):
            raise ValueError(f"'use_model' must have shape "
                             f"[{rules.num_edge_types}], got "
                             f"{list(use_model.shape)}")
        self.rules = rules
        self.num_relations = rules.num_relations
        self.register_buffer('use_model', use_model.bool())

    @property
    def model(self) -> Module:
        return self.rules.tie_break

    def forward(self, graph: Any, head: Any, relation: Any, *,
                remove_tail: Optional[Tensor] = None) -> Tensor:
        r"""Scores every entity as the answer of each query, called like
        :meth:`AppliedRules.forward` with a graph.

        :rtype: :class:`torch.Tensor` of shape :obj:`[B, N]`
        """
        device = self.use_model.device
        head = index_tensor(head, 'head').to(device)
        relation = index_tensor(relation, 'relation').to(device)
        by_model = self.use_model[relation]
        out = None
        for scorer, rows in ((self.model, by_model), (self.rules, ~by_model)):
            if not rows.any():
                continue
            extra = {} if remove_tail is None else \
                {'remove_tail': remove_tail[rows]}
            scores = scorer(graph, head[rows], relation[rows], **extra)
            if out is None:
                out = scores.new_zeros(head.numel(), scores.size(1),
                                       dtype=torch.double)
            out[rows] = scores.double()
        return out


def query_relations(ranks: Ranks, num_relations: int) -> Tensor:
    r"""The query relation :math:`q \in [0, 2R)` of each ranked query
    (its relation, :math:`+R` for head queries)."""
    return ranks.relation + num_relations * ranks.direction


def chosen_reciprocal_ranks(model_ranks: Ranks, rules_ranks: Ranks,
                            use_model: Tensor) -> Tensor:
    r"""Per query (both rankings of the same queries, in one order), the
    reciprocal rank (realistic ties) of the scorer :obj:`use_model` picks
    for its query relation."""
    query = query_relations(model_ranks, use_model.numel() // 2)
    return torch.where(use_model[query],
                       1. / model_ranks.ranks['realistic'].double(),
                       1. / rules_ranks.ranks['realistic'].double())


def relation_choice(model_ranks: Ranks, rules_ranks: Ranks,
                    num_relations: int) -> Tensor:
    r"""Per query relation :math:`q \in [0, 2R)` (relation and direction of
    the validation queries): whether the model's MRR (realistic ties) on
    the queries of :math:`q` is above the rules'; relations without
    validation queries follow the overall comparison.

    :rtype: :class:`torch.Tensor` of shape :obj:`[2R]` (boolean)
    """
    def per_relation(ranks):
        q = query_relations(ranks, num_relations)
        total = torch.zeros(2 * num_relations, dtype=torch.double)
        total.index_add_(0, q, 1. / ranks.ranks['realistic'].double())
        return total, torch.bincount(q, minlength=2 * num_relations)
    model, count = per_relation(model_ranks)
    rules, _ = per_relation(rules_ranks)
    overall = bool(model.sum() > rules.sum())
    return torch.where(count > 0, model > rules,
                       torch.full_like(count, overall, dtype=torch.bool))


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
    #: Seconds the mining took.
    mining_seconds: float
    #: Per query relation, whether the model ranks (:obj:`None` unless
    #: :obj:`name` is :obj:`"per-relation"`).
    use_model: Optional[Tensor] = None


def choose_scorer(model: Module, data: Any, num_steps: int,
                  scorer: str = 'auto',
                  device: Optional[Any] = None) -> ScorerChoice:
    r"""Mines the applied rules of length at most :obj:`num_steps` with
    :obj:`model` as tie-break and chooses the scorer.  With
    :obj:`scorer="auto"`, for each query relation :math:`q \in [0, 2R)`
    the one of the model and the rules with the better filtered validation
    MRR (realistic ties) on the validation queries of :math:`q`
    (:func:`relation_choice`): the rules where they win everywhere, the
    model where it does, a :class:`PerRelationScorer` otherwise; the rules
    where the KG has no validation triples.  :obj:`"rules"` takes the
    rules.

    Args:
        model (torch.nn.Module): The trained model.
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads.
        num_steps (int): The longest rule :math:`L`.
        scorer (str, optional): :obj:`"auto"` or :obj:`"rules"`.
            (default: :obj:`"auto"`)
        device (torch.device, optional): Where the rules rank. (default:
            the model's device)
    """
    if scorer not in ('auto', 'rules'):
        raise ValueError(f"'scorer' must be 'auto' or 'rules', got "
                         f'{scorer!r}')
    if device is None:
        device = next(model.parameters()).device
    start = time.perf_counter()
    applied = AppliedRules.mine(data, num_steps, tie_break=model).to(device)
    seconds = time.perf_counter() - start
    kg = as_kg(data)
    if scorer == 'rules':
        return ScorerChoice(applied, 'rules', 'asked for', applied, seconds)
    if kg.valid_edge_type.numel() == 0:
        return ScorerChoice(applied, 'rules', 'no validation triples to '
                            'choose on', applied, seconds)
    rules_ranks = compute_ranks(applied, data, 'valid')
    model_ranks = compute_ranks(model, data, 'valid')
    use_model = relation_choice(model_ranks, rules_ranks, kg.num_relations)
    reason = (f"validation MRR: applied rules "
              f"{rules_ranks.metrics()['mrr']:.4f}, model "
              f"{model_ranks.metrics()['mrr']:.4f}")
    if use_model.all():
        return ScorerChoice(model, 'model', reason, applied, seconds)
    if not use_model.any():
        return ScorerChoice(applied, 'rules', reason, applied, seconds)
    valid = float(chosen_reciprocal_ranks(model_ranks, rules_ranks,
                                          use_model).mean())
    reason += (f'; the model for {int(use_model.sum())} of '
               f'{use_model.numel()} query relations, the rules for the '
               f'others: {valid:.4f}')
    mixed = PerRelationScorer(applied, use_model).to(device)
    return ScorerChoice(mixed, 'per-relation', reason, applied, seconds,
                        use_model)


__all__ = ['PerRelationScorer', 'ScorerChoice', 'choose_scorer',
           'relation_choice']
