import platform
import subprocess
import sys

import pytest

# Allocates and frees 256 MB, then reports how much of it stayed resident,
# before and after trim_freed_memory().
SCRIPT = '''
import sys, torch
from pyg_degreembed import retain_freed_memory
from pyg_degreembed.training.budget import available_memory
if sys.argv[1] == 'retain':
    assert retain_freed_memory()
def rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * 4096
before = rss()
x = torch.ones(64 * 2**20)
del x
print((rss() - before) / 2**20)
available_memory(trimmed=True)  # hands the freed blocks' pages back first
print((rss() - before) / 2**20)
'''


@pytest.mark.skipif(platform.libc_ver()[0] != 'glibc',
                    reason='mallopt is glibc')
def test_retain_freed_memory_keeps_freed_blocks_resident():
    def kept(mode):
        out = subprocess.run([sys.executable, '-c', SCRIPT, mode],
                             capture_output=True, text=True, check=True)
        return [float(v) for v in out.stdout.split()]

    freed, trimmed = kept('default')
    assert freed < 64 and trimmed < 64  # handed back to the system on free
    freed, trimmed = kept('retain')
    # Kept for the next allocation, until available_memory(trimmed=True)
    # hands the pages back (so that the system's count is the whole story).
    assert freed > 192 and trimmed < 64


@pytest.mark.skipif(not sys.platform.startswith('linux'),
                    reason='reads /proc')
def test_a_memory_limit_counts_what_the_process_holds(monkeypatch):
    # available_memory: the limit less its headroom less the resident set (a
    # 256 MB tensor held lowers it by that much), the system's part shared
    # by processes, and no limit again once it is lifted.
    import torch
    from pyg_degreembed.training import budget
    monkeypatch.setattr(budget, '_meminfo_available', lambda: 2**40)
    kept = 1 - budget.MEMORY_HEADROOM
    try:
        budget.set_memory_limit((budget._resident_bytes() + 2**30) / kept)
        before = budget.available_memory(trimmed=True)
        assert abs(before - 2**30) < 2**26
        held = torch.ones(64 * 2**20)
        after = budget.available_memory(trimmed=True)
        assert abs(before - after - held.nbytes) < 2**24
        assert budget.available_memory(trimmed=True, sharers=2) == \
            budget.available_memory(trimmed=True)
        budget.set_memory_limit((budget._resident_bytes() + 2**41) / kept)
        assert budget.available_memory(trimmed=True, sharers=2) == 2**39
    finally:
        budget.set_memory_limit(None)
    assert budget.available_memory(trimmed=True) == 2**40


@pytest.mark.skipif(not sys.platform.startswith('linux'),
                    reason='reads /proc')
def test_the_process_peak_counts_what_a_measured_peak_resets():
    # resident_peak resets Linux's VmHWM (and ru_maxrss with it);
    # process_peak still holds the peak from before.
    import resource

    import torch
    from pyg_degreembed.training import budget
    held = torch.ones(64 * 2**20)  # 256 MB resident
    top = budget._status_bytes('VmRSS')
    del held
    assert budget.resident_peak(lambda: None) is not None
    # (The counters are per page and updated lazily: 128 MB of margin.)
    assert budget._status_bytes('VmHWM') < top - 2**27
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 < \
        top - 2**27
    assert budget.process_peak() > top - 2**27
