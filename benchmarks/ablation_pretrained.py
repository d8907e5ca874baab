"""Ablation of the degree embedding (the paper's Fig. 6 and its appendix).

    python benchmarks/ablation_pretrained.py --datasets family kinship umls
    python benchmarks/ablation_pretrained.py --plot-only

DegreEmbed's rho_e = softmax(W H_e + b) comes from the degree embedding H_e.
Here H_e is replaced by the frozen entity embedding of a model pre-trained
with torch_geometric.nn.kge (TransE, DistMult, ComplEx, RotatE; real and
imaginary parts concatenated), trained as in reproduce.py on facts + train
with early stopping on validation, but with --kge-epochs (default 100)
instead of 400 epochs to keep the ablation affordable.  Only W and b and the
rule controllers are learned; everything else follows reproduce.py.  The
DegreEmbed bars come from run files of the same protocol
(results/ablation/rank-<dataset>-T3-seed<k>.json, else
results/runs/<dataset>-degreembed-seed<k>.json).  Writes one JSON per run to
results/ablation/ and results/ablation_pretrained.png / .md.
"""
import argparse
import glob
import json
import os

import torch
from reproduce import KGE_MODELS, RULE_EPOCHS, train_kge
from torch import Tensor
from torch.nn import Linear, Module
from torch_geometric import seed_everything

from pyg_degreembed import RuleReasoner, TypedGraph, retain_freed_memory

from common import (RESULTS, figure, fit_and_test, hits_bars, load_benchmark,
                    metric_cells, save_figure_and_table, save_run)

FOLDER = os.path.join(RESULTS, 'ablation')


class PretrainedEdgeWeight(Module):
    r"""The edge weight :math:`\rho_e = \mathrm{softmax}(\mathbf{W}
    \mathbf{x}_e + \mathbf{b})` from fixed entity features
    :math:`\mathbf{x}` of shape :obj:`[N, F]`, in place of the degree
    embedding (DegreEmbed is :obj:`RuleReasoner(...,
    edge_weight=DegreeEmbedding(2R))`; this is the same reasoner with this
    module)."""
    def __init__(self, num_edge_types: int, features: Tensor):
        super().__init__()
        self.register_buffer('features', features.detach().clone())
        self.lin = Linear(features.size(1), num_edge_types)

    def source_weights(self, graph: TypedGraph, nodes=None) -> Tensor:
        return torch.softmax(self.lin(self.features), dim=-1)


def entity_features(kge) -> Tensor:
    parts = [kge.node_emb.weight]
    if hasattr(kge, 'node_emb_im'):
        parts.append(kge.node_emb_im.weight)
    return torch.cat(parts, dim=-1)


def run(dataset: str, kge_name: str, seed: int, kge_epochs: int):
    data = load_benchmark(dataset)
    scorer, kge_info = train_kge(KGE_MODELS[kge_name][1], data, seed,
                                 max_epochs=kge_epochs)
    seed_everything(seed)
    model = RuleReasoner(data.num_relations, num_steps=2, rank=3,
                         edge_weight=PretrainedEdgeWeight(
                             2 * data.num_relations,
                             entity_features(scorer.kge)))
    info = fit_and_test(model, data,
                        RULE_EPOCHS[dataset], seed)
    path = save_run(
        os.path.join('ablation',
                     f'pretrained-{dataset}-{kge_name}-seed{seed}.json'),
        {'dataset': dataset, 'embedding': kge_name, 'seed': seed,
         'pretraining': kge_info}, info)
    m = info['test']['realistic']
    print(f'{dataset} {kge_name} embeddings: test MRR {m["mrr"]:.3f} '
          f'H@1 {m["hits@1"]:.3f} -> {path}')


def degreembed_run(dataset: str, seed: int):
    for path in (os.path.join(FOLDER, f'rank-{dataset}-T3-seed{seed}.json'),
                 os.path.join(RESULTS, 'runs',
                              f'{dataset}-degreembed-seed{seed}.json')):
        if os.path.exists(path):
            return json.load(open(path))
    return None


def plot(seed: int):
    runs = [json.load(open(p)) for p in sorted(glob.glob(
        os.path.join(FOLDER, f'pretrained-*-seed{seed}.json')))]
    datasets = [d for d in RULE_EPOCHS if any(r['dataset'] == d
                                              for r in runs)]
    if not datasets:
        print('no runs to plot')
        return
    fig, axes = figure(1, len(datasets), (5 * len(datasets), 3.8))
    lines = ['| dataset | entity embedding | test MRR | H@1 | H@3 | H@10 |',
             '|---|---|---|---|---|---|']
    for col, dataset in enumerate(datasets):
        rows = [('degree embedding', degreembed_run(dataset, seed))] + [
            (f'{KGE_MODELS[k][0]} (pre-trained)',
             next((r for r in runs if r['dataset'] == dataset and
                   r['embedding'] == k), None)) for k in KGE_MODELS
        ]
        rows = [(label, r) for label, r in rows if r is not None]
        lines += [f'| {dataset} | {label} | {metric_cells(r)} |'
                  for label, r in rows]
        hits_bars(axes[0, col], rows, f'{dataset} (%, realistic ties)')
    axes[0, -1].legend(fontsize=7, loc='lower right')
    save_figure_and_table('ablation_pretrained', fig, lines,
                          'ablation_pretrained.py')


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--datasets', nargs='+',
                        default=['family', 'kinship', 'umls'])
    parser.add_argument('--embeddings', nargs='+', default=list(KGE_MODELS),
                        choices=list(KGE_MODELS))
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--kge-epochs', type=int, default=100)
    parser.add_argument('--plot-only', action='store_true')
    args = parser.parse_args()
    retain_freed_memory()
    if not args.plot_only:
        for dataset in args.datasets:
            for name in args.embeddings:
                run(dataset, name, args.seed, args.kge_epochs)
    plot(args.seed)
