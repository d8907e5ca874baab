r"""The thread guard: one thread only while it is clearly faster, measured on
a probe; the thread count restored afterwards.  The probes are timed on a
simulated clock, so no test depends on how busy the machine is."""
import pytest
import torch
from torch_geometric import seed_everything

import pyg_degreembed.training.loop
from pyg_degreembed import RuleReasoner, fit
from pyg_degreembed.training.threads import ThreadGuard

from conftest import chain_kg


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


class SimulatedClock:
    r"""Every reading advances the time by the current probe duration of
    the thread count in use, so a probe (timed by two readings) takes
    exactly that long: :obj:`seconds[threads]`."""
    def __init__(self, full: float, one: float):
        self.seconds = {1: one, 2: full}
        self.now, self.readings = 0., 0

    def __call__(self) -> float:
        self.readings += 1
        if self.readings % 2 == 0:  # the end of a probe
            self.now += self.seconds[torch.get_num_threads()]
        return self.now


def test_moves_to_one_thread_when_it_is_much_faster(two_threads):
    lines = []
    clock = SimulatedClock(full=0.03, one=0.005)
    with ThreadGuard(lambda: None, log=lines.append, clock=clock) as guard:
        assert guard.current == 1 and torch.get_num_threads() == 1
        assert lines == ['threads: 2 -> 1 (probe 30 ms with 2 threads, 5 ms '
                         'with one: another process competes for the cores)']
    assert torch.get_num_threads() == 2  # restored


def test_long_steps_leave_the_threads_alone(two_threads):
    # A first probe of 2 s (a step on a hub graph): the guard does not
    # spend several steps probing; one thread, far faster, is not tried.
    clock = SimulatedClock(full=2.0, one=0.005)
    with ThreadGuard(lambda: None, clock=clock) as guard:
        assert not guard.enabled and torch.get_num_threads() == 2
        assert clock.readings == 2  # the warm-up alone
        guard.step(2.0)
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize('one', [0.006, 0.0199])
def test_stays_when_one_thread_is_not_much_faster(two_threads, one):
    # 1.5 times faster is the margin: 0.03 / 0.0199 = 1.508 moves, below
    # it does not.
    lines = []
    clock = SimulatedClock(full=0.008 if one < 0.01 else 0.0298, one=one)
    with ThreadGuard(lambda: None, log=lines.append, clock=clock) as guard:
        for _ in range(10):
            guard.step(0.01)
        assert guard.current == 2 and torch.get_num_threads() == 2
    assert lines == []


def test_the_margin_decides(two_threads):
    clock = SimulatedClock(full=0.0301, one=0.02)
    with ThreadGuard(lambda: None, clock=clock) as guard:
        assert guard.current == 1


def test_a_slow_step_triggers_a_check_and_the_count_comes_back(two_threads):
    clock = SimulatedClock(full=0.004, one=0.006)
    with ThreadGuard(lambda: None, check_every=1000, clock=clock) as guard:
        for _ in range(6):
            guard.step(0.01)
        assert guard.current == 2
        clock.seconds[2] = 0.03  # another process arrives
        guard.step(0.2)  # 20 times the median: check at once
        assert guard.current == 1
        clock.seconds[2] = 0.004  # and leaves
        for _ in range(guard.next_check - guard.steps - 1):
            guard.step(0.01)
        assert guard.current == 1  # no check before next_check
        guard.step(0.01)
        assert guard.current == 2


def test_probes_less_often_while_one_thread_keeps_winning(two_threads):
    clock = SimulatedClock(full=0.03, one=0.005)
    with ThreadGuard(lambda: None, check_every=10, clock=clock) as guard:
        intervals = []
        for _ in range(400):
            before = guard.interval
            guard.step(0.01)
            if guard.interval != before:
                intervals.append(guard.interval)
        assert intervals == [20, 40, 80, 160]  # capped at 16 x check_every


def test_fit_with_the_guard_is_deterministic(two_threads, monkeypatch):
    # The same decisions give the same bits, whatever the machine's load:
    # a simulated load makes the guard move to one thread before the first
    # step in both runs.
    def guard(*args, **kwargs):
        return ThreadGuard(*args, **kwargs,
                           clock=SimulatedClock(full=0.03, one=0.005))

    monkeypatch.setattr(pyg_degreembed.training.loop, 'ThreadGuard', guard)
    results = []
    for _ in range(2):
        seed_everything(0)
        model = RuleReasoner(3, embedding_dim=8, hidden_channels=8)
        lines = []
        result = fit(model, chain_kg(), epochs=2, lr=0.05, progress=False,
                     log=lines.append)
        results.append(([h['loss'] for h in result.history],
                        [p.detach().clone() for p in model.parameters()]))
        assert any(line.startswith('threads: 2 -> 1') for line in lines)
    assert results[0][0] == results[1][0]
    assert all(torch.equal(a, b) for a, b in zip(results[0][1],
                                                 results[1][1]))
    assert torch.get_num_threads() == 2
