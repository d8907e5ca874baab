"""Ablation of the rank T of DegreEmbed (the paper's Fig. 7).

    python benchmarks/ablation_rank.py --datasets family kinship umls \\
        --ranks 1 2 3 4
    python benchmarks/ablation_rank.py --plot-only

Trains DegreEmbed with T = 1..4 (otherwise the paper's settings and the
protocol of reproduce.py: early stopping on validation MRR, patience 3) and
writes one JSON per run to benchmarks/results/ablation/, then
benchmarks/results/ablation_rank.png: (a) the training loss per epoch,
(b) test Hits@1/3/10 (filtered, realistic ties), and ablation_rank.md.
"""
import argparse
import glob
import json
import os

from reproduce import RULE_EPOCHS
from torch_geometric import seed_everything

from pyg_degreembed import DegreEmbedReasoner, retain_freed_memory

from common import (RESULTS, figure, fit_and_test, hits_bars, load_benchmark,
                    metric_cells, save_figure_and_table, save_run)

FOLDER = os.path.join(RESULTS, 'ablation')


def run(dataset: str, rank: int, seed: int):
    data = load_benchmark(dataset)
    seed_everything(seed)
    model = DegreEmbedReasoner(data.num_relations, num_steps=2, rank=rank)
    info = fit_and_test(model, data,
                        RULE_EPOCHS[dataset], seed)
    path = save_run(
        os.path.join('ablation', f'rank-{dataset}-T{rank}-seed{seed}.json'),
        {'dataset': dataset, 'rank': rank, 'seed': seed}, info)
    m = info['test']['realistic']
    print(f'{dataset} T={rank}: test MRR {m["mrr"]:.3f}, H@1 '
          f'{m["hits@1"]:.3f}, H@10 {m["hits@10"]:.3f} -> {path}')


def plot():
    runs = [json.load(open(p))
            for p in sorted(glob.glob(os.path.join(FOLDER, 'rank-*.json')))]
    datasets = [d for d in RULE_EPOCHS if any(r['dataset'] == d
                                              for r in runs)]
    if not datasets:
        print('no runs to plot')
        return
    fig, axes = figure(2, len(datasets), (4.5 * len(datasets), 7))
    lines = ['| dataset | T | epochs | final train loss | test MRR | '
             'H@1 | H@3 | H@10 |', '|---|---|---|---|---|---|---|---|']
    for col, dataset in enumerate(datasets):
        mine = sorted((r for r in runs if r['dataset'] == dataset),
                      key=lambda r: (r['rank'], r['seed']))
        ax = axes[0, col]
        for r in mine:
            ax.plot([h['epoch'] for h in r['history']],
                    [h['loss'] for h in r['history']], marker='o',
                    markersize=3, label=f'T = {r["rank"]}')
            lines.append(f'| {dataset} | {r["rank"]} | {r["epochs"]} | '
                         f'{r["history"][-1]["loss"]:.4f} | '
                         f'{metric_cells(r)} |')
        ax.set(title=f'{dataset}: training loss', xlabel='epoch',
               ylabel='loss')
        ax.legend()
        hits_bars(axes[1, col], [(f'T = {r["rank"]}', r) for r in mine],
                  f'{dataset}: test (%, realistic ties)')
    save_figure_and_table('ablation_rank', fig, lines, 'ablation_rank.py')


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--datasets', nargs='+',
                        default=['family', 'kinship', 'umls'])
    parser.add_argument('--ranks', type=int, nargs='+', default=[1, 2, 3, 4])
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--plot-only', action='store_true')
    args = parser.parse_args()
    retain_freed_memory()
    if not args.plot_only:
        for dataset in args.datasets:
            for rank in args.ranks:
                run(dataset, rank, args.seed)
    plot()
