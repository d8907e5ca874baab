"""Where the time of a training step goes: torch.profiler over one step
(after warm-up steps) of an untrained model on --device, the operators by
their own time on that device.

    python benchmarks/profile_step.py --dataset ../shared/datasets/fb15k-237 \
        --model degreembed --num-steps 3 --device cuda

A step is what ab_steps.py times: the negative log-likelihood of a batch of
--batch-size (128) training queries, each without its own edge, backward
and an Adam update.  Below the operators, the step's parts (the forward
pass's rho, hops and attention, the backward pass, the update) with the
time spent in each on the host and on the device, from profiler ranges
around those methods.  Freed memory is kept for reuse, as the command line
does (retain_freed_memory()).  Writes
results/profile_step_<dataset>_<model>_L<L>_<device>.txt.
"""
import argparse
import functools
import os

import torch
from torch_geometric import seed_everything

from pyg_degreembed import (DegreEmbedReasoner, DegreeEmbedding,
                            RuleReasoner, TypedGraph, resolve_graph,
                            retain_freed_memory)
from pyg_degreembed.data.kg import split_triples
from pyg_degreembed.evaluation.ranks import both_directions
from pyg_degreembed.training.files import atomic_write
from pyg_degreembed.training.loop import nll_loss

from common import RESULTS, load_benchmark, machine

MODELS = {'drum': RuleReasoner, 'degreembed': DegreEmbedReasoner}
# The parts of a step shown on their own: (class, method) profiled as a
# range named after them.
PARTS = [(RuleReasoner, 'operator_attention'),
         (RuleReasoner, 'source_weights'), (TypedGraph, 'neighborhood'),
         (TypedGraph, 'edge_range'), (TypedGraph, 'degree_without'),
         (DegreeEmbedding, 'embed_sets'), (TypedGraph, 'propagate')]


def profiled(cls, name):
    function = getattr(cls, name)

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with torch.profiler.record_function(f'part: {cls.__name__}.{name}'):
            return function(*args, **kwargs)
    return wrapper


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--dataset', default='umls')
    parser.add_argument('--model', choices=list(MODELS), default='degreembed')
    parser.add_argument('--num-steps', type=int, default=2)
    parser.add_argument('--batch-size', type=int, default=128)
    parser.add_argument('--device', default='cpu')
    args = parser.parse_args()
    retain_freed_memory()  # as the command line does
    device = torch.device(args.device)
    data = load_benchmark(args.dataset)
    graph = resolve_graph(data, num_relations=data.num_relations,
                          device=device)
    seed_everything(0)
    model = MODELS[args.model](data.num_relations,
                               num_steps=args.num_steps).to(device)
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)
    h, q, t = (x.to(device) for x in both_directions(
        split_triples(data, 'train'), data.num_relations))
    batches = torch.randperm(h.numel(), generator=torch.Generator()
                             .manual_seed(0)).split(args.batch_size)

    def step(i):
        with torch.profiler.record_function('part: forward'):
            loss = nll_loss(model.score(graph, h[i], q[i], t[i]))
        optimizer.zero_grad()
        with torch.profiler.record_function('part: backward'):
            loss.backward()
        with torch.profiler.record_function('part: update'):
            optimizer.step()

    for cls, name in PARTS:
        setattr(cls, name, profiled(cls, name))
    for i in batches[:3]:
        step(i)
    cuda = device.type == 'cuda'
    activities = [torch.profiler.ProfilerActivity.CPU]
    if cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
        torch.cuda.synchronize(device)
    with torch.profiler.profile(activities=activities) as prof:
        step(batches[3])
        if cuda:
            torch.cuda.synchronize(device)
    sort = 'self_cuda_time_total' if cuda else 'self_cpu_time_total'
    events = prof.key_averages()
    table = events.table(sort_by=sort, row_limit=20)
    # The ranges as the host saw them (on a GPU the profiler lists them a
    # second time as spans of the device's timeline).
    parts = [e for e in events
             if e.key.startswith('part: ') and e.cpu_time_total > 0]
    device_time = 'device_time_total' if hasattr(
        parts[0], 'device_time_total') else 'cuda_time_total'
    lines = ['| part | calls | host ms | device ms (kernels launched inside) '
             '|', '|---|---|---|---|'] + [
        f'| {e.key[6:]} | {e.count} | {e.cpu_time_total / 1e3:.2f} | '
        f'{getattr(e, device_time) / 1e3:.2f} |'
        for e in sorted(parts, key=lambda e: -e.cpu_time_total)]
    table += '\n\n' + '\n'.join(lines)
    name = os.path.basename(os.path.normpath(args.dataset))
    path = os.path.join(
        RESULTS, f'profile_step_{name}_{args.model}_L{args.num_steps}_'
        f"{args.device.replace(':', '')}.txt")
    text = f'{machine()}\n\n{table}\n'
    atomic_write(path, lambda f: f.write(text), binary=False)
    print(table)
    print('wrote', path)


if __name__ == '__main__':
    main()
