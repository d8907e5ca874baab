"""The inductive benchmark of GraIL: train on one graph, answer queries about
new entities on another graph with the same relations.

    python benchmarks/inductive.py             # 8 splits, 3 models, 3 seeds
    python benchmarks/inductive.py --splits fb237_v1 --models drum --seeds 0
    python benchmarks/inductive.py --pair path/to/X path/to/X_ind
    python benchmarks/inductive.py --table-only

--pair takes any pair of GraIL-style folders (training graph, inductive
graph), so new splits need no code change.

Models: 'rules' is AppliedRules mined on X (its train.txt; no training),
'degreembed-rules' what the CLI's train --scorer auto and evaluate --graph
give, without the constant rules (choose_scorer(..., constants=False)): the
rules with DegreEmbed trained on X as tie-break, or DegreEmbed alone, per
query relation, whichever is better on X's validation, then chosen again on
X_ind's own observed triples (training.graph_choice.choose_on_graph, as
evaluate --graph does: its reason and seconds are in graph_choice).  Its run
files also record test_mrr_of_options: the test MRR of the rules alone, of
the model alone and of the choice made on X's validation ('validation') on
X_ind (to see what the choices, which never read X_ind's test, gave up).

Protocol, per run: train DegreEmbed, DRUM or Neural LP (rank 1) with fit()'s
defaults (L = 2, T = 3, 128-d, Adam 1e-3, batch 128, up to 20 epochs, early
stopping with patience 3) on X (graph = its train.txt, every training triple
also a query, its own edge left out); select the epoch on X/valid.txt
(filtered MRR, realistic ties); then reason on X_ind: graph = X_ind/train.txt
(relations matched by name), queries = X_ind/test.txt, both directions,
filtered by every triple of X_ind.  Reported: full filtered ranking over all
entities of X_ind (MRR, H@1, H@10, realistic ties; the protocol of RED-GNN,
AdaProp, A*Net) and H@10(50), GraIL's Hits@10 among the answer and 49 random
non-answers, as its expected value in closed form (as NBFNet computes it; no
sampling noise).

Each run runs in its own process (so that its peak RSS is its own) and writes
benchmarks/results/inductive/<split>-<model>-seed<k>.json; existing run
files are kept (--force reruns them).  Every invocation regenerates
benchmarks/results/inductive.md and the README block from all run files.
"""
import argparse
import glob
import itertools
import json
import os
import statistics
import subprocess
import sys
import time

import torch
from applied_rules import chosen_setting, load_runs
from torch_geometric import seed_everything

from pyg_degreembed import (AppliedRules, DegreEmbedReasoner, RuleReasoner,
                            compute_ranks, fit, retain_freed_memory)
from pyg_degreembed.data.convert import align_relations
from pyg_degreembed.data.datasets import load_dataset
from pyg_degreembed.data.kg import split_triples
from pyg_degreembed.evaluation.ranks import SAMPLED
from pyg_degreembed.interpret.rule_length import choose_rule_length
from pyg_degreembed.training.graph_choice import choose_on_graph
from pyg_degreembed.training.scorer import choose_scorer

from common import (RESULTS, SHARED, chosen_length, save_run, test_metrics,
                    update_readme, write_markdown)

MODELS = {
    'degreembed': ('DegreEmbed', DegreEmbedReasoner, {}),
    'drum': ('DRUM', RuleReasoner, {}),
    'neurallp': ('Neural LP (rank 1)', RuleReasoner, {'rank': 1}),
    # AppliedRules mined on X (no training), and the CLI's default
    # (--scorer auto) with DegreEmbed trained on X.
    'rules': ('applied rules', None, {}),
    'degreembed-rules': ('applied rules + DegreEmbed', DegreEmbedReasoner,
                         {}),
}
SPLITS = [f'{x}_v{k}' for x in ('fb237', 'WN18RR') for k in (1, 2, 3, 4)]
RUNS = os.path.join(RESULTS, 'inductive')
# Published figures (the sources): full-ranking MRR of RED-GNN
# (README of its repository, ties averaged) and H@10(50) of NBFNet (README).
RED_GNN_MRR = {'fb237_v1': .369, 'fb237_v2': .469, 'fb237_v3': .445,
               'fb237_v4': .442, 'WN18RR_v1': .701, 'WN18RR_v2': .690,
               'WN18RR_v3': .427, 'WN18RR_v4': .651}
