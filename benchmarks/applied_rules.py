"""Rules applied as a symbolic miner applies them (AppliedRules) against the
trained model's sum over paths, chosen on validation.

    python benchmarks/applied_rules.py --dataset umls [--num-steps 2]

For each dataset: trains DegreEmbed with the defaults (seed 0) for the
tie-break, counts support and groundings of every cyclic rule of length
<= L once (rule_counts), then ranks the validation and test queries with
every setting of the grid: unseen u in UNSEEN x tie-break (none / the
trained model) x answer-type rules (with / without) with 3 keys, and 1 or 5
keys at u = 50 with both.
--model drum trains DRUM instead (cheaper on FB15k-237); --quick runs only
the settings chosen (with and without the model as tie-break).
--seed S (with --quick) trains with another seed, into
results/applied_rules/seeds/ (the setting is chosen on seed 0 only).
Writes results/applied_rules/<dataset>-L<L>.json (validation and test MRR
of every setting, realistic and optimistic ties, and the model's own);
`--table-only` writes results/applied_rules.md: the setting with the best
mean validation MRR over the datasets run, and its test figures.
"""
import argparse
import glob
import json
import os
import statistics
import time

from torch_geometric import seed_everything

from pyg_degreembed import DegreEmbedReasoner, RuleReasoner, compute_ranks, fit
from pyg_degreembed.interpret.applied_rules import AppliedRules, rule_counts

from common import (RESULTS, load_benchmark, save_run, test_metrics,
                    update_readme, write_markdown)

UNSEEN = (5., 20., 50., 100., 200.)
MODELS = {'degreembed': DegreEmbedReasoner, 'drum': RuleReasoner}
FOLDER = os.path.join(RESULTS, 'applied_rules')


def settings(unseen_values=UNSEEN, full=True):
    if not full:  # the settings chosen with and without a tie-break model
        for tie_break in ('model', 'none'):
            unseen, keys, _, answer_types = chosen_setting(load_runs(),
                                                           tie_break)
            yield {'unseen': unseen, 'num_keys': keys,
                   'tie_break': tie_break, 'answer_types': answer_types}
        return
    for answer_types in (True, False):
        for tie_break in ('none', 'model'):
            for unseen in unseen_values:
                yield {'unseen': unseen, 'num_keys': 3,
                       'tie_break': tie_break, 'answer_types': answer_types}
    for keys in (1, 5):
        yield {'unseen': 50., 'num_keys': keys, 'tie_break': 'model',
               'answer_types': True}


def mrr(ranks) -> dict:
    return {tie: ranks.metrics(tie)['mrr']
            for tie in ('realistic', 'optimistic')}


def run(name: str, num_steps: int, epochs: int, model_name: str,
        unseen_values, full: bool, seed: int = 0):
    data = load_benchmark(name)
    seed_everything(seed)
    model = MODELS[model_name](data.num_relations, num_steps=num_steps)
    start = time.perf_counter()
    fit(model, data, epochs=epochs, patience=3, seed=seed, progress=False)
    train_seconds = time.perf_counter() - start
    out = {'model': {split: mrr(compute_ranks(model, data, split))
                     for split in ('valid', 'test')}}
    start = time.perf_counter()
    counts = rule_counts(data, num_steps)
    count_seconds = time.perf_counter() - start
    out['settings'] = []
    for setting in settings(unseen_values, full):
        applied = AppliedRules.mine(
            data, num_steps, unseen=setting['unseen'],
            num_keys=setting['num_keys'], counts=counts,
            tie_break=model if setting['tie_break'] == 'model' else None,
            answer_types=setting['answer_types'])
        start = time.perf_counter()
        valid = compute_ranks(applied, data, 'valid')
        seconds = time.perf_counter() - start
        test = compute_ranks(applied, data, 'test')
        row = {**setting, 'num_rules': applied.rule_key.numel(),
               'valid': mrr(valid), 'valid_seconds': seconds,
               'test': test_metrics(test)}
        out['settings'].append(row)
        print(name, setting, 'valid', row['valid'], 'test',
              row['test']['realistic']['mrr'], flush=True)
    # Settings run before (other --unseen values) are kept.
    relative = os.path.join('applied_rules', f'{name}-L{num_steps}.json') \
        if seed == 0 else os.path.join(
            'applied_rules', 'seeds', f'{name}-L{num_steps}-seed{seed}.json')
    path = os.path.join(RESULTS, relative)
    if os.path.exists(path):
        before = json.load(open(path))
        if before.get('tie_break_model', 'degreembed') == model_name:
            done = {key(row) for row in out['settings']}
            out['settings'] = [row for row in before['settings']
                               if key(row) not in done] + out['settings']
    save_run(relative,
             {'dataset': name, 'num_steps': num_steps, 'seed': seed,
              'tie_break_model': model_name, 'epochs_budget': epochs},
             {**out, 'train_seconds': train_seconds,
              'count_seconds': count_seconds})


def key(setting) -> tuple:
    return (setting['unseen'], setting['num_keys'], setting['tie_break'],
            setting['answer_types'])


