r"""What a run will need, checked against what the machine has before the
work starts: a setting whose memory does not fit is refused with one line
that says how much it needs, instead of being killed by the system later.

* :func:`available_memory`: the memory the process may still use (the
  system's available memory, the address-space limit of :obj:`ulimit -v`
  where one is set, and the limit of :func:`set_memory_limit`).
* :func:`parameter_bytes`: a model's parameters, counted on PyTorch's
  :obj:`meta` device (nothing is allocated).
* :func:`training_estimate`: parameters, gradients, optimizer state, best
  weights, and the peak of one training step, measured on probe steps of
  1, 2, 4, ... up to :data:`PROBE_QUERIES` queries
  (:func:`resident_peak`) and extended to the batch.
"""
import os
from typing import Callable, List, Optional, Tuple

import torch


class ResourceError(ValueError):
    r"""A setting needs more memory than the machine has."""


def _meminfo_available() -> Optional[int]:
    try:
        with open('/proc/meminfo') as f:
            for line in f:
                if line.startswith('MemAvailable:'):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf('SC_AVPHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')
    except (AttributeError, ValueError, OSError):
        return None


def _address_space_left() -> Optional[int]:
    try:
        import resource
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, AttributeError, ValueError, OSError):
        return None
    if limit == resource.RLIM_INFINITY:
        return None
    try:
        with open('/proc/self/statm') as f:
            used = int(f.read().split()[0]) * os.sysconf('SC_PAGE_SIZE')
    except (OSError, ValueError, IndexError):
        used = 0
    return max(limit - used, 0)


#: The resident set the process may grow to (:func:`set_memory_limit`);
#: :obj:`None`: the machine's memory is the limit.
_memory_limit: Optional[int] = None


#: The share of a memory limit (:func:`set_memory_limit`) kept free of what
#: sizes itself, for what no estimate foresees.
MEMORY_HEADROOM = 0.1


def set_memory_limit(num_bytes: Optional[float]):
    r"""Makes :func:`available_memory` count at most :math:`(1 - h)` times
    :obj:`num_bytes` less the process's resident set (:math:`h` =
    :data:`MEMORY_HEADROOM`; :obj:`None`: no such limit), so that what sizes
    itself to the memory (the training batch, the ranking batch, the rules'
    path expansions) leaves the rest of the machine to others.  It sizes; it
    does not enforce: memory no estimate foresees can go past the
    headroom."""
    global _memory_limit
    _memory_limit = None if num_bytes is None else \
        int((1 - MEMORY_HEADROOM) * num_bytes)


def _resident_bytes() -> Optional[int]:
    try:
        with open('/proc/self/statm') as f:
            return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
    except (OSError, ValueError, IndexError):
        return None


def available_memory(trimmed: bool = False,
                     sharers: int = 1) -> Optional[int]:
    r"""Bytes the process may still allocate (:obj:`None` where the system
    does not say), within its address-space limit and the limit of
    :func:`set_memory_limit`: the system's available memory (its part of
    it, shared by :obj:`sharers` processes, as under :obj:`torchrun`) and
    the freed memory the C allocator keeps for this process
    (:func:`~pyg_degreembed.training.runtime.retained_free_bytes`); with
    :obj:`trimmed`, the system's alone, once those blocks' pages are handed
    back to it (:func:`~pyg_degreembed.training.runtime.trim_freed_memory`):
    split among the live ones, the blocks need not fit what comes next
    (after mining, the 10M-triple run's first training step did not fit
    them).  Trimmed for the training memory, whose step is large and
    repeated; not for the many small checks of a computation (trimming
    makes what follows fault its pages in again)."""
    from pyg_degreembed.training.runtime import (retained_free_bytes,
                                                 trim_freed_memory)
    if trimmed:
        trim_freed_memory()
    retained = 0 if trimmed else retained_free_bytes()
    system = _meminfo_available()
    if system is not None:
        system = system // sharers + retained
    known = [b for b in (system, _address_space_left()) if b is not None]
    limit = _memory_limit
    resident = None if limit is None else _resident_bytes()
    if limit is not None and resident is not None:
        known.append(max(limit - resident + retained, 0))
    return min(known) if known else None


def format_bytes(num_bytes: float) -> str:
    for unit in ('bytes', 'KB', 'MB', 'GB', 'TB'):
        if num_bytes < 1000 or unit == 'TB':
            break
        num_bytes /= 1000
    return f'{num_bytes:.0f} {unit}' if unit == 'bytes' else \
        f'{num_bytes:.1f} {unit}'


def check_memory(needed: float, what: str):
    r"""Raises :class:`ResourceError` if :obj:`needed` bytes exceed
    :func:`available_memory`; :obj:`what` names the setting."""
    available = available_memory()
    if available is not None and needed > available:
        raise ResourceError(
            f'{what} needs about {format_bytes(needed)} of memory; '
            f'{format_bytes(available)} is available')


