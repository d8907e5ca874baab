"""Reproduce the paper's link-prediction table with one protocol for all.

    python benchmarks/reproduce.py --dataset kinship --model degreembed \\
        --seeds 0
    python benchmarks/reproduce.py --dataset family --model all --seeds 0 1 2
    python benchmarks/reproduce.py --table-only
    python benchmarks/reproduce.py --dataset fb15k-237 --model degreembed \\
        --epochs 30 --checkpoint-dir runs/checkpoints   # rerun to resume

Models: degreembed, drum, neurallp (the rank-one form) with the paper's
settings (L = 2, T = 3, 128-d, Adam 1e-3, batch 128, early stopping on the
filtered validation MRR), and the embedding baselines transe, distmult,
complex, rotate from torch_geometric.nn.kge, trained on facts + train
(128-d, Adam 1e-2, batch 1024, PyG's own losses, early stopping on the
filtered validation MRR checked every 20 epochs).  Every model is ranked by
the same filtered evaluator (both directions, all known triples filtered),
under optimistic, pessimistic and realistic ties; test uses the weights that
were best on validation.

Each run writes benchmarks/results/runs/<dataset>-<model>-seed<k>.json
(runs/steps<L>/ with --num-steps L other than the paper's 2, in a table of
their own; metrics under all tie policies, epochs, wall time, peak RSS,
versions, git commit, command line); every invocation regenerates
benchmarks/results/table.md and the table in README.md from all run files.
"""
import argparse
import copy
import glob
import json
import os
import statistics
import time

import torch
from torch_geometric import seed_everything
from torch_geometric.nn.kge import ComplEx, DistMult, RotatE, TransE

from pyg_degreembed import (DegreEmbedReasoner, RuleReasoner, compute_ranks,
                            retain_freed_memory)
from pyg_degreembed.data.datasets import BUNDLED
from pyg_degreembed.data.kg import GRAPH_SPLITS, split_triples

from common import (RESULTS, SHARED, fit_and_test, load_benchmark, save_run,
                    test_metrics, update_readme, write_markdown)

RULE_MODELS = {
    'degreembed': ('DegreEmbed', DegreEmbedReasoner, {}),
    'drum': ('DRUM', RuleReasoner, {}),
    'neurallp': ('Neural LP (rank 1)', RuleReasoner, {'rank': 1}),
}
KGE_MODELS = {
    'transe': ('TransE', TransE),
    'distmult': ('DistMult', DistMult),
    'complex': ('ComplEx', ComplEx),
    'rotate': ('RotatE', RotatE),
}
ORDER = list(RULE_MODELS) + list(KGE_MODELS)
DATASETS = ['family', 'kinship', 'umls', 'wn18', 'fb15k-237', 'wn18rr']
# One epoch budget: runs train until validation MRR stops improving
# (patience 3); none has needed 40 epochs.
RULE_EPOCHS = dict.fromkeys(DATASETS, 40)
# Published WN18RR test MRR (filtered) to compare with.
WN18RR_PUBLISHED = ('NBFNet .551, RED-GNN .533, RNNLogic+ .51, DRUM (its '
                    'paper, optimistic ties) .486')
RUNS = os.path.join(RESULTS, 'runs')


class KGEScorer(torch.nn.Module):
    r"""Scores all entities for (head, relation) queries with a PyG KGE
    model, so that it goes through the same evaluator; relation r + R asks
    for the heads of r."""
    def __init__(self, kge, num_relations: int):
        super().__init__()
        self.kge, self.num_relations = kge, num_relations

    def forward(self, graph, head, relation):
        N, R = graph.num_nodes, self.num_relations
        B = head.numel()
        everything = torch.arange(N, device=head.device).repeat(B)
        fixed = head.repeat_interleave(N)
        rel = (relation % R).repeat_interleave(N)
        inverse = (relation >= R).repeat_interleave(N)
        h = torch.where(inverse, everything, fixed)
        t = torch.where(inverse, fixed, everything)
        return self.kge(h, rel, t).view(B, N)


