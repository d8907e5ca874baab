r"""What ranks on a new graph, chosen on that graph's own triples.

A model and its rules reason on a graph they were not trained on (new
entities: the inductive setting) without their constant rules, which name
the training KG's entities.  What ranks there, :math:`u`, the longest rules
and the aggregation, and per query relation the model or the rules, was
chosen on the training KG's validation triples
(:class:`~pyg_degreembed.training.scorer.NewGraphChoice`), which need not
say what ranks the new graph best: on GraIL's WN18RR_v1 the rules of up to
4 edges rank its new graph better than those of 5, on WN18RR_v3 the
reverse, and the training KG's validation cannot tell the two apart
(:obj:`benchmarks/new_graph_choice.py`).

:func:`choose_on_graph` makes the choice again on the new graph itself,
from the only evidence of it there is, its observed triples (facts and
train): a seeded sample of up to :data:`GRAPH_CHOICE_TRIPLES` of them, each
ranked as training ranks its triples, without its own edge and that edge's
inverse (filtered by every triple of the graph).  The choice is made as
:func:`~pyg_degreembed.training.scorer.choose_scorer` makes it: of every
:math:`u` of :data:`~pyg_degreembed.training.scorer.UNSEEN_CHOICES`,
longest rule length (:math:`L` down to 1) and aggregation of
:data:`~pyg_degreembed.training.scorer.AGGREGATION_CHOICES`, the setting
recorded for new graphs unless another ranks those triples better beyond
noise (:func:`~pyg_degreembed.training.scorer.preferred_choice`), then per
query relation the model or the rules under one of the aggregations (at the
:math:`u` and rule length chosen, the chosen aggregation preferred;
:func:`~pyg_degreembed.training.scorer.relation_choice` with
:data:`~pyg_degreembed.training.scorer.SETTING_PRIOR_QUERIES`).  No query of
the new graph (its valid or test triples) is read.
"""
from typing import Any, NamedTuple, Optional

import torch
from torch import Tensor
from torch.nn import Module

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.kg import graph_triples
from pyg_degreembed.evaluation.ranks import compute_ranks
from pyg_degreembed.interpret.applied_rules import AppliedRules
from pyg_degreembed.training.budget import ResourceError
from pyg_degreembed.training.scorer import (AGGREGATION_CHOICES, MAX_LISTED,
                                            SETTING_PRIOR_QUERIES,
                                            UNSEEN_CHOICES,
                                            PerRelationScorer, UnseenChoices,
                                            _option, _per_relation,
                                            preferred_choice)

#: The most observed triples of a new graph that :func:`choose_on_graph`
#: ranks (a seeded sample of them).
GRAPH_CHOICE_TRIPLES = 1000
#: The fewest observed triples a new graph needs for :func:`choose_on_graph`
#: to choose on them (fewer: the setting recorded for new graphs ranks).
MIN_GRAPH_TRIPLES = 20


class GraphChoice(NamedTuple):
    r"""The outcome of :func:`choose_on_graph`."""
    #: What ranks (:obj:`scorer="auto"`): the model, :obj:`rules` or a
    #: :class:`~pyg_degreembed.training.scorer.PerRelationScorer` of both.
    scorer: Module
    #: The rules chosen (without their constant rules), the model as their
    #: tie-break: what :obj:`scorer="rules"` ranks with and explains.
    rules: AppliedRules
    #: Why, in words.
    reason: str


