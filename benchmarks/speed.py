"""Speed per dataset: training epoch, evaluation throughput, peak RSS, and
the propagation kernel alone.

    python benchmarks/speed.py                      # every dataset found
    python benchmarks/speed.py --datasets family fb15k-237 --batches 30
    python benchmarks/speed.py --device cuda        # on a GPU

On a device other than the CPU (--device cuda), the epoch, the evaluation
and the kernel are timed with the device synchronised, peak GPU memory is
reported instead of the allocator and competing-process columns (they are
about CPU threads and the CPU heap), and the results go to
speed_<device>.json / .md (e.g. speed_cuda.md), apart from the CPU table.

For each dataset, model (DegreEmbed, DRUM) and rule length of
--rule-lengths (2, the paper's, and 3; rows "DegreEmbed L=3" ...; otherwise
the paper's settings: T = 3, 128-d, batch 128, both query directions, nll
loss, Adam, clipping):

* seconds per training epoch: a full epoch where it has at most
  --full-epoch-batches batches, else --batches timed batches (after three
  warm-up batches) extrapolated to the epoch (marked as such);
* a full filtered test evaluation (both directions, batch 256): seconds and
  queries per second;
* the propagation kernel alone (TypedGraph.propagate, forward + backward)
  for the first and second hop of a training batch of 128 queries x T, in
  frontier ("sparse") and "dense" mode;
* peak RSS of the process (each dataset runs in its own process);
* the training epoch again while one competing CPU-bound process runs (a
  NumPy matrix product in a loop on every core), with the thread guard that
  fit() uses (pyg_degreembed.training.threads), and its ratio to the epoch
  alone.

Datasets not named on the command line keep their last results in
speed.json (each entry records its machine and commit).

Every dataset is measured with retain_freed_memory() (what the command
line does); the training epoch is also timed with the allocator's defaults,
in the same run, and the ratio is reported.  torch-scatter / torch-sparse
are reported when installed, but no code path of the package calls them
(its kernels are torch's own index_add / sparse CSR products), so there is
no "with accelerators" column.
Writes benchmarks/results/speed.json and speed.md, and the table in
README.md.
"""
import argparse
import importlib.util
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

import torch
from torch_geometric import seed_everything

from pyg_degreembed import (DegreEmbedReasoner, RuleReasoner, Signals,
                            compute_ranks, retain_freed_memory)
from pyg_degreembed.data.datasets import BUNDLED
from pyg_degreembed.data.kg import split_triples
from pyg_degreembed.data.typed_graph import SourceWeights
from pyg_degreembed.evaluation.ranks import both_directions
from pyg_degreembed.training.loop import nll_loss
from pyg_degreembed.training.threads import ThreadGuard, training_probe

from common import (RESULTS, SHARED, load_benchmark, machine, peak_rss_gb,
                    update_readme, write_json, write_markdown)

MODELS = (('DegreEmbed', DegreEmbedReasoner), ('DRUM', RuleReasoner))
DATASETS = list(BUNDLED) + ['wn18', 'fb15k-237']