def parameter_bytes(build: Callable[[], torch.nn.Module]) -> int:
    r"""The bytes of the parameters of the module :obj:`build()` returns,
    built on the :obj:`meta` device (no memory is allocated)."""
    with torch.device('meta'):
        module = build()
    return sum(p.numel() * p.element_size() for p in module.parameters())


#: Copies of the parameters a training run holds: the weights, their
#: gradients, Adam's two moments and the best weights.
PARAMETER_COPIES = 5


#: The most training queries :func:`training_estimate` runs a probe step on.
PROBE_QUERIES = 32
#: How many times a probe's expected bytes must fit in the memory available
#: for it to run.
PROBE_MARGIN = 2.


def _extended(probes: List[Tuple[int, int]], size: int) -> float:
    # The bytes of `size` queries: the smallest probe (query count, bytes)
    # of at least that many queries, else the last probe scaled by the
    # queries.  The bytes per query fall as the queries grow (their
    # reachable sets overlap): scaled, the last probe lies above them (a
    # line through the last two probes need not: on Family at L = 4 it
    # falls short of 64 queries by 4 %).
    above = [saved for queries, saved in probes if queries >= size]
    if above:
        return min(above)
    queries, saved = probes[-1]
    return saved * size / queries


def _status_bytes(field: str) -> int:
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1]) * 1024
    raise ValueError(field)


#: The process's peak resident set before :func:`resident_peak` last reset
#: it (:func:`process_peak`).
_earlier_peak = 0


def process_peak() -> Optional[int]:
    r"""The process's peak resident set in bytes since it started
    (:obj:`None` where the system does not say), counting what
    :func:`resident_peak` resets (Linux's :obj:`VmHWM`, and with it
    :obj:`getrusage`'s :obj:`ru_maxrss`)."""
    try:
        return max(_earlier_peak, _status_bytes('VmHWM'))
    except (OSError, ValueError):
        return None


def resident_peak(run: Callable[[], None]) -> Optional[int]:
    r"""The bytes by which the process's resident set grows at its peak
    while :obj:`run()` runs, from the freed memory handed back first
    (:func:`~pyg_degreembed.training.runtime.trim_freed_memory`): Linux's
    :obj:`VmHWM`, reset through :obj:`/proc/self/clear_refs`.  Where the
    system does not let it be measured, :obj:`None`, and :obj:`run` is not
    called."""
    from pyg_degreembed.training.runtime import trim_freed_memory
    global _earlier_peak
    trim_freed_memory()
    try:
        _earlier_peak = max(_earlier_peak, _status_bytes('VmHWM'))
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        before = _status_bytes('VmRSS')
    except (OSError, ValueError):
        return None
    run()
    return max(_status_bytes('VmHWM') - before, 0)


def _not_unpacked(packed):
    raise RuntimeError('a memory probe has no backward pass')


def training_estimate(model, graph, queries,
                      batch_size: int) -> Callable[[int], int]:
    r"""The memory :func:`~pyg_degreembed.fit` needs for :obj:`model`, as a
    function of the batch size up to :obj:`batch_size`:
    :data:`PARAMETER_COPIES` copies of its parameters and the peak of a
    training step of that many queries, forward and backward, measured
    (:func:`resident_peak`; where the system does not say, twice the
    tensors the forward pass saves for the backward pass, which the step's
    temporaries can exceed: a step on 10M triples peaks at 2.4 times them).
    Probe steps run on :math:`b` random :obj:`queries` :obj:`(head,
    relation, tail)` (seeded), first 1, then the largest of :math:`\min(`
    batch, :data:`PROBE_QUERIES` :math:`)` and the powers of two below it,
    down to twice the last, whose bytes, scaled from the last,
    :data:`PROBE_MARGIN` times fit in :func:`available_memory` (on a small
    KG two probes, on a large one doubling): a batch reads the smallest
    probe at least its size, or the last probe scaled by the batch beyond
    them (an upper estimate: the bytes per query fall as the batch grows).
    The probes leave the parameters' gradients as they were."""
    from pyg_degreembed.training.loop import nll_loss
    params = list(model.parameters())
    # Random queries, as a batch draws them (the first ones of a KG's
    # triples need not be typical), the same in every run.
    target = min(batch_size, PROBE_QUERIES)
    drawn = torch.randperm(queries[0].numel(), generator=torch.Generator(
    ).manual_seed(0))[:target].to(queries[0].device)
    queries = [q[drawn] for q in queries]
    own = {p.untyped_storage().data_ptr() for p in params}

    def saved_by(size: int) -> int:
        storages = {}

        def pack(tensor):
            # Held here until the probe ends, as a backward pass would hold
            # them (their memory is not reused within the forward pass),
            # and not returned: what the hook returns outlives the forward
            # pass (a custom autograd function's saved tensors: 4 GB per
            # probe of 32 queries on a 1M-triple KG).
            storage = tensor.untyped_storage()
            if storage.data_ptr() not in own:
                storages[storage.data_ptr()] = storage
            return None

        with torch.autograd.graph.saved_tensors_hooks(pack, _not_unpacked):
            model.score(graph, *(q[:size] for q in queries))
        return sum(storage.nbytes() for storage in storages.values())

    def step_bytes(size: int) -> int:
        def step():
            nll_loss(model.score(graph, *(q[:size] for q in queries))
                     ).backward()

        grads = [p.grad for p in params]
        for p in params:
            p.grad = None
        try:
            with torch.enable_grad():
                peak = resident_peak(step)
                return 2 * saved_by(size) if peak is None else peak
        finally:
            for p, grad in zip(params, grads):
                p.grad = grad

    probes = [(1, step_bytes(1))]
    while probes[-1][0] < target:
        # The largest of the target and the powers of two below it, down
        # to twice the last probe, whose bytes fit with the margin.
        last, available = probes[-1][0], available_memory(trimmed=True)
        sizes = [target] + [1 << k for k in range(
            (target - 1).bit_length() - 1, last.bit_length() - 1, -1)]
        fits = [size for size in sizes if available is None or
                PROBE_MARGIN * _extended(probes, size) <= available]
        if not fits:
            break
        probes.append((fits[0], step_bytes(fits[0])))
    copies = PARAMETER_COPIES * sum(p.numel() * p.element_size()
                                    for p in params)
    return lambda batch: copies + int(_extended(probes, batch))