NBFNET_H10_50 = {'fb237_v1': .834, 'fb237_v2': .949, 'fb237_v3': .951,
                 'fb237_v4': .960, 'WN18RR_v1': .948, 'WN18RR_v2': .905,
                 'WN18RR_v3': .893, 'WN18RR_v4': .890}


def run_name(name, model_name, steps, seed):
    suffix = '' if steps == 2 else f'-L{steps}'
    return f'{name}-{model_name}{suffix}-seed{seed}'


def run(name, train_folder, ind_folder, model_name, seed, device, steps=2,
        checkpoint_dir=None):
    train = load_dataset(train_folder)
    label, cls, fixed = MODELS[model_name]
    seed_everything(seed)
    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats(device)
    start = time.perf_counter()
    model, history, best = None, [], (None, None)
    if cls is not None:
        model = cls(train.num_relations, num_steps=steps, **fixed)
        checkpoint = None if checkpoint_dir is None else os.path.join(
            checkpoint_dir, run_name(name, model_name, steps, seed) + '.pt')
        result = fit(model, train, seed=seed, device=device, progress=False,
                     checkpoint=checkpoint, resume=checkpoint is not None)
        history = result.history
        best = (result.best_epoch, result.best_valid_mrr)
    scorer, chosen, reason = model, None, None
    if model_name == 'rules':
        # The rules alone, in the setting chosen on validation for rules
        # without a tie-break model (benchmarks/applied_rules.py).
        # No constant rules: they name the training graph's entities, and
        # the test graph has others.
        unseen, num_keys, _, answer_types, _ = chosen_setting(load_runs(),
                                                              'none')
        scorer = AppliedRules.mine(train, steps, unseen=unseen,
                                   num_keys=num_keys,
                                   answer_types=answer_types,
                                   constants=False).to(device)
        chosen = 'rules'
    elif model_name == 'degreembed-rules':  # as train --scorer auto
        choice = choose_scorer(model, train, steps, device=device,
                               constants=False)
        scorer, chosen, reason = choice.scorer, choice.name, choice.reason
        if choice.use_model is not None:
            chosen = f'model for {int(choice.use_model.sum())} of ' \
                f'{choice.use_model.numel()} query relations'
        chosen += f' (u = {choice.unseen:g})'
    train_seconds = time.perf_counter() - start
    graph = align_relations(load_dataset(ind_folder), train.relation_names)
    start = time.perf_counter()
    graph_choice = None
    if model_name == 'degreembed-rules':
        on_graph = choose_on_graph(choice.applied, graph, choice.unseen)
        scorer = on_graph.scorer
        graph_choice = {'reason': on_graph.reason,
                        'seconds': time.perf_counter() - start}
        start = time.perf_counter()
    ranks = compute_ranks(scorer, graph, 'test')
    test_seconds = time.perf_counter() - start
    options = None
    if model_name == 'degreembed-rules':
        # What each option alone gives on the new graph (not used to
        # choose: the choice sees only the training graph's validation).
        options = {name: test_metrics(compute_ranks(
            option, graph, 'test'))['realistic']['mrr']
            for name, option in (('rules', choice.applied),
                                 ('model', model),
                                 ('validation', choice.scorer))}
    info = {
        'epochs': len(history), 'best_epoch': best[0],
        'best_valid_mrr': best[1], 'history': history,
        'train_seconds': train_seconds,
        'test_seconds': test_seconds,
        'train_graph': {'entities': train.num_nodes,
                        'relations': train.num_relations,
                        'triples': train.train_edge_type.numel()},
        'inductive_graph': {'entities': graph.num_nodes,
                            'relations_used': int(torch.unique(
                                graph.train_edge_type).numel()),
                            'triples': graph.train_edge_type.numel(),
                            'test_triples': graph.test_edge_type.numel()},
        'test': test_metrics(ranks),
        'device': str(device), 'scorer': chosen,
        'scorer_reason': reason, 'test_mrr_of_options': options,
        'graph_choice': graph_choice,
        'gpu_peak_memory_gb': torch.cuda.max_memory_allocated(device) / 1e9
        if device.type == 'cuda' else None,
    }
    path = save_run(os.path.join('inductive',
                                 f'{run_name(name, model_name, steps, seed)}'
                                 '.json'),
                    {'split': name, 'model': model_name, 'seed': seed,
                     'num_steps': steps,
                     'train_folder': train_folder, 'ind_folder': ind_folder},
                    info)
    m = info['test']['realistic']
    print(f"{name} {model_name} L={steps} seed {seed}: MRR {m['mrr']:.3f}, "
          f"H@10(50) {m[SAMPLED]:.3f} (realistic); {train_seconds:.0f}s "
          f"train, {len(history)} epochs -> {path}", flush=True)


