r"""Process-wide settings that make training on large KGs faster on CPU."""
import ctypes
import ctypes.util
import functools

# mallopt(3) parameters of glibc.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


@functools.lru_cache(maxsize=None)
def _libc() -> ctypes.CDLL:
    # The C library, loaded once (finding it runs ldconfig: milliseconds,
    # and available_memory asks for it at every path expansion step).
    return ctypes.CDLL(ctypes.util.find_library('c'))


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
    try:
        mallopt = _libc().mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(
        mallopt(_M_MMAP_THRESHOLD, threshold) and
        mallopt(_M_TRIM_THRESHOLD, threshold))


def trim_freed_memory() -> bool:
    r"""Hands the pages of the memory the C allocator holds freed back to
    the system (glibc's :obj:`malloc_trim`), so that the system's count of
    available memory is the whole story: after
    :func:`retain_freed_memory` a run's freed tensors stay resident, and
    their blocks, split among the live ones, need not fit what is allocated
    next.  The blocks stay the allocator's: reused, their pages are faulted
    in again.  Takes about 0.1 s for 5 GB of blocks.

    Returns :obj:`True` if the C library is glibc (elsewhere nothing is
    done)."""
    try:
        malloc_trim = _libc().malloc_trim
    except (OSError, AttributeError, TypeError):
        return False
    malloc_trim.argtypes = [ctypes.c_size_t]
    malloc_trim(0)
    return True


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
        mallinfo2 = _libc().mallinfo2
    except (OSError, AttributeError, TypeError):
        return 0
    mallinfo2.restype = _MallInfo2
    return int(mallinfo2().fordblks)
