"""Variants of DegreEmbed on one dataset, selected on validation: what
closes (or not) the gap to the paper's Kinship figure.

    python benchmarks/variants.py --dataset kinship --seeds 0

Variants (everything else as in reproduce.py):
  default     the library's defaults (L = 2, T = 3, nll loss, Adam 1e-3,
              degree embedding learning rate 1e-4 and weight decay 0.1):
              the runs of reproduce.py, read from results/runs/
  no-decay    the defaults without the weight decay (the defaults before
              edge_weight_decay)
  decayX      weight decay X on the degree embedding
  same-lr     one learning rate (1e-3) for all parameters and no weight
              decay, the defaults before edge_weight_lr
  ewlrX       learning rate X for the degree embedding (no weight decay)
  frozen-rho  the degree embedding left at its random initialisation, as in
              the authors' code, where rho is detached (METHOD.md fault 1)
  uniform-rho rho = 1 / K for every entity and type, frozen (DRUM with the
              edge operators scaled by 1 / K against the identity): tells
              whether frozen-rho gains by its scale or by its per-entity
              values
  mean-one-rho  rho = K * softmax(...): rows average 1 instead of summing
              to 1, so that a uniform rho is DRUM's operators (the paper's
              rho scales every edge by about 1 / K against the identity)
  steps3      L = 3 (with same-lr)
  bce         the paper's binary cross-entropy loss (with same-lr)
  no-decay-bce  no-decay with the binary cross-entropy loss
  lr3e-3      learning rate 3e-3 (with same-lr)
  adamX       Adam learning rate X for the controllers, the degree
              embedding at its defaults (1e-4, weight decay 0.1)
  dropoutP    dropout P on the degree embedding's BiLSTM output (training;
              with same-lr)
  no-decay-dropoutP  no-decay with that dropout
  patience6   no-decay, stopping after 6 epochs without improvement
              (instead of 3)
Writes results/variants/<dataset>-<variant>-seed<k>.json and
results/variants_<dataset>.md (validation MRR, the selection criterion,
beside the test metrics).
"""
import argparse
import glob
import json
import os
import statistics

import torch
from reproduce import RULE_EPOCHS
from torch_geometric import seed_everything

from pyg_degreembed import DegreEmbedReasoner, retain_freed_memory

from common import (RESULTS, fit_and_test, load_benchmark, save_run,
                    write_markdown)


def freeze(model):
    model.edge_weight.requires_grad_(False)


def uniform(model):
    # rho = softmax(0) = 1 / K for every entity and type, frozen.
    torch.nn.init.zeros_(model.edge_weight.lin.weight)
    torch.nn.init.zeros_(model.edge_weight.lin.bias)
    freeze(model)


def mean_one(model):
    # rho's rows times K: they average 1 (a uniform rho is DRUM).
    layer = model.edge_weight
    summing_to_one = layer.weights_of_sets

    def averaging_one(*args, **kwargs):
        rho = summing_to_one(*args, **kwargs)
        return rho._replace(table=rho.table * layer.num_edge_types)
    layer.weights_of_sets = averaging_one


# name: (model arguments, fit arguments, change to the built model).
# Variants run before edge_weight_decay existed (or before edge_weight_lr)
# say so: NO_DECAY, SAME_LR.
NO_DECAY = {'edge_weight_decay': 0.}
SAME_LR = {'edge_weight_lr': None, **NO_DECAY}
VARIANTS = {
    'default': None,  # the runs of reproduce.py
    'no-decay': ({}, NO_DECAY, None),
    'decay1e-2': ({}, {'edge_weight_decay': 1e-2}, None),
    'decay1': ({}, {'edge_weight_decay': 1.}, None),
    'same-lr': ({}, SAME_LR, None),
    'ewlr3e-4': ({}, {'edge_weight_lr': 3e-4, **NO_DECAY}, None),
    'ewlr3e-5': ({}, {'edge_weight_lr': 3e-5, **NO_DECAY}, None),
    'frozen-rho': ({}, {}, freeze),
    'uniform-rho': ({}, {}, uniform),
    'mean-one-rho': ({}, {}, mean_one),
    'steps3': ({'num_steps': 3}, SAME_LR, None),
    'bce': ({}, {'loss': 'bce', **SAME_LR}, None),
    'no-decay-bce': ({}, {'loss': 'bce', **NO_DECAY}, None),
    'lr3e-3': ({}, {'lr': 3e-3, **SAME_LR}, None),
    'adam3e-3': ({}, {'lr': 3e-3}, None),
    'adam1e-2': ({}, {'lr': 1e-2}, None),
    'dropout0.2': ({'degree_dropout': 0.2}, SAME_LR, None),
    'dropout0.5': ({'degree_dropout': 0.5}, SAME_LR, None),
    'no-decay-dropout0.5': ({'degree_dropout': 0.5}, NO_DECAY, None),
    'patience6': ({}, {'patience': 6, **NO_DECAY}, None),
}


def run(dataset: str, variant: str, seed: int):
    data = load_benchmark(dataset)
    model_kwargs, fit_kwargs, change = VARIANTS[variant]
    seed_everything(seed)
    model = DegreEmbedReasoner(data.num_relations,
                               **{'num_steps': 2, 'rank': 3, **model_kwargs})
    if change is not None:
        change(model)
    info = fit_and_test(model, data,
                        RULE_EPOCHS[dataset], seed, **fit_kwargs)
    path = save_run(
        os.path.join('variants', f'{dataset}-{variant}-seed{seed}.json'),
        {'dataset': dataset, 'variant': variant, 'seed': seed}, info)
    print(f'{dataset} {variant} seed {seed}: valid MRR '
          f'{info["best_valid_mrr"]:.3f}, test MRR '
          f'{info["test"]["realistic"]["mrr"]:.3f} -> {path}', flush=True)


def table(dataset: str) -> str:
    runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(
        RESULTS, 'variants', f'{dataset}-*.json')))]
    runs += [{**json.load(open(p)), 'variant': 'default'}
             for p in sorted(glob.glob(os.path.join(
                 RESULTS, 'runs', f'{dataset}-degreembed-seed*.json')))]
    lines = ['| variant | seeds | best valid MRR | test MRR | test H@1 | '
             'test H@10 | epochs |', '|---|---|---|---|---|---|---|']
    for variant in VARIANTS:
        mine = [r for r in runs if r['variant'] == variant]
        if not mine:
            continue

        def mean(f):
            return statistics.mean(f(r) for r in mine)

        lines.append(
            f'| {variant} | {len(mine)} | '
            f'{mean(lambda r: r["best_valid_mrr"]):.3f} | '
            f'{mean(lambda r: r["test"]["realistic"]["mrr"]):.3f} | '
            f'{100 * mean(lambda r: r["test"]["realistic"]["hits@1"]):.1f}'
            f' | '
            f'{100 * mean(lambda r: r["test"]["realistic"]["hits@10"]):.1f}'
            f' | {mean(lambda r: r["epochs"]):.0f} |')
    text = '\n'.join(lines)
    write_markdown(f'variants_{dataset}.md', text, 'variants.py')
    return text


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--dataset', default='kinship')
    runnable = [name for name, spec in VARIANTS.items() if spec]
    parser.add_argument('--variants', nargs='+', default=runnable,
                        choices=runnable)
    parser.add_argument('--seeds', type=int, nargs='+', default=[0])
    parser.add_argument('--table-only', action='store_true')
    args = parser.parse_args()
    retain_freed_memory()
    if not args.table_only:
        for variant in args.variants:
            for seed in args.seeds:
                run(args.dataset, variant, seed)
    print(table(args.dataset))