def synchronize(device: torch.device):
    r"""Waits for the device's queued work (the timers read the host)."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


class NoGuard:
    r"""Stands in for the thread guard off the CPU."""
    current = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def step(self, seconds):
        pass


def time_training(model, data, queries, args):
    head, relation, tail = queries
    device = head.device
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    batches = [b.to(device) for b in torch.randperm(
        head.numel(), generator=generator).split(128)]
    first = batches[0]

    # As in fit(): one thread while another process competes for the cores.
    guard = ThreadGuard(training_probe(model, data, head[first],
                                       relation[first], tail[first])) \
        if device.type == 'cpu' else NoGuard()

    def step(index):
        start = time.perf_counter()
        loss = nll_loss(model.score(data, head[index], relation[index],
                                    tail[index]))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        synchronize(device)
        guard.step(time.perf_counter() - start)

    warm_up = 3  # the first steps also grow the heap
    with guard:
        for index in batches[:warm_up]:
            step(index)
        if len(batches) <= args.full_epoch_batches:
            synchronize(device)
            start = time.perf_counter()
            for index in batches:
                step(index)
            return {'epoch_seconds': time.perf_counter() - start,
                    'extrapolated': False, 'threads_at_end': guard.current}
        times = []
        for index in batches[warm_up:warm_up + args.batches]:
            start = time.perf_counter()
            step(index)
            times.append(time.perf_counter() - start)
    per_batch = statistics.fmean(times)  # the epoch is the sum
    return {'epoch_seconds': per_batch * len(batches),
            'extrapolated': True, 'seconds_per_batch': per_batch,
            'timed_batches': len(times), 'batch_seconds': times,
            'threads_at_end': guard.current}


COMPETITOR = ('import numpy as np\na = np.random.rand(2000, 2000)\n'
              'while True:\n    a @ a\n')


def time_training_with_competitor(cls, num_steps, data, queries, args):
    r"""The training epoch again, fresh model, while one CPU-bound process
    (a NumPy matrix product in a loop, every core) competes."""
    competitor = subprocess.Popen([sys.executable, '-c', COMPETITOR])
    try:
        time.sleep(2)
        seed_everything(0)
        model = cls(data.num_relations, num_steps=num_steps, rank=3)
        return time_training(model, data, queries, args)
    finally:
        competitor.kill()
        competitor.wait()


def time_evaluation(model, data):
    test = split_triples(data, 'test')
    start = time.perf_counter()
    compute_ranks(model, data, 'test', batch_size=256)  # ranks on the host
    seconds = time.perf_counter() - start
    return {'test_queries': 2 * test.size(1), 'test_seconds': seconds,
            'queries_per_second': 2 * test.size(1) / seconds}


def time_kernel(model, data, queries, repeats=5):
    r"""Forward + backward of each hop, the signals of a training batch
    (128 queries x T columns) with the model's attention and rho."""
    graph = model.graph(data)
    head, relation, _ = (q[:128] for q in queries)
    K, T = graph.num_edge_types, model.rank
    with torch.no_grad():
        attention = model.operator_attention(relation)  # [B, T, L, K + 1]
        rho = model.source_weights(graph)
    a = attention.flatten(0, 1).permute(1, 2, 0)  # [L, K + 1, C]
    out = {}
    for mode in ('sparse', 'dense'):
        x = Signals.one_hot(head.repeat_interleave(T),
                            torch.ones(head.numel() * T, device=head.device))
        for hop in range(a.size(0)):
            weight = a[hop].clone().requires_grad_()
            edge_rho = None if rho is None else SourceWeights(
                rho.table.clone().requires_grad_(), rho.index)
            times = []
            for _ in range(repeats):
                synchronize(head.device)
                start = time.perf_counter()
                y = graph.propagate(x, weight[:K], edge_rho, weight[K],
                                    mode=mode)
                y.value.sum().backward()
                synchronize(head.device)
                times.append(time.perf_counter() - start)
            out[f'{mode}_hop{hop + 1}_seconds'] = statistics.median(times)
            out[f'hop{hop + 1}_entries'] = int(y.value.numel())
            x = Signals(y.node, y.column, y.value.detach(), y.num_columns)
    return out


def worker(dataset, args, training_only=False):
    device = torch.device(args.device)
    data = load_benchmark(dataset)
    queries = tuple(q.to(device) for q in both_directions(
        split_triples(data, 'train'), data.num_relations))
    result = {'dataset': dataset, 'num_nodes': data.num_nodes,
              'num_edges': int(data.edge_index.size(1)),
              'train_queries': int(queries[0].numel()), 'models': {},
              'device': str(device)}
    if device.type == 'cuda':
        result['gpu'] = torch.cuda.get_device_name(device)
    for num_steps, (label, cls) in itertools.product(args.rule_lengths,
                                                     MODELS):
        if num_steps != 2:
            label += f' L={num_steps}'
        seed_everything(0)
        model = cls(data.num_relations, num_steps=num_steps,
                    rank=3).to(device)
        if device.type == 'cuda':
            torch.cuda.reset_peak_memory_stats(device)
        entry = time_training(model, data, queries, args)
        if not training_only:
            entry.update(time_evaluation(model, data))
            entry['kernel'] = time_kernel(model, data, queries)
            if device.type == 'cpu':
                entry['competing'] = time_training_with_competitor(
                    cls, num_steps, data, queries, args)
        if device.type == 'cuda':
            entry['gpu_peak_memory_gb'] = \
                torch.cuda.max_memory_allocated(device) / 1e9
        result['models'][label] = entry
    result['peak_rss_gb'] = peak_rss_gb()
    return result


def kernel_cells(kernel, digits: int) -> str:
    r"""The frontier and dense hop times (ms) as two table cells."""
    return ' | '.join(
        f"{1e3 * kernel[f'{mode}_hop1_seconds']:.{digits}f} / "
        f"{1e3 * kernel[f'{mode}_hop2_seconds']:.{digits}f} ms"
        for mode in ('sparse', 'dense'))


def device_table(results):
    r"""The table of a run on a GPU: epoch, evaluation, kernel, memory."""
    lines = ['| KG | model | epoch | test evaluation | queries/s | '
             'hop 1 / hop 2, frontier (fwd+bwd) | hop 1 / hop 2, dense | '
             'peak GPU memory |', '|---' * 8 + '|']
    for dataset, runs in results.items():
        run = runs['retain']
        for label, m in run['models'].items():
            ext = ' (extrapolated)' if m['extrapolated'] else ''
            lines.append(
                f"| {dataset} | {label} | {m['epoch_seconds']:.1f} s{ext} | "
                f"{m['test_seconds']:.1f} s ({m['test_queries']} queries) | "
                f"{m['queries_per_second']:.0f} | "
                f"{kernel_cells(m['kernel'], 1)} | "
                f"{m['gpu_peak_memory_gb']:.2f} GB |")
    return '\n'.join(lines)