def train_kge(cls, data, seed, max_epochs=400,
              check_every=20, patience=2):
    seed_everything(seed)
    R = data.num_relations
    kge = cls(data.num_nodes, R, hidden_channels=128)
    scorer = KGEScorer(kge, R)
    triples = torch.cat([split_triples(data, s) for s in GRAPH_SPLITS], 1)
    loader = kge.loader(triples[0], triples[1], triples[2], batch_size=1024,
                        shuffle=True)
    optimizer = torch.optim.Adam(kge.parameters(), lr=0.01)
    best, best_state, best_epoch, epoch = -1., None, 0, 0
    valid = split_triples(data, 'valid')
    for epoch in range(1, max_epochs + 1):
        kge.train()
        for h, r, t in loader:
            optimizer.zero_grad()
            kge.loss(h, r, t).backward()
            optimizer.step()
        if epoch % check_every == 0:
            mrr = compute_ranks(scorer, data, valid,
                                batch_size=64).metrics()['mrr']
            if mrr > best:
                best, best_epoch = mrr, epoch
                best_state = copy.deepcopy(kge.state_dict())
            elif epoch - best_epoch >= patience * check_every:
                break
    kge.load_state_dict(best_state)
    return scorer, {'epochs': epoch, 'best_epoch': best_epoch,
                    'best_valid_mrr': best}


def run(dataset, model_name, seed, epochs=None, checkpoint_dir=None,
        num_steps=2):
    if num_steps != 2 and model_name not in RULE_MODELS:
        raise SystemExit(f'--num-steps is for the rule models, not '
                         f'{model_name}')
    data = load_benchmark(dataset)
    # Runs with another rule length than the paper's are kept apart from
    # the table's.
    name = f'{dataset}-{model_name}-seed{seed}'
    other = '' if num_steps == 2 else f'steps{num_steps}'
    if model_name in RULE_MODELS:
        _, cls, fixed = RULE_MODELS[model_name]
        seed_everything(seed)
        model = cls(data.num_relations, **{'num_steps': num_steps,
                                           'rank': 3, **fixed})
        resume = {}
        if checkpoint_dir is not None:
            # Rerunning the same command continues from the last epoch.
            os.makedirs(os.path.join(checkpoint_dir, other), exist_ok=True)
            resume = dict(checkpoint=os.path.join(
                checkpoint_dir, other, f'{name}.pt'), resume=True)
        info = fit_and_test(model, data, epochs or RULE_EPOCHS[dataset],
                            seed, **resume)
    else:
        start = time.perf_counter()
        model, info = train_kge(KGE_MODELS[model_name][1], data, seed)
        info['train_seconds'] = time.perf_counter() - start
        start = time.perf_counter()
        ranks = compute_ranks(model, data, 'test', batch_size=64)
        info['test_seconds'] = time.perf_counter() - start
        info['test'] = test_metrics(ranks)
    path = save_run(os.path.join('runs', other, f'{name}.json'),
                    {'dataset': dataset, 'model': model_name, 'seed': seed,
                     'num_steps': num_steps}, info)
    m = info['test']['realistic']
    print(f"{dataset} {model_name} seed {seed}: test MRR {m['mrr']:.3f} "
          f"(realistic), {info['test']['optimistic']['mrr']:.3f} "
          f"(optimistic); {info['train_seconds']:.0f}s -> {path}")


def load_runs(folder: str = '') -> list:
    r"""The run files of :obj:`runs/<folder>` (a glob pattern), sorted."""
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(
        RUNS, folder, '*.json')))]


def mean_metric(runs: list, tie: str, metric: str, scale: float = 1):
    r"""The mean over :obj:`runs` of one test metric, times :obj:`scale`."""
    return statistics.mean(scale * r['test'][tie][metric] for r in runs)


