r"""Process-wide settings that make training on large KGs faster on CPU."""
import ctypes
import ctypes.util
from contextlib import contextmanager
from typing import Optional

# mallopt(3) parameters of glibc.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: glibc's smallest (and initial) mmap threshold: blocks above it are mapped
#: on their own and returned to the system when freed.
_DEFAULT_MMAP_THRESHOLD = 128 * 1024
#: The threshold :func:`retain_freed_memory` set (:obj:`None` before).
_retained_threshold: Optional[int] = None


def _mallopt():
    name = ctypes.util.find_library('c')
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError, TypeError):
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return mallopt


def retain_freed_memory(threshold: int = 2**31 - 1) -> bool:
    r"""Asks the C allocator to keep freed memory for reuse instead of
    handing it back to the operating system.

    PyTorch's CPU tensors come from :obj:`malloc`.  glibc serves every block
    above 32 MB with a fresh :obj:`mmap` and returns it on free, so each
    training step page-faults its large buffers in again: a DegreEmbed step
    on FB15k-237 takes 1.07 s without this setting and 0.81 s with it, a
    WN18 epoch 67 s and 34 s (:obj:`benchmarks/speed.py`).  After this
    call, blocks up to :obj:`threshold` bytes come from the heap, and the
    heap is not trimmed, so the resident set stays at its peak instead of
    shrinking.

    It changes the whole process, which is why the library never calls it
    by itself; the command line and the benchmarks do.  Setting the
    environment variable :obj:`MALLOC_MMAP_THRESHOLD_` has the same effect.

    Returns :obj:`True` if the C library is glibc and took the settings,
    :obj:`False` elsewhere (nothing is changed).
    """
    global _retained_threshold
    mallopt = _mallopt()
    if mallopt is None or not (mallopt(_M_MMAP_THRESHOLD, threshold) and
                               mallopt(_M_TRIM_THRESHOLD, threshold)):
        return False
    _retained_threshold = threshold
    return True


@contextmanager
def freed_memory_returned():
    r"""Within the block, memory freed is handed back to the system again
    where :func:`retain_freed_memory` was called (elsewhere nothing
    changes): blocks above 128 KB are mapped on their own, as glibc does
    by default.

    For measurements that allocate more at each try (the memory probes of
    :func:`~pyg_degreembed.training.budget.training_estimate`): with freed
    blocks kept, a larger try cannot reuse the smaller ones it leaves, and
    the tries' memory adds up (probes doubling from one query on a
    1M-triple KG grew past 24 GB)."""
    mallopt = _mallopt() if _retained_threshold is not None else None
    if mallopt is None:
        yield
        return
    mallopt(_M_MMAP_THRESHOLD, _DEFAULT_MMAP_THRESHOLD)
    try:
        yield
    finally:
        if _retained_threshold is not None:
            mallopt(_M_MMAP_THRESHOLD, _retained_threshold)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        'arena', 'ordblks', 'smblks', 'hblks', 'hblkhd', 'usmblks',
        'fsmblks', 'uordblks', 'fordblks', 'keepcost')]


def retained_free_bytes() -> int:
    r"""Bytes the C allocator holds freed for this process (glibc's
    :obj:`mallinfo2().fordblks`; 0 where it cannot say): memory the
    process can reuse though the system no longer counts it as available
    (after :func:`retain_freed_memory`, all of a run's freed tensors)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library('c'))
        mallinfo2 = libc.mallinfo2
    except (OSError, AttributeError, TypeError):
        return 0
    mallinfo2.restype = _MallInfo2
    return int(mallinfo2().fordblks)
