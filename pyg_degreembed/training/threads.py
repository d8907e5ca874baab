r"""Training that stays fast when another process competes for the cores.

PyTorch's CPU kernels run on an OpenMP thread pool whose threads spin while
they wait at the end of every parallel region.  Rule propagation is many
small operations, so when the cores are shared with another busy process a
spinning thread is often descheduled while its partner waits for it: on 2
cores next to one competing process a Family training step took over 20 s
instead of 0.12 s, while one thread took 0.22 s, about a fair share
(:obj:`benchmarks/shared_machine.py`).  On an idle machine one thread is
slower (0.13 s), so the thread count has to follow the load.

The thread count changes the last bits of PyTorch's results, so
:class:`ThreadGuard` decides before the first step (a run and its resumption
under the same conditions compute alike) by timing a *probe* (the forward
and backward pass of a fixed batch, gradients then cleared: the training
state is left alone) with all threads and with one; it checks again every
:obj:`check_every` steps and whenever a step takes far longer than the
recent ones.  It moves to one thread only when that is at least
:obj:`margin` times faster, which does not happen on an idle machine with a
workload worth several threads, so there the computation (and every bit of
its result) is the same as without the guard.
"""
import statistics
import time
from collections import deque
from typing import Any, Callable, Deque, Optional

import torch


class ThreadGuard:
    r"""Chooses between all threads and one while a training loop runs (see
    the module), and restores the thread count afterwards.

    Args:
        probe (callable): A short computation whose time tells the speed of
            a setting, e.g. the forward and backward pass of a fixed batch
            (it must not change the training state).
        enabled (bool, optional): :obj:`False` leaves the threads alone.
            (default: :obj:`True`)
        check_every (int, optional): Steps between two probes.
            (default: :obj:`100`)
        slow_factor (float, optional): A step this many times slower than
            the median of the recent ones triggers a probe. (default:
            :obj:`4.0`)
        margin (float, optional): How many times faster one thread must be
            to be chosen. (default: :obj:`1.5`)
        log (callable, optional): Receives a line when the count changes.
        clock (callable, optional): The clock the probes are timed with,
            in seconds. (default: :func:`time.perf_counter`)
        max_probe_seconds (float, optional): A first probe slower than
            this leaves the threads alone for the run: steps that long are
            a few large operations, where spinning threads cost little, and
            probing would take several steps' time. (default: :obj:`1.0`)
    """
    def __init__(self, probe: Callable[[], Any], enabled: bool = True,
                 check_every: int = 100, slow_factor: float = 4.0,
                 margin: float = 1.5,
                 log: Optional[Callable[[str], None]] = None,
                 clock: Callable[[], float] = time.perf_counter,
                 max_probe_seconds: float = 1.0):
        self.probe, self.log, self.clock = probe, log, clock
        self.max_probe_seconds = max_probe_seconds
        self.check_every, self.slow_factor = check_every, slow_factor
        self.margin = margin
        self.initial = torch.get_num_threads()
        self.enabled = enabled and self.initial > 1
        self.current = self.initial
        self.recent: Deque[float] = deque(maxlen=20)
        self.steps = 0
        self.next_check = check_every
        self.interval = check_every

    def __enter__(self) -> 'ThreadGuard':
        if self.enabled:
            start = self.clock()
            self.probe()  # warm-up
            if self.clock() - start > self.max_probe_seconds:
                self.enabled = False  # long steps: the threads stay
            else:
                self.decide()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            torch.set_num_threads(self.initial)

    def step(self, seconds: float):
        r"""Records the time of one training step; may probe and change
        the thread count for the next steps."""
        if not self.enabled:
            return
        self.steps += 1
        slow = len(self.recent) >= 5 and \
            seconds > self.slow_factor * statistics.median(self.recent)
        self.recent.append(seconds)
        if slow or self.steps >= self.next_check:
            self.decide()
            # Probing all threads under load is costly: while one thread
            # keeps winning, probe ever less often (up to 16 times).
            self.interval = min(2 * self.interval, 16 * self.check_every) \
                if self.current == 1 else self.check_every
            self.next_check = self.steps + self.interval

    def _time(self, threads: int) -> float:
        torch.set_num_threads(threads)
        start = self.clock()
        self.probe()
        return self.clock() - start

    def decide(self):
        r"""Times the probe with all threads and with one and sets the
        count for the next steps."""
        one = min(self._time(1) for _ in range(2))
        full = self._time(self.initial)
        if full <= one * self.margin:  # a second try unless clearly slow
            full = min(full, self._time(self.initial))
        choice = 1 if one * self.margin < full else self.initial
        torch.set_num_threads(choice)
        if choice != self.current:
            self.recent.clear()
            if self.log is not None:
                why = 'another process competes for the cores' \
                    if choice == 1 else 'the cores are free again'
                self.log(f'threads: {self.current} -> {choice} (probe '
                         f'{1e3 * full:.0f} ms with {self.initial} threads, '
                         f'{1e3 * one:.0f} ms with one: {why})')
            self.current = choice


def training_probe(model, graph, head, relation, tail) -> Callable[[], None]:
    r"""A probe for :class:`ThreadGuard`: the forward and backward pass of
    the training queries :obj:`(head, relation, tail)` (scored as in
    training, own edge left out), gradients then cleared, so that it costs
    what a training step costs and changes nothing."""
    def probe():
        model.score(graph, head, relation, tail).sum().backward()
        model.zero_grad(set_to_none=True)
    return probe