def table() -> str:
    runs = load_runs()
    names = {**{k: v[0] for k, v in RULE_MODELS.items()},
             **{k: v[0] for k, v in KGE_MODELS.items()}}
    datasets = [d for d in DATASETS if any(r['dataset'] == d for r in runs)]
    out = []
    for tie in ('realistic', 'optimistic'):
        out.append(f'**Filtered test metrics, {tie} ties** (mean ± std over '
                   'seeds; H@k in %; n = number of seeds)\n')
        out.append('| model | ' + ' | '.join(
            f'{d} MRR | {d} H@1 | {d} H@10' for d in datasets) + ' |')
        out.append('|---' * (1 + 3 * len(datasets)) + '|')
        for model in ORDER:
            cells = []
            for d in datasets:
                rs = [r['test'][tie] for r in runs
                      if r['dataset'] == d and r['model'] == model]
                if not rs:
                    cells += ['', '', '']
                    continue
                for key, scale, fmt in (('mrr', 1, '.3f'),
                                        ('hits@1', 100, '.1f'),
                                        ('hits@10', 100, '.1f')):
                    vals = [r[key] * scale for r in rs]
                    std = statistics.stdev(vals) if len(vals) > 1 else 0.
                    cells.append(f'{statistics.mean(vals):{fmt}} ± '
                                 f'{std:{fmt}} (n={len(vals)})'
                                 if key == 'mrr' else
                                 f'{statistics.mean(vals):{fmt}}')
            out.append(f'| {names[model]} | ' + ' | '.join(cells) + ' |')
        out.append('')
    if 'wn18rr' in datasets:
        out.append(f'WN18RR (three files: every training triple is a graph '
                   f'edge and a query) published: {WN18RR_PUBLISHED}.\n')
    out += longer_rules_table(names)
    return '\n'.join(out)


def longer_rules_table(names) -> list:
    r"""Lines of a table of the runs with another rule length than the
    paper's (:obj:`runs/steps<L>/`), means over seeds."""
    groups = {}
    for r in load_runs('steps*'):
        groups.setdefault((DATASETS.index(r['dataset']), r['num_steps'],
                           ORDER.index(r['model'])), []).append(r)
    if not groups:
        return []
    out = ['**Other rule lengths** (`--num-steps L`; filtered test metrics, '
           'mean over n seeds; H@k in %, realistic ties)\n',
           '| KG | model | L | n | MRR | H@1 | H@10 | MRR (optimistic) | '
           'epochs (best) |', '|---' * 9 + '|']
    for key in sorted(groups):
        rs = groups[key]
        epochs = ', '.join(f"{r['epochs']} ({r['best_epoch']})" for r in rs)
        out.append(f"| {rs[0]['dataset']} | {names[rs[0]['model']]} | "
                   f"{key[1]} | {len(rs)} | "
                   f"{mean_metric(rs, 'realistic', 'mrr'):.3f} | "
                   f"{mean_metric(rs, 'realistic', 'hits@1', 100):.1f} | "
                   f"{mean_metric(rs, 'realistic', 'hits@10', 100):.1f} | "
                   f"{mean_metric(rs, 'optimistic', 'mrr'):.3f} | {epochs} |")
    out.append('')
    return out


def write_table(readme: bool = True):
    text = table()
    write_markdown('table.md', text, 'reproduce.py')
    if readme:
        update_readme('results', text)
    print(text)


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--dataset', default='family', choices=DATASETS)
    parser.add_argument('--model', default='degreembed',
                        choices=ORDER + ['all', 'rules', 'kge'])
    parser.add_argument('--seeds', type=int, nargs='+', default=[0])
    parser.add_argument('--epochs', type=int, default=None,
                        help='epoch budget of the rule models')
    parser.add_argument('--checkpoint-dir', default=None,
                        help='write a checkpoint per rule-model run there '
                        'after every epoch and resume from it when it '
                        'exists (long runs over several sittings)')
    parser.add_argument('--num-steps', type=int, default=2,
                        help='rule length L of the rule models; runs with '
                        'L != 2 go to results/runs/steps<L>/ and a table of '
                        'their own')
    parser.add_argument('--table-only', action='store_true')
    parser.add_argument('--no-readme', action='store_true',
                        help='leave README.md alone (table.md is written)')
    args = parser.parse_args()
    retain_freed_memory()
    if not args.table_only:
        models = {'all': ORDER, 'rules': list(RULE_MODELS),
                  'kge': list(KGE_MODELS)}.get(args.model, [args.model])
        if args.dataset not in BUNDLED and \
                not os.path.isdir(os.path.join(SHARED, args.dataset)):
            raise SystemExit(f'{args.dataset}: no folder at {SHARED}')
        for model in models:
            for seed in args.seeds:
                run(args.dataset, model, seed, args.epochs,
                    args.checkpoint_dir, args.num_steps)
    write_table(readme=not args.no_readme)
