"""Seconds per training epoch with the paper's settings (L = 2, T = 3,
128-d, batch 128, both query directions, per-query edge removal, nll loss).

    python benchmarks/epoch_time.py [--dataset family] [--epochs 3]
    python benchmarks/epoch_time.py --dataset ../shared/datasets/fb15k-237 --batches 20

Writes benchmarks/results/epoch_time_<dataset>.json.  Only the training
loop is timed (no validation).  With --batches N, N batches are timed after
one warm-up batch and the epoch time is extrapolated (marked as such): for
KGs whose epochs take many minutes.  DegreEmbed and DRUM are timed in the
same run, so their ratio is meaningful; absolute times vary with load.
"""
import argparse
import os
import resource
import statistics
import time

import torch
from torch_geometric import seed_everything

from common import machine, write_json
from pyg_degreembed import (DegreEmbedReasoner, RuleReasoner, TypedGraph,
                            retain_freed_memory)
from pyg_degreembed.datasets import load_dataset
from pyg_degreembed.evaluation import both_directions
from pyg_degreembed.kg import split_triples
from pyg_degreembed.training import nll_loss

parser = argparse.ArgumentParser()
parser.add_argument('--dataset', default='family')
parser.add_argument('--epochs', type=int, default=3)
parser.add_argument('--batches', type=int, default=0,
                    help='time this many batches and extrapolate')
parser.add_argument('--mode', default='auto')
args = parser.parse_args()
retain_freed_memory()

data = load_dataset(args.dataset)
name = os.path.basename(os.path.normpath(args.dataset))
graph = TypedGraph(data.edge_index, data.edge_type, data.num_nodes,
                   2 * data.num_relations)
head, relation, tail = both_directions(split_triples(data, 'train'),
                                       data.num_relations)
num_batches = (head.numel() + 127) // 128
result = {'dataset': name, 'queries_per_epoch': head.numel(),
          'batches_per_epoch': num_batches, 'batch_size': 128,
          'mode': args.mode, 'machine': machine(), 'models': {}}


def step(model, optimizer, index):
    h, q, t = head[index], relation[index], tail[index]
    loss = nll_loss(model.score(graph, h, q, t, mode=args.mode))
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    optimizer.step()


for label, cls in (('DegreEmbed', DegreEmbedReasoner),
                   ('DRUM', RuleReasoner)):
    seed_everything(0)
    model = cls(data.num_relations, num_steps=2, rank=3, embedding_dim=128,
                hidden_channels=128)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    batches = torch.randperm(head.numel(), generator=generator).split(128)
    if args.batches:
        step(model, optimizer, batches[0])  # warm-up
        times = []
        for index in batches[1:args.batches + 1]:
            start = time.perf_counter()
            step(model, optimizer, index)
            times.append(time.perf_counter() - start)
        per_batch = statistics.median(times)
        entry = {'seconds_per_batch': per_batch,
                 'batch_seconds': times,
                 'median_seconds': per_batch * num_batches,
                 'extrapolated_from_batches': len(times)}
        print(f'{label:10s} {per_batch:.3f}s per batch, about '
              f'{per_batch * num_batches / 60:.1f} min per epoch '
              f'(extrapolated)')
    else:
        times = []
        for epoch in range(args.epochs):
            start = time.perf_counter()
            for index in torch.randperm(head.numel(),
                                        generator=generator).split(128):
                step(model, optimizer, index)
            times.append(time.perf_counter() - start)
            print(f'{label:10s} epoch {epoch + 1}: {times[-1]:.2f}s')
        entry = {'epoch_seconds': times,
                 'median_seconds': statistics.median(times)}
    result['models'][label] = entry
result['peak_rss_gb'] = resource.getrusage(
    resource.RUSAGE_SELF).ru_maxrss / 1e6
ratio = (result['models']['DegreEmbed']['median_seconds'] /
         result['models']['DRUM']['median_seconds'])
result['degreembed_over_drum'] = ratio
print(f'DegreEmbed / DRUM time ratio: {ratio:.2f}; peak RSS '
      f"{result['peak_rss_gb']:.2f} GB")
print('wrote', write_json(f'epoch_time_{name}.json', result))
