r"""One time budget for a whole run, shared out between its stages.

A run of :obj:`pyg-degreembed train` is: set-up (reading the KG, choosing
the rule length in at most :data:`RULE_LENGTH_SHARE` of the budget), mining
the rules, training the model, choosing the scorer
on validation and saving.  :class:`TimePlan` gives each stage a deadline
from the seconds left when it starts, so that a stage that ends early leaves
its time to the next, and each stage is anytime (it returns its best so far
at its deadline): the sampled miner
(:func:`~pyg_degreembed.interpret.sampled_rules.sample_rule_counts`),
:func:`~pyg_degreembed.fit` with :obj:`time_budget`, and the validation
choice on the triples ranked by its deadline
(:func:`~pyg_degreembed.training.scorer.choose_scorer`).  The test ranking
comes after the budget (it is measurement, not training) and is timed
apart.

The shares (of the seconds left after the set-up, less
:data:`SAVE_SECONDS`): mining :data:`MINING_SHARE`, the validation choice
:data:`CHOICE_SHARE`, training the rest.  Mining and choice take little on
the small KGs, where training then gets nearly all the time; where the
sampled miner uses its whole share (FB15k-237), the mining share was chosen
on validation by :obj:`benchmarks/mining_share.py`.
"""
import time
from typing import Dict, Optional

#: The budget of :obj:`pyg-degreembed train` when none is given: the default
#: command on an unknown KG ends within minutes.
DEFAULT_SECONDS = 600.
#: The share of the budget that choosing the rule length (part of the
#: set-up, :obj:`--steps auto`) may take.
RULE_LENGTH_SHARE = 0.1
#: The share of the time left after the set-up that mining may take (of
#: 0.2, 0.35, 0.5 and 0.65, the best on FB15k-237's validation at 600 s;
#: at 0.8 training had 12 steps or none: :obj:`benchmarks/mining_share.py`).
MINING_SHARE = 0.65
#: The share of the time left after the set-up kept for the validation
#: choice.
CHOICE_SHARE = 0.15
#: Seconds kept for writing the checkpoint and the metrics at the end.
SAVE_SECONDS = 2.


class TimePlan:
    r"""The deadlines of a run's stages under one budget of :obj:`seconds`
    (:obj:`None`: no limit, every deadline is :obj:`None`), counted from
    :obj:`start` (a :func:`time.perf_counter` reading; default: now).

    Args:
        seconds (float, optional): The budget.
        start (float, optional): When the run started.
    """
    def __init__(self, seconds: Optional[float],
                 start: Optional[float] = None):
        if seconds is not None and not seconds > 0:
            raise ValueError(f'the time budget must be a positive number of '
                             f'seconds, got {seconds}')
        self.seconds = seconds
        self.start = time.perf_counter() if start is None else start
        self.setup_end: Optional[float] = None
        #: The wall seconds of each stage ended so far (:meth:`end_stage`).
        self.stages: Dict[str, float] = {}
        self._stage_start = self.start

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def left(self) -> Optional[float]:
        r"""Seconds left for the stages, less :data:`SAVE_SECONDS` (at least
        a millisecond; :obj:`None` without a budget)."""
        if self.seconds is None:
            return None
        return max(self.seconds - self.elapsed - SAVE_SECONDS, 1e-3)

    def end_stage(self, name: str) -> float:
        r"""Records the wall seconds since the previous stage ended (or the
        start) as stage :obj:`name`'s in :attr:`stages`, and returns
        them."""
        now = time.perf_counter()
        self.stages[name] = round(now - self._stage_start, 3)
        self._stage_start = now
        return self.stages[name]

    def rule_length_seconds(self) -> Optional[float]:
        r"""The seconds choosing the rule length may take."""
        left = self.left()
        return None if left is None else RULE_LENGTH_SHARE * left

    def _setup_seconds(self) -> float:
        r"""The seconds the set-up took (ended at the first call)."""
        if self.setup_end is None:
            self.setup_end = time.perf_counter()
        return self.setup_end - self.start

    def _after_setup(self, seconds: float) -> float:
        return max(seconds - self._setup_seconds() - SAVE_SECONDS, 1e-3)

    def mining_seconds(self) -> Optional[float]:
        r"""The seconds mining may take (ends the set-up)."""
        if self.seconds is None:
            return None
        return MINING_SHARE * self._after_setup(self.seconds)

    def training_seconds(self) -> Optional[float]:
        r"""The seconds training may take: what is left, less the choice's
        share."""
        left = self.left()
        if self.seconds is None or left is None:
            return None
        return max(left - CHOICE_SHARE * self._after_setup(self.seconds),
                   1e-3)

    def deadline(self) -> Optional[float]:
        r"""The :func:`time.perf_counter` reading by which the stages must
        end (:obj:`None` without a budget)."""
        if self.seconds is None:
            return None
        return self.start + self.seconds - SAVE_SECONDS

    def describe(self, miner: str) -> str:
        r"""What the run will do in its budget, in words (after the
        set-up)."""
        if self.seconds is None:
            return ('time budget: none (every stage runs to its end: '
                    f'{miner} mining, training to early stopping, the '
                    'choice on every validation triple)')
        after = self._after_setup(self.seconds)
        return (f'time budget {self.seconds:g}s for the whole run (the test '
                f'ranking after it is timed apart): set-up '
                f'{self._setup_seconds():.1f}s, mining <= '
                f'{MINING_SHARE * after:.0f}s ({miner}), training <= '
                f'{(1 - MINING_SHARE - CHOICE_SHARE) * after:.0f}s plus what '
                f'mining leaves, validation choice <= '
                f'{CHOICE_SHARE * after:.0f}s, saving {SAVE_SECONDS:g}s')


__all__ = ['CHOICE_SHARE', 'DEFAULT_SECONDS', 'MINING_SHARE',
           'RULE_LENGTH_SHARE', 'SAVE_SECONDS', 'TimePlan']