def full_grid_runs(runs):
    grid = max(len(r['settings']) for r in runs)
    return [r for r in runs if len(r['settings']) == grid]


#: The KGs the setting is chosen on (those with 3 seeds in the paper's
#: table); the others are reported with it.
CHOSEN_ON = ('family', 'kinship', 'umls')


def load_runs() -> list:
    return [json.load(open(path))
            for path in sorted(glob.glob(os.path.join(FOLDER, '*.json')))]


def setting_means(runs) -> dict:
    r"""The mean validation MRR (realistic ties) of each setting over the
    runs of the whole grid on the KGs of CHOSEN_ON."""
    full = [r for r in full_grid_runs(runs) if r['dataset'] in CHOSEN_ON]
    by_setting = {}
    for run_ in full:
        for row in run_['settings']:
            by_setting.setdefault(key(row), []).append(
                row['valid']['realistic'])
    return {k: statistics.mean(v) for k, v in by_setting.items()
            if len(v) == len(full)}


def chosen_setting(runs, tie_break=None) -> tuple:
    r"""The setting of the best mean validation MRR over the runs of the
    whole grid (runs of a part of it, --quick, are reported with it where
    they have it); with :obj:`tie_break`, the best of those with that
    tie-break (:obj:`"none"`: the rules alone)."""
    means = {k: v for k, v in setting_means(runs).items()
             if tie_break in (None, k[2])}
    return max(means, key=means.get)


def default_test(run_, row) -> float:
    r"""Test MRR of train --scorer auto: the applied rules or the model,
    whichever has the better validation MRR."""
    if row['valid']['realistic'] >= run_['model']['valid']['realistic']:
        return row['test']['realistic']['mrr']
    return run_['model']['test']['realistic']


def table():
    runs = load_runs()
    if not runs:
        raise SystemExit(f'no runs in {FOLDER}')
    best = chosen_setting(runs)
    chosen_on = [r for r in full_grid_runs(runs) if r['dataset'] in CHOSEN_ON]
    means = setting_means(runs)
    runs = [r for r in runs if any(key(s) == best for s in r['settings'])]
    lines = [
        f'Chosen on the mean validation MRR (realistic ties) over the '
        f'{len(chosen_on)} runs of the whole grid on ('
        f"{', '.join(r['dataset'] for r in chosen_on)}): unseen u = "
        f'{best[0]:g}, {best[1]} keys, tie-break {best[2]}, answer-type '
        f'rules {best[3]}.', '',
        '| dataset | L | tie-break model | rules | model valid | applied '
        'valid | model test | applied test (realistic / optimistic) | H@1 '
        '| H@10 | default test (the better on validation) |',
        '|---|---|---|---|---|---|---|---|---|---|---|']
    for run_ in runs:
        row = next(r for r in run_['settings'] if key(r) == best)
        test = row['test']
        lines.append(
            f"| {run_['dataset']} | {run_['num_steps']} | "
            f"{run_.get('tie_break_model', 'degreembed')} | "
            f"{row['num_rules']}"
            f" | {run_['model']['valid']['realistic']:.3f}"
            f" | {row['valid']['realistic']:.3f}"
            f" | {run_['model']['test']['realistic']:.3f}"
            f" | {test['realistic']['mrr']:.3f} / "
            f"{test['optimistic']['mrr']:.3f}"
            f" | {100 * test['realistic']['hits@1']:.1f}"
            f" | {100 * test['realistic']['hits@10']:.1f}"
            f" | {default_test(run_, row):.3f} |")
    headline = lines + [
        '', 'Every setting: `benchmarks/results/applied_rules.md`.']
    lines += ['', 'Mean validation MRR of every setting:', '',
              '| unseen u | keys | tie-break | answer types '
              '| mean valid MRR |',
              '|---|---|---|---|---|']
    for k, mean in sorted(means.items()):
        lines.append(f'| {k[0]:g} | {k[1]} | {k[2]} | {k[3]} | '
                     f'{mean:.4f} |')
    path = write_markdown('applied_rules.md', '\n'.join(lines),
                          'applied_rules.py')
    update_readme('applied_rules', '\n'.join(headline))
    print('\n'.join(lines))
    print('wrote', path)


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--dataset', action='append', default=[])
    parser.add_argument('--num-steps', type=int, default=2)
    parser.add_argument('--epochs', type=int, default=20)
    parser.add_argument('--model', default='degreembed', choices=MODELS,
                        help='the tie-break model trained')
    parser.add_argument('--unseen', type=float, nargs='+', default=UNSEEN)
    parser.add_argument('--quick', action='store_true',
                        help='only the settings chosen on the full grid')
    parser.add_argument('--table-only', action='store_true')
    parser.add_argument('--seed', type=int, default=0,
                        help='other seeds go to results/applied_rules/seeds/ '
                        '(the setting is chosen on seed 0\'s grid)')
    args = parser.parse_args()
    for name in args.dataset:
        run(name, args.num_steps, args.epochs, args.model, args.unseen,
            not args.quick, args.seed)
    table()
