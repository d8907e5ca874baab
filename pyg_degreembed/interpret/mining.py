r"""The rules a run mines, exactly or by sampling, within a time limit.

:func:`mine_counts` counts the path rules of length at most :math:`L` and the
constant rules of a KG for :meth:`~pyg_degreembed.AppliedRules.mine`: by
enumeration (:func:`~pyg_degreembed.interpret.applied_rules.rule_counts`)
where that is expected to end within the limit, else by sampling
(:func:`~pyg_degreembed.interpret.sampled_rules.sample_rule_counts`).  The
expected time of the enumeration is :data:`EXACT_OVERHEAD` seconds plus its
walks (paths before merging, from every entity) at
:data:`EXACT_WALKS_PER_SECOND`, fitted to single runs on 2 cores (Family at
:math:`L = 3`: 61M walks, 2.7 s; WN18RR at :math:`L = 3`: 28M walks, 3.3 s;
at :math:`L = 5`: 7.0G walks, 106 s, where it expects 142 s: a loaded
machine is slower).
"""
import time
from typing import Any, NamedTuple, Optional

import torch

from pyg_degreembed.data.convert import as_kg
from pyg_degreembed.data.resolve import resolve_graph
from pyg_degreembed.interpret.applied_rules import (RuleCounts, check_mining,
                                                    rule_counts)
from pyg_degreembed.interpret.constant_rules import (ConstantRuleCounts,
                                                     constant_rule_counts)
from pyg_degreembed.interpret.paths import walk_totals
from pyg_degreembed.interpret.sampled_rules import sample_rule_counts

#: Seconds of the exact enumeration beyond its walks (see the module's
#: description).
EXACT_OVERHEAD = 2.
#: Walks the exact enumeration expands per second on 2 cores (see the
#: module's description).
EXACT_WALKS_PER_SECOND = 5e7
#: The ways :func:`mine_counts` may count the path rules.
MINERS = ('auto', 'exact', 'sampled')
#: The share of the time limit kept for the constant rules (their joins;
#: the counting after them is not bounded by the limit): the exact
#: enumeration must be expected to end within the rest, and the sampled
#: miner comes after them.
CONSTANT_SHARE = 0.2


class MinedCounts(NamedTuple):
    r"""The outcome of :func:`mine_counts`."""
    #: The path rules' counts.
    counts: RuleCounts
    #: The constant rules' counts (:obj:`None` without constant rules).
    constant_counts: Optional[ConstantRuleCounts]
    #: :obj:`"exact"` or :obj:`"sampled"`.
    method: str
    #: What was done, in words.
    description: str
    #: Seconds it took.
    seconds: float


def exact_seconds(data: Any, num_steps: int) -> float:
    r"""The expected seconds of :func:`~pyg_degreembed.interpret
    .applied_rules.rule_counts` on :obj:`data` at rule length
    :obj:`num_steps` (see the module's description)."""
    graph = resolve_graph(data, num_relations=as_kg(data).num_relations)
    return EXACT_OVERHEAD + float(walk_totals(graph, num_steps).sum()) / \
        EXACT_WALKS_PER_SECOND


@torch.no_grad()
def mine_counts(data: Any, num_steps: int,
                time_limit: Optional[float] = None, miner: str = 'auto',
                constants: bool = True, min_support: int = 2,
                seed: int = 0) -> MinedCounts:
    r"""Counts the path rules (and the constant rules) of :obj:`data`.

    Args:
        data: The KG, in any layout :func:`~pyg_degreembed.as_kg` reads.
        num_steps (int): The longest rule :math:`L`.
        time_limit (float, optional): Seconds for the whole mining.  The
            exact enumeration comes first and the constant rules' joins
            take what it leaves; the sampled miner, which takes all the
            time it is given, comes after the constant rules, whose joins
            take up to :data:`CONSTANT_SHARE` of it.
            (default: :obj:`None`, no limit)
        miner (str, optional): :obj:`"exact"` (refused where the
            enumeration is too large), :obj:`"sampled"`, or :obj:`"auto"`:
            exact where it is allowed and expected to end within the limit's
            path-rule share, else sampled. (default: :obj:`"auto"`)
        constants (bool, optional): Count the constant rules too.
            (default: :obj:`True`)
        min_support (int, optional): The fewest known answers a constant
            rule must answer to be counted. (default: :obj:`2`)
        seed (int, optional): Seed of the sampling. (default: :obj:`0`)
    """
    if miner not in MINERS:
        raise ValueError(f"'miner' must be one of {MINERS}, got {miner!r}")
    start = time.perf_counter()
    path_limit = None if time_limit is None else \
        time_limit * (1 - CONSTANT_SHARE if constants else 1)
    method, why = miner, 'asked for'
    if miner != 'sampled':
        try:
            check_mining(data, num_steps)
            expected = exact_seconds(data, num_steps)
        except ValueError as e:
            if miner == 'exact':
                raise
            method, why = 'sampled', str(e).split(':')[0].lower()
        else:
            if miner == 'auto':
                fits = path_limit is None or expected <= path_limit
                method = 'exact' if fits else 'sampled'
                why = f'enumeration expected to take {expected:.0f}s' + (
                    '' if path_limit is None else
                    f', {"within" if fits else "over"} its '
                    f'{path_limit:.0f}s')

    def count_constants(share: float) -> Optional[ConstantRuleCounts]:
        # Within `share` of the limit, less the time already spent.
        if not constants:
            return None
        left = None if time_limit is None else max(
            share * time_limit - (time.perf_counter() - start), 0.) or 1e-9
        return constant_rule_counts(data, time_limit=left, seed=seed,
                                    min_support=min_support)

    if method == 'exact':
        counts = rule_counts(data, num_steps)
        description = f'exact ({why})'
        constant_counts = count_constants(1.)
    else:
        # The sampled miner takes all the time it is given: the constant
        # rules come first, within their share, and it takes the rest.
        constant_counts = count_constants(CONSTANT_SHARE)
        if time_limit is not None:
            path_limit = max(time_limit - (time.perf_counter() - start),
                             1e-3)
        counts, report = sample_rule_counts(data, num_steps, path_limit,
                                            seed=seed)
        description = f'sampled ({why}): {report.describe()}'
    return MinedCounts(counts, constant_counts, method, description,
                       time.perf_counter() - start)


__all__ = ['EXACT_OVERHEAD', 'EXACT_WALKS_PER_SECOND', 'MINERS', 'MinedCounts',
           'exact_seconds', 'mine_counts']
