r"""The thread guard: one thread only while it is clearly faster, measured on
a probe; the thread count restored afterwards."""
import time

import pytest
import torch
from torch_geometric import seed_everything

from conftest import chain_kg
from pyg_degreembed import RuleReasoner, fit
from pyg_degreembed.threads import ThreadGuard


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def probe_taking(full: float, one: float):
    def probe():
        time.sleep(one if torch.get_num_threads() == 1 else full)
    return probe


def test_moves_to_one_thread_when_it_is_much_faster(two_threads):
    lines = []
    with ThreadGuard(probe_taking(0.03, 0.005), log=lines.append) as guard:
        assert guard.current == 1 and torch.get_num_threads() == 1
        assert lines and lines[0].startswith('threads: 2 -> 1')
    assert torch.get_num_threads() == 2  # restored


def test_stays_when_one_thread_is_not_much_faster(two_threads):
    lines = []
    with ThreadGuard(probe_taking(0.008, 0.006), log=lines.append) as guard:
        for _ in range(10):
            guard.step(0.01)
        assert guard.current == 2 and torch.get_num_threads() == 2
    assert lines == []


def test_a_slow_step_triggers_a_check_and_the_count_comes_back(two_threads):
    state = {'load': False}

    def probe():
        time.sleep((0.03 if state['load'] else 0.004)
                   if torch.get_num_threads() > 1 else 0.006)

    with ThreadGuard(probe, check_every=1000) as guard:
        for _ in range(6):
            guard.step(0.01)
        assert guard.current == 2
        state['load'] = True
        guard.step(0.2)  # 20 times the median: check at once
        assert guard.current == 1
        state['load'] = False
        for _ in range(guard.next_check - guard.steps):
            guard.step(0.01)
        assert guard.current == 2


def test_fit_with_the_guard_is_deterministic(two_threads):
    results = []
    for _ in range(2):
        seed_everything(0)
        model = RuleReasoner(3, embedding_dim=8, hidden_channels=8)
        result = fit(model, chain_kg(), epochs=2, lr=0.05, progress=False,
                     log=None)
        results.append(([h['loss'] for h in result.history],
                        [p.detach().clone() for p in model.parameters()]))
    assert results[0][0] == results[1][0]
    assert all(torch.equal(a, b) for a, b in zip(results[0][1],
                                                 results[1][1]))
    assert torch.get_num_threads() == 2
