import platform
import subprocess
import sys

import pytest

# Allocates and frees 256 MB, then reports how much of it stayed resident
# (first within freed_memory_returned(), with 'retain-returned').
SCRIPT = '''
import sys, torch
from pyg_degreembed import retain_freed_memory
from pyg_degreembed.training.runtime import (freed_memory_returned,
                                              retained_free_bytes)
if sys.argv[1] == 'retain':
    assert retain_freed_memory()
def rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * 4096
before = rss()
free = retained_free_bytes()
def allocate():
    x = torch.ones(64 * 2**20)
    del x
    print((rss() - before) / 2**20, (retained_free_bytes() - free) / 2**20)
if sys.argv[1] == 'retain-returned':
    assert retain_freed_memory()
    with freed_memory_returned():
        allocate()
allocate()
'''


@pytest.mark.skipif(platform.libc_ver()[0] != 'glibc',
                    reason='mallopt is glibc')
def test_retain_freed_memory_keeps_freed_blocks_resident():
    def kept(mode):
        out = subprocess.run([sys.executable, '-c', SCRIPT, mode],
                             capture_output=True, text=True, check=True)
        return [[float(v) for v in line.split()]
                for line in out.stdout.splitlines()]

    [(resident, free)] = kept('default')
    assert resident < 64 and free < 64  # handed back to the system on free
    [(resident, free)] = kept('retain')
    # Kept for the next allocation, and counted as this process's to use
    # (available_memory adds it to the system's available memory).
    assert resident > 192 and free > 192
    # Handed back within freed_memory_returned(), kept again after it.
    (resident, free), after = kept('retain-returned')
    assert resident < 64 and free < 64
    assert after[0] > 192 and after[1] > 192
