r"""Multi-process training and evaluation on :mod:`torch.distributed`.

Launch one process per device, e.g. :obj:`torchrun --nproc_per_node=2 -m
pyg_degreembed.cli train ...`; :func:`~pyg_degreembed.fit` and
:func:`~pyg_degreembed.compute_ranks` notice an initialised process group:

* every global batch (the same shuffled order on every process) is split
  between the processes; each computes the loss of its share divided by the
  global batch size, and the gradients are summed with :func:`all_reduce`,
  so the update equals the single-process one for the same global batch;
* evaluation triples are split between the processes and the ranks gathered
  in the single-process order;
* the sampled rule miner
  (:func:`~pyg_degreembed.interpret.sampled_rules.sample_rule_counts`)
  splits the triples it searches and the candidates it scores, and every
  process gets all the rules;
* checkpoints are written by process 0 only.
"""
from typing import Callable, List, Tuple, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

T = TypeVar('T')


def world() -> Tuple[int, int]:
    r"""(number of processes, this process's index, i.e. its
    :mod:`torch.distributed` rank, not the rule rank :math:`T`);
    :obj:`(1, 0)` without an initialised process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def init_from_env() -> bool:
    r"""Initialises the process group when launched by :obj:`torchrun`
    (:obj:`WORLD_SIZE > 1`): NCCL when CUDA is available, else gloo.
    Returns whether it did."""
    import os
    if int(os.environ.get('WORLD_SIZE', '1')) <= 1 or dist.is_initialized():
        return False
    backend = 'nccl' if torch.cuda.is_available() else 'gloo'
    dist.init_process_group(backend)
    if backend == 'nccl':
        torch.cuda.set_device(int(os.environ.get('LOCAL_RANK', '0')))
    return True


def broadcast_parameters(module: torch.nn.Module):
    r"""Makes every process start from process 0's weights."""
    if world()[0] > 1:
        for tensor in module.state_dict().values():
            dist.broadcast(tensor, src=0)


def all_reduce_gradients(module: torch.nn.Module):
    r"""Sums the gradients over the processes (missing gradients count as
    zero, so that every process takes part in every reduction)."""
    if world()[0] == 1:
        return
    for param in module.parameters():
        if not param.requires_grad:
            continue
        if param.grad is None:
            param.grad = torch.zeros_like(param)
        dist.all_reduce(param.grad)


#: The reductions of :func:`all_reduce_number`.
REDUCTIONS = {'sum': dist.ReduceOp.SUM, 'min': dist.ReduceOp.MIN,
              'max': dist.ReduceOp.MAX}


def collective_device() -> torch.device:
    r"""Where the process group's collectives take their tensors: the
    current CUDA device under NCCL, else the CPU."""
    if world()[0] > 1 and dist.get_backend() == 'nccl':
        return torch.device('cuda', torch.cuda.current_device())
    return torch.device('cpu')


def all_reduce_number(value: float, reduction: str = 'sum') -> float:
    r"""The sum (or :obj:`"min"`, :obj:`"max"`) of a number over the
    processes."""
    if world()[0] == 1:
        return value
    tensor = torch.tensor([value], dtype=torch.double,
                          device=collective_device())
    dist.all_reduce(tensor, REDUCTIONS[reduction])
    return float(tensor)


def one_at_a_time(function: Callable[[], T]) -> T:
    r"""Runs :obj:`function` in each process in turn (process 0 first,
    the others waiting), e.g. a probe of the memory that the processes of
    one machine would otherwise take at once; returns its result."""
    num_processes, process = world()
    if num_processes == 1:
        return function()
    for turn in range(num_processes):
        if turn == process:
            result = function()
        dist.barrier()
    return result


def all_gather_tensors(tensor: Tensor) -> List[Tensor]:
    r"""Every process's 1-D tensor (their lengths may differ), in process
    order (:obj:`[tensor]` without a process group)."""
    num_processes = world()[0]
    if num_processes == 1:
        return [tensor]
    device = collective_device()
    size = torch.tensor([tensor.numel()], device=device)
    sizes = [torch.zeros_like(size) for _ in range(num_processes)]
    dist.all_gather(sizes, size)
    padded = tensor.new_zeros(max(int(s) for s in sizes), device=device)
    padded[:tensor.numel()] = tensor
    parts = [torch.empty_like(padded) for _ in range(num_processes)]
    dist.all_gather(parts, padded)
    return [part[:int(s)].to(tensor.device)
            for part, s in zip(parts, sizes)]


def gather_strided(parts, num_processes: int):
    r"""Undoes a strided split :obj:`x[process::num_processes]` of a 1-D
    tensor given the parts of every process (in process order)."""
    total = sum(p.numel() for p in parts)
    out = parts[0].new_empty(total)
    for process, part in enumerate(parts):
        out[process::num_processes] = part
    return out