def reachable(graph, max_hops: int = 3):
    r"""Share of the test queries whose answer is within 1, 2, ...
    max_hops edges of the head in the graph (inverse edges included, so
    the head queries have the same distances as the tail queries): a rule
    learner with rules of length L scores only answers within L hops above
    0, so the share within L bounds its Hits@1."""
    N = graph.num_nodes
    adjacency = torch.sparse_coo_tensor(
        graph.edge_index, torch.ones(graph.edge_index.size(1)),
        (N, N), check_invariants=False).coalesce()
    head, _, answer = split_triples(graph, 'test')
    first = torch.full((head.numel(), ), max_hops + 1)
    for start in range(0, head.numel(), 1024):
        x = torch.zeros(N, min(1024, head.numel() - start))
        x[head[start:start + 1024], torch.arange(x.size(1))] = 1.
        for hop in range(1, max_hops + 1):
            x = (torch.sparse.mm(adjacency.t(), x) > 0).float()
            hit = x[answer[start:start + 1024], torch.arange(x.size(1))] > 0
            part = first[start:start + 1024]
            part[hit & (part > hop)] = hop
    return {hop: float((first <= hop).double().mean())
            for hop in range(1, max_hops + 1)}


def epoch_seconds(runs) -> str:
    r"""Mean seconds of the training epochs (their sum in each run's
    history: without validation and the choice of scorer, and the same for
    a run resumed from its checkpoint) per device (runs on 2 CPU cores and
    on a GPU are not comparable)."""
    devices = sorted({r['device'].split(':')[0] for r in runs})
    return ', '.join(
        f"{statistics.mean(sum(h['seconds'] for h in r['history']) for r in runs if r['device'].split(':')[0] == d):.0f} ({'GPU' if d == 'cuda' else d.upper()})"  # noqa: E501
        for d in devices)


def table() -> str:
    runs = [json.load(open(p))
            for p in sorted(glob.glob(os.path.join(RUNS, '*.json')))]
    names = sorted({r['split'] for r in runs},
                   key=lambda s: (SPLITS.index(s) if s in SPLITS else 99, s))
    out = ['**Inductive link prediction** (GraIL splits: trained on X, '
           'tested on X_ind; mean over seeds, realistic ties; H@k in %; '
           'H@10(50) = expected Hits@10 among the answer and 49 random '
           'non-answers, optimistic ties in brackets; "within 2 / 3 hops": '
           'share of the test answers within 2 / 3 edges of the head in '
           'the inductive graph, which bounds H@1 of rules of length 2 / '
           '3; epoch s: seconds of the training epochs, without validation '
           'and the choice of scorer)\n',
           '| split | model | MRR | H@1 | H@10 | H@10(50) | seeds | '
           'epochs | epoch s | peak RSS GB |',
           '|---|---|---|---|---|---|---|---|---|---|']
    for name in names:
        ind = next((r['ind_folder'] for r in runs if r['split'] == name and
                    os.path.isdir(r['ind_folder'])),
                   os.path.join(SHARED, 'grail', f'{name}_ind'))
        if os.path.isdir(ind):
            share = reachable(load_dataset(ind))
            out.append(f'| {name} | answers within 2 / 3 hops | | '
                       f'{100 * share[2]:.1f} / {100 * share[3]:.1f} | | '
                       f'| | | | |')
        lengths = sorted({r.get('num_steps', 2) for r in runs})
        for (model, (label, _, _)), steps in itertools.product(
                MODELS.items(), lengths):
            rs = [r for r in runs if r['split'] == name and
                  r['model'] == model and r.get('num_steps', 2) == steps]
            if not rs:
                continue
            if steps != 2:
                label = f'{label}, L = {steps}'
            if model == 'degreembed-rules' and steps == chosen_length(name):
                label += ' (default)'

            def mean(tie, key, scale=1.):
                return statistics.mean(r['test'][tie][key] * scale
                                       for r in rs)
            mrrs = [r['test']['realistic']['mrr'] for r in rs]
            std = f' ± {statistics.stdev(mrrs):.3f}' if len(rs) > 1 else ''
            out.append(
                f"| {name} | {label} | {mean('realistic', 'mrr'):.3f}{std} "
                f"| {mean('realistic', 'hits@1', 100):.1f} "
                f"| {mean('realistic', 'hits@10', 100):.1f} "
                f"| {mean('realistic', SAMPLED, 100):.1f} "
                f"({mean('optimistic', SAMPLED, 100):.1f}) | {len(rs)} "
                f"| {statistics.mean(r['epochs'] for r in rs):.0f} "
                f"| {epoch_seconds(rs)} "
                f"| {max(r['peak_rss_gb'] for r in rs):.1f} |")
        if name in RED_GNN_MRR:
            out.append(f'| {name} | RED-GNN (published) | '
                       f'{RED_GNN_MRR[name]:.3f} | | | | | | | |')
            out.append(f'| {name} | NBFNet (published) | | | | '
                       f'{100 * NBFNET_H10_50[name]:.1f} | | | | |')
    return '\n'.join(out)