def _local_processes() -> int:
    # The processes of this job on this machine, which share its memory.
    from pyg_degreembed.training.distributed import world
    processes = world()[0]
    return int(os.environ.get('LOCAL_WORLD_SIZE', processes)) \
        if processes > 1 else 1


def ranking_batch(bytes_per_query: float, batch_size: int) -> int:
    r"""The queries a ranking batch may take, at least 1 and at most
    :obj:`batch_size`: as many as fit, at :obj:`bytes_per_query` each (the
    peak of a batch of one query, :func:`resident_peak`: an upper estimate
    per query of larger batches, whose queries share work), in 90 % of
    :func:`available_memory` (trimmed; under :obj:`torchrun`, this
    process's part of what the processes on the machine share)."""
    available = available_memory(trimmed=True, sharers=_local_processes())
    if available is None or bytes_per_query <= 0:
        return batch_size
    fits = int(0.9 * available / bytes_per_query)
    return max(1, min(batch_size, fits))


def training_batch(model, data, batch_size: int,
                   automatic: bool = False) -> int:
    r"""The batch size a training run of :obj:`model` on :obj:`data` can
    take, checked before any work (:func:`training_estimate` on the KG's
    training queries): :obj:`batch_size` where it fits; with
    :obj:`automatic`, else the largest power of two below it that fits.
    Raises :class:`ResourceError` where none does (or, without
    :obj:`automatic`, where :obj:`batch_size` does not).  Under
    :obj:`torchrun` each of :math:`W` processes takes every :math:`W`-th
    query of a batch, and the processes on one machine
    (:obj:`LOCAL_WORLD_SIZE`) share its memory: each probes its share, one
    process at a time, and may use its part of what is available; they take
    the smallest batch any chose."""
    from pyg_degreembed.data.convert import as_kg
    from pyg_degreembed.data.kg import split_triples
    from pyg_degreembed.evaluation.ranks import both_directions
    from pyg_degreembed.training.distributed import (all_reduce_number,
                                                     one_at_a_time, world)
    kg = as_kg(data)
    graph = model.graph(kg)
    queries = both_directions(split_triples(kg, 'train'), kg.num_relations)
    queries = [q.to(graph.device) for q in queries]
    processes, local = world()[0], _local_processes()

    def share(batch: int) -> int:  # this process's queries of a batch
        return -(-batch // processes)

    def available_here() -> Optional[int]:
        return available_memory(trimmed=True, sharers=local)

    def choose() -> Tuple[int, Callable[[int], int]]:
        # The batch and the memory estimate of this process's share; the
        # memory available measured after the probes (the graph and its
        # degree sets now built).
        estimate = training_estimate(model, graph, queries,
                                     share(batch_size))
        chosen = batch_size
        available = available_here()
        while automatic and available is not None and chosen > 1 and \
                estimate(share(chosen)) > 0.9 * available:
            chosen = 1 << ((chosen - 1).bit_length() - 1)  # the power below
        return chosen, estimate

    chosen, estimate = one_at_a_time(choose)
    # The processes take the smallest batch any chose.
    chosen = int(all_reduce_number(chosen, 'min'))
    check_memory(estimate(share(chosen)) * local,
                 f'Training with batch_size={chosen} and '
                 f'num_steps={model.num_steps} on {kg.num_nodes} entities' +
                 (f' in {local} processes' if local > 1 else ''))
    return chosen