def table(results):
    lines = [
        '| KG | model | epoch | test evaluation | queries/s | peak RSS | '
        'hop 1 / hop 2, frontier (fwd+bwd) | hop 1 / hop 2, dense | '
        'epoch, default allocator | epoch next to a competing process |',
        '|---' * 10 + '|'
    ]

    def t(s):
        return f'{s / 60:.1f} min' if s >= 120 else f'{s:.1f} s'

    def competing(m):
        if 'competing' not in m:
            return 'not measured'
        c = m['competing']['epoch_seconds']
        return f"{t(c)} (x{c / m['epoch_seconds']:.2f})"

    for dataset, runs in results.items():
        fast, slow = runs['retain'], runs['default']
        for label in fast['models']:
            m, d = fast['models'][label], slow['models'][label]
            ext = ' (extrapolated)' if m['extrapolated'] else ''
            lines.append(
                f"| {dataset} | {label} | {t(m['epoch_seconds'])}{ext} | "
                f"{t(m['test_seconds'])} ({m['test_queries']} queries) | "
                f"{m['queries_per_second']:.0f} | "
                f"{fast['peak_rss_gb']:.2f} GB | "
                f"{kernel_cells(m['kernel'], 0)} | "
                f"{t(d['epoch_seconds'])} "
                f"(x{d['epoch_seconds'] / m['epoch_seconds']:.2f}) | "
                f"{competing(m)} |")
    return '\n'.join(lines)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--datasets', nargs='+', default=DATASETS,
                        choices=DATASETS)
    parser.add_argument('--batches', type=int, default=60,
                        help='batches timed where an epoch is not run whole')
    parser.add_argument('--full-epoch-batches', type=int, default=600)
    parser.add_argument('--rule-lengths', type=int, nargs='+',
                        default=[2, 3])
    parser.add_argument('--device', default='cpu',
                        help='cpu, cuda, cuda:1, ...')
    parser.add_argument('--worker', help=argparse.SUPPRESS)
    parser.add_argument('--allocator', choices=['retain', 'default'],
                        default='retain', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.allocator == 'retain':
            retain_freed_memory()
        print(json.dumps(worker(args.worker, args,
                                training_only=args.allocator == 'default')))
        return
    device = torch.device(args.device)
    name = 'speed' if device.type == 'cpu' else f'speed_{device.type}'
    allocators = ('retain', 'default') if device.type == 'cpu' else \
        ('retain', )
    # Datasets not measured this time keep their last results.
    path = os.path.join(RESULTS, f'{name}.json')
    results = json.load(open(path))['results'] if os.path.exists(path) \
        else {}
    for dataset in args.datasets:
        if dataset not in BUNDLED and \
                not os.path.isdir(os.path.join(SHARED, dataset)):
            print(f'{dataset}: skipped, no folder at {SHARED}')
            continue
        results[dataset] = {'machine': machine()}
        for allocator in allocators:
            out = subprocess.run(
                [sys.executable, __file__, '--worker', dataset,
                 '--allocator', allocator, '--batches', str(args.batches),
                 '--full-epoch-batches', str(args.full_epoch_batches),
                 '--rule-lengths', *map(str, args.rule_lengths),
                 '--device', args.device],
                capture_output=True, text=True)
            if out.returncode:
                raise SystemExit(f'{dataset}: the worker failed:\n'
                                 f'{out.stderr}')
            results[dataset][allocator] = json.loads(
                out.stdout.strip().splitlines()[-1])
            print(f'{dataset} ({allocator} allocator): ' + ', '.join(
                f"{k} {v['epoch_seconds']:.1f} s/epoch" for k, v in
                results[dataset][allocator]['models'].items()), flush=True)
    accelerators = {name: importlib.util.find_spec(name) is not None
                    for name in ('torch_scatter', 'torch_sparse')}
    if device.type != 'cpu':
        text = device_table(results)
        write_json(f'{name}.json', {'machine': machine(), 'results': results})
        gpu = next(iter(results.values()))['retain'].get('gpu', args.device)
        note = (f'Measured by `python benchmarks/speed.py --device '
                f'{args.device}` on {gpu} (host: {machine()["cpu"]}), torch '
                f'{torch.__version__} (`benchmarks/results/{name}.json`).')
        write_markdown(f'{name}.md', f'{text}\n\n{note}', 'speed.py')
        update_readme(name.replace('_', '-'), f'{text}\n\n{note}')
        print(text)
        return
    text = table(results)
    write_json('speed.json', {'machine': machine(),
                              'accelerators_installed': accelerators,
                              'results': results})
    note = (f"Measured by `python benchmarks/speed.py` on {machine()['cpu']}, "
            f"{os.cpu_count()} cores, torch {torch.__version__} "
            f"(`benchmarks/results/speed.json`; each dataset's entry records "
            f"the machine, commit and command of its run). \"epoch next to a "
            f"competing process\": the training epoch again while a NumPy "
            f"matrix-product loop runs on every core, and its ratio to the "
            f"epoch alone.")
    write_markdown('speed.md', f'{text}\n\n{note}', 'speed.py')
    update_readme('speed', f'{text}\n\n{note}')
    print(text)


if __name__ == '__main__':
    main()