def write_table():
    text = table()
    write_markdown('inductive.md', text, 'inductive.py')
    update_readme('inductive', text)
    print(text)


def rule_length(text: str):
    return text if text == 'auto' else int(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--splits', nargs='+', default=SPLITS,
                        help='GraIL split names under ../shared/datasets/'
                        'grail')
    parser.add_argument('--pair', nargs=2, action='append', default=[],
                        metavar=('TRAIN', 'IND'),
                        help='any pair of folders (training graph, '
                        'inductive graph); may repeat; replaces --splits')
    parser.add_argument('--models', nargs='+', default=list(MODELS),
                        choices=list(MODELS))
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--steps', type=rule_length, default=2,
                        help="rule length L, or 'auto': the length train "
                        "--steps auto chooses on the training graph (run "
                        "files of L != 2 are named ...-L<L>-seed<k>.json)")
    parser.add_argument('--force', action='store_true',
                        help='rerun runs that have a file already')
    parser.add_argument('--checkpoint-dir', default=None,
                        help='write a checkpoint per run there every epoch '
                        'and resume from it (a run stopped in one session '
                        'goes on in the next; train_seconds and the peak '
                        'RSS then count the last part only)')
    parser.add_argument('--table-only', action='store_true')
    parser.add_argument('--one', nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    retain_freed_memory()
    if args.one:  # one run, in a process of its own
        name, train, ind, model, seed = args.one
        run(name, train, ind, model, int(seed), torch.device(args.device),
            args.steps, args.checkpoint_dir)
        return
    if not args.table_only:
        pairs = [(os.path.basename(os.path.normpath(a)), a, b)
                 for a, b in args.pair] or \
            [(s, os.path.join(SHARED, 'grail', s),
              os.path.join(SHARED, 'grail', f'{s}_ind')) for s in args.splits]
        missing = [(n, a, b) for n, a, b in pairs
                   if not (os.path.isdir(a) and os.path.isdir(b))]
        for name, train, ind in missing:
            print(f'{name}: skipped ({train} or {ind} is not a folder)')
        pairs = [p for p in pairs if p not in missing]
        steps = {train: choose_rule_length(load_dataset(train))[0]
                 if args.steps == 'auto' else args.steps
                 for _, train, _ in pairs}
        for seed in args.seeds:  # every split once before the next seed
            for name, train, ind in pairs:
                for model in args.models:
                    out = os.path.join(
                        RUNS, run_name(name, model, steps[train], seed) +
                        '.json')
                    if os.path.exists(out) and not args.force:
                        continue
                    subprocess.run(
                        [sys.executable, os.path.abspath(__file__), '--one',
                         name, train, ind, model, str(seed), '--device',
                         args.device, '--steps', str(steps[train])] +
                        (['--checkpoint-dir', args.checkpoint_dir]
                         if args.checkpoint_dir else []), check=True)
    write_table()


if __name__ == '__main__':
    main()
