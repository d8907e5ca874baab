"""Training speed on a machine shared with another busy process.

    python benchmarks/shared_machine.py [--dataset family] [--batches 30]

Times DegreEmbed training steps (paper settings, batch 128) in fresh
processes, alone and while one competing CPU-bound process runs (a NumPy
2000 x 2000 matrix product in a loop, using every core), in four
configurations: PyTorch's defaults (every core, GNU OpenMP's spin count of
300000), GOMP_SPINCOUNT=1000 (threads sleep soon when they wait), one
thread, and the defaults with the library's ThreadGuard (what fit() does:
one thread when a probe step shows it at least 1.5 times as fast).  A run that
does not finish its batches within --cap seconds is reported as at least
that slow.  Writes
benchmarks/results/shared_machine.{json,md}.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from common import machine, write_json, write_markdown

STEP = r'''
import os, sys, time
import torch
if sys.argv[3] != 'all':
    torch.set_num_threads(int(sys.argv[3]))
import pyg_degreembed
from torch_geometric import seed_everything
from pyg_degreembed import DegreEmbedReasoner
from pyg_degreembed.data.datasets import load_dataset
from pyg_degreembed.evaluation.ranks import both_directions
from pyg_degreembed.data.kg import split_triples
from pyg_degreembed.training.loop import nll_loss
data = load_dataset(sys.argv[1])
seed_everything(0)
model = DegreEmbedReasoner(data.num_relations)
graph = model.graph(data)
h, q, t = both_directions(split_triples(data, 'train'), data.num_relations)
opt = torch.optim.Adam(model.parameters(), 1e-3)
batches = torch.randperm(
    h.numel(), generator=torch.Generator().manual_seed(0)).split(128)
from pyg_degreembed.training.threads import ThreadGuard, training_probe
first = batches[0]
guard = ThreadGuard(training_probe(model, graph, h[first], q[first],
                                   t[first]), enabled=sys.argv[4] == 'guard')
def step(i):
    start = time.perf_counter()
    loss = nll_loss(model.score(graph, h[i], q[i], t[i]))
    opt.zero_grad(); loss.backward(); opt.step()
    guard.step(time.perf_counter() - start)
with guard:  # decides before the first step, as in fit()
    for i in batches[:3]:
        step(i)
    for n, i in enumerate(batches[3:3 + int(sys.argv[2])], start=1):
        start = time.perf_counter(); step(i)
        print(time.perf_counter() - start, flush=True)
'''

COMPETITOR = ('import numpy as np\na = np.random.rand(2000, 2000)\n'
              'while True:\n    a @ a\n')


CONFIGURATIONS = (('default', None, 'all', ''),
                  ('GOMP_SPINCOUNT=1000', 1000, 'all', ''),
                  ('one thread', None, '1', ''),
                  ('default + ThreadGuard (fit)', None, 'all', 'guard'))


def measure(dataset, batches, spin, threads, guard, cap):
    env = dict(os.environ)
    env.pop('GOMP_SPINCOUNT', None)
    env.pop('OMP_WAIT_POLICY', None)
    if spin is not None:
        env['GOMP_SPINCOUNT'] = str(spin)
    proc = subprocess.Popen([sys.executable, '-c', STEP, dataset,
                             str(batches), threads, guard or 'none'],
                            env=env,
                            stdout=subprocess.PIPE, text=True)
    times, start = [], time.perf_counter()
    try:
        out, _ = proc.communicate(timeout=cap)
        times = [float(x) for x in out.split()]
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        times = [float(x) for x in out.split()]
    wall = time.perf_counter() - start
    done = len(times)
    per_batch = sum(times) / done if done == batches else \
        max(cap - 10, 1) / max(done, 1)  # lower bound when cut off
    return {'threads': threads, 'spin_count': spin, 'batches_done': done,
            'batches': batches,
            'seconds_per_batch': per_batch, 'complete': done == batches,
            'wall_seconds': wall, 'batch_seconds': times}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--dataset', default='family')
    parser.add_argument('--batches', type=int, default=30)
    parser.add_argument('--cap', type=float, default=120)
    args = parser.parse_args()
    rows = []
    for competing in (False, True):
        competitor = subprocess.Popen([sys.executable, '-c', COMPETITOR]) \
            if competing else None
        try:
            time.sleep(2 if competing else 0)
            for label, spin, threads, guard in CONFIGURATIONS:
                run = measure(args.dataset, args.batches, spin, threads,
                              guard, args.cap)
                run['configuration'] = label
                run['competing_process'] = competing
                rows.append(run)
                print(json.dumps({k: v for k, v in run.items()
                                  if k != 'batch_seconds'}), flush=True)
        finally:
            if competitor is not None:
                competitor.kill()
                competitor.wait()
    write_json('shared_machine.json', {'dataset': args.dataset,
                                       'machine': machine(), 'runs': rows})
    alone = {r['configuration']: r['seconds_per_batch'] for r in rows
             if not r['competing_process']}
    lines = [f'DegreEmbed training step on {args.dataset} (batch 128), '
             f"{machine()['cores']} cores, {machine()['cpu']}:", '',
             '| OpenMP configuration | alone | with one competing process | '
             'ratio |', '|---|---|---|---|']
    for label, *_ in CONFIGURATIONS:
        loaded = next(r for r in rows if r['competing_process'] and
                      r['configuration'] == label)
        bound = '' if loaded['complete'] else '> '
        lines.append(
            f"| {label} | {1e3 * alone[label]:.0f} ms | {bound}"
            f"{1e3 * loaded['seconds_per_batch']:.0f} ms | {bound}"
            f"x{loaded['seconds_per_batch'] / alone[label]:.1f} |")
    write_markdown('shared_machine.md', '\n'.join(lines), 'shared_machine.py')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