def choose_on_graph(rules: AppliedRules, data: Any,
                    unseen: Optional[float] = None,
                    max_triples: int = GRAPH_CHOICE_TRIPLES, seed: int = 0,
                    num_candidates: Optional[int] = None) -> GraphChoice:
    r"""Chooses what ranks on the new graph :obj:`data` on its own observed
    triples (see the module's description).

    Args:
        rules (AppliedRules): The rules mined on the training KG, with their
            counts and the trained model as tie-break (their constant
            rules, if any, are left out); the setting they hold (their
            aggregation, every rule length) is the one preferred.
        data: The new graph, in any layout :func:`~pyg_degreembed.as_kg`
            reads, its relations the rules' (e.g. from
            :func:`~pyg_degreembed.load_model` with :obj:`graph`).
        unseen (float, optional): The :math:`u` preferred (the checkpoint's
            choice for new graphs). (default: :obj:`None`, the first of
            :data:`~pyg_degreembed.training.scorer.UNSEEN_CHOICES`)
        max_triples (int, optional): The most observed triples ranked.
            (default: :data:`GRAPH_CHOICE_TRIPLES`)
        seed (int, optional): Seed of their sample. (default: :obj:`0`)
        num_candidates (int, optional): Rank each against this many sampled
            candidates (as :func:`~pyg_degreembed.compute_ranks` does, for
            a large graph). (default: :obj:`None`, every entity)
    """
    if rules.support is None or rules.groundings is None or \
            rules.tie_break is None:
        raise ValueError("choosing on a graph needs the rules' counts and a "
                         'tie-break model')
    model = rules.tie_break
    kg = as_kg(data)
    preferred = UNSEEN_CHOICES[0] if unseen is None else float(unseen)
    unseens = [preferred] + [u for u in UNSEEN_CHOICES if u != preferred]
    setting = rules.setting
    aggregations = [setting] + [a for a in AGGREGATION_CHOICES
                                if a != setting]
    L = rules.num_steps
    lengths = list(range(L, 0, -1))
    options = [(u, n, a) for u in unseens for n in lengths
               for a in aggregations]
    paths = rules.without_constants()
    triples = graph_triples(kg)
    total = triples.size(1)

    def chosen(option, why: str, use_model=None, settings=None,
               relation_setting=None) -> GraphChoice:
        u, length, aggregation = option
        applied = paths.without_constants(u).with_setting(aggregation)
        if length < L:
            applied = applied.shortened(length)
        scorer: Module = applied
        if use_model is not None:
            scorer = model if bool(use_model.all()) else PerRelationScorer(
                applied, use_model, settings, relation_setting).to(
                    rules.rule_key.device)
        return GraphChoice(scorer, applied, why)

    recorded = f'u = {preferred:g}, {_option(options[0][1:], L)}'
    if total < MIN_GRAPH_TRIPLES:
        return chosen(options[0], f'the rules ({recorded}): the choice for '
                      f'new graphs (the graph has {total} observed triples, '
                      f'fewer than {MIN_GRAPH_TRIPLES} to choose on)')
    sample = sampled_triples(triples, max_triples, seed)
    try:
        every = compute_ranks(
            UnseenChoices(paths, unseens, aggregations, lengths), data,
            sample, remove_edge=True, num_candidates=num_candidates,
            candidate_seed=seed)
    except ResourceError as e:  # hubs: the rules' paths cannot be followed
        return chosen(options[0], f'the rules ({recorded}): the choice for '
                      f'new graphs (the rules cannot rank its triples: {e})')
    assert isinstance(every, list)  # one per option, then the model's
    *ranked, model_ranks = every
    best = preferred_choice(ranked)
    values = [r.mrr() for r in ranked]
    u = options[best][0]
    words = f'chosen on {sample.size(1)} of its {total} observed triples ' \
        '(each ranked without its own edge), MRR of the rules: ' + (
            ', '.join(f'{v:.4f} (u = {o[0]:g}, {_option(o[1:], L)})'
                      for o, v in zip(options, values))
            if len(options) <= MAX_LISTED else
            f'{values[best]:.4f} (u = {u:g}, {_option(options[best][1:], L)}'
            f'), chosen of {len(options)} settings' +
            (f' (the first, {recorded}: {values[0]:.4f})' if best else
             ' (the first)'))
    # Per query relation, the model or the rules under one of the
    # aggregations at the u and length chosen (the chosen one first).
    same = [best] + [i for i, o in enumerate(options)
                     if o[:2] == options[best][:2] and i != best]
    settings = [options[i][2] for i in same]
    name, use_model, relation_setting, per = _per_relation(
        [ranked[i] for i in same], model_ranks, u, kg.num_relations,
        SETTING_PRIOR_QUERIES, settings)
    if name == 'model':
        use_model = torch.ones(2 * kg.num_relations, dtype=torch.bool)
    return chosen(options[best], f'{name} ({words}{per})', use_model,
                  None if relation_setting is None else settings,
                  relation_setting)


def sampled_triples(triples: Tensor, max_triples: int = GRAPH_CHOICE_TRIPLES,
                    seed: int = 0) -> Tensor:
    r"""The triples of :obj:`triples` :obj:`[3, T]` that
    :func:`choose_on_graph` ranks: up to :obj:`max_triples` of them, in
    a random order drawn with :obj:`seed`.

    :rtype: :class:`torch.Tensor` of shape :obj:`[3, min(T, max_triples)]`
    """
    order = torch.randperm(triples.size(1),
                           generator=torch.Generator().manual_seed(seed))
    return triples[:, order[:max_triples]]


__all__ = ['GRAPH_CHOICE_TRIPLES', 'GraphChoice', 'MIN_GRAPH_TRIPLES',
           'choose_on_graph', 'sampled_triples']
