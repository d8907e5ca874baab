"""Seconds per training epoch with the paper's settings (L = 2, T = 3,
128-d, batch 128, both query directions, per-query edge removal).

    python benchmarks/epoch_time.py [--dataset family] [--epochs 3]

Writes benchmarks/results/epoch_time_<dataset>.json.  Only the training
loop is timed (no validation).  DegreEmbed and DRUM are timed in the same
run, so their ratio is meaningful; absolute times vary with machine load.
"""
import argparse
import statistics
import time

import torch
from torch_geometric import seed_everything

from common import machine, write_json
from pyg_degreembed import DegreEmbedReasoner, RuleReasoner, TypedGraph
from pyg_degreembed.datasets import load_dataset
from pyg_degreembed.evaluation import both_directions
from pyg_degreembed.kg import split_triples
from pyg_degreembed.training import nll_loss

parser = argparse.ArgumentParser()
parser.add_argument('--dataset', default='family')
parser.add_argument('--epochs', type=int, default=3)
parser.add_argument('--mode', default='auto')
args = parser.parse_args()

data = load_dataset(args.dataset)
graph = TypedGraph(data.edge_index, data.edge_type, data.num_nodes,
                   2 * data.num_relations)
head, relation, tail = both_directions(split_triples(data, 'train'),
                                       data.num_relations)
result = {'dataset': args.dataset, 'queries_per_epoch': head.numel(),
          'batch_size': 128, 'mode': args.mode, 'machine': machine(),
          'models': {}}
for name, cls in (('DegreEmbed', DegreEmbedReasoner), ('DRUM', RuleReasoner)):
    seed_everything(0)
    model = cls(data.num_relations, num_steps=2, rank=3, embedding_dim=128,
                hidden_channels=128)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    times = []
    for epoch in range(args.epochs):
        start = time.perf_counter()
        for index in torch.randperm(head.numel(),
                                    generator=generator).split(128):
            h, q, t = head[index], relation[index], tail[index]
            loss = nll_loss(model.score(graph, h, q, t, mode=args.mode))
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            optimizer.step()
        times.append(time.perf_counter() - start)
        print(f'{name:10s} epoch {epoch + 1}: {times[-1]:.2f}s')
    result['models'][name] = {'epoch_seconds': times,
                              'median_seconds': statistics.median(times)}
ratio = (result['models']['DegreEmbed']['median_seconds'] /
         result['models']['DRUM']['median_seconds'])
result['degreembed_over_drum'] = ratio
print(f'DegreEmbed / DRUM time ratio: {ratio:.2f}')
print('wrote', write_json(f'epoch_time_{args.dataset}.json', result))
