"""The share of the time budget that mining takes (``training.time_plan.
MINING_SHARE``), measured where mining uses all of it.

    python benchmarks/mining_share.py [--dataset fb15k-237] [--budget 600]
        [--shares 0.2 0.35 0.5 0.65 0.8] [--valid-triples 2000]
        [--test-triples 4000]

Per share, one run of the default command (``pyg-degreembed train
--time-budget B``) in its own process with the share set, on a copy of the
KG whose ``test.txt`` is empty (so the command does not rank the test
split; the validation choice then filters its ranking without the test
triples); its checkpoint then ranks seeded samples of the real KG's
validation and test triples (the same for every share; filtered MRR,
realistic ties) three ways: as chosen, the rules (with the chosen
aggregation, the model breaking ties) and the model alone.  The share is
chosen on the validation column.  Writes
``results/mining_share.{json,md}``; rows of shares not run again (same
dataset, budget and samples) are kept, each row with the commit and day it
ran on (the machines' speed varies: compare rows of one day).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from common import RESULTS, SHARED, machine, ran, write_json, write_markdown
from rule_pruning import sample

from pyg_degreembed import compute_ranks, load_model
from pyg_degreembed.data.io import load_neural_lp
from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                scorer_from_checkpoint)

SCORERS = ('auto', 'rules', 'model')
#: The files of a Neural-LP folder linked into the copy (test.txt empty).
LINKED = ('entities.txt', 'relations.txt', 'facts.txt', 'train.txt',
          'valid.txt')


def without_test(folder: str, work: str) -> str:
    copy = os.path.join(work, 'kg')
    os.makedirs(copy)
    for name in LINKED:
        if os.path.exists(os.path.join(folder, name)):
            os.symlink(os.path.abspath(os.path.join(folder, name)),
                       os.path.join(copy, name))
    open(os.path.join(copy, 'test.txt'), 'w').close()
    return copy


def run(data, copy: str, budget: float, share: float, work: str,
        samples: dict) -> dict:
    checkpoint = os.path.join(work, f'share{share}.pt')
    code = ('import sys, pyg_degreembed.training.time_plan as plan; '
            f'plan.MINING_SHARE = {share}; '
            'from pyg_degreembed.cli import main; sys.exit(main())')
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, '-c', code, 'train', '--dataset', copy,
         '--time-budget', str(budget), '--checkpoint', checkpoint,
         '--no-progress'], capture_output=True, text=True)
    row = {'share': share, 'ran': ran(),
           'wall_seconds': round(time.perf_counter() - start, 1),
           'log': [line for line in out.stdout.splitlines()
                   if line.startswith(('mining:', 'stopped', 'applied rules',
                                       'scorer:'))]}
    if out.returncode:  # the command's error, in place of the rankings
        row['error'] = (out.stderr.strip().splitlines() or [''])[-1]
        print(share, row['error'], flush=True)
        return row
    payload = load_checkpoint(checkpoint)
    model = load_model(checkpoint, dataset=copy)[0]
    for split, triples in samples.items():
        for scorer in SCORERS:
            start = time.perf_counter()
            ranks = compute_ranks(scorer_from_checkpoint(
                payload, model, scorer), data, triples)
            row[f'{split}_{scorer}_mrr'] = round(ranks.metrics()['mrr'], 4)
            row[f'{split}_{scorer}_seconds'] = round(
                time.perf_counter() - start, 1)
        print(share, split, {k: v for k, v in row.items()
                             if k.startswith(split)}, flush=True)
    return row


def earlier_rows(result: dict, shares) -> list:
    # The rows of results/mining_share.json run on the same dataset, budget
    # and samples, but for other shares than `shares`.
    path = os.path.join(RESULTS, 'mining_share.json')
    if not os.path.exists(path):
        return []
    with open(path) as f:
        before = json.load(f)
    same = all(before.get(key) == result[key] for key in (
        'dataset', 'budget_seconds', 'valid_triples', 'test_triples'))
    return [row for row in before['rows']
            if same and row['share'] not in shares]


def table(result: dict) -> str:
    lines = [f"{result['dataset']} at {result['budget_seconds']} s "
             f"({result['valid_triples']} validation and "
             f"{result['test_triples']} test triples, filtered MRR)", '',
             '| mining share | valid: chosen | valid: rules | valid: model | '
             'test: chosen | test: rules | test: model | ran (commit) |',
             '|---|---|---|---|---|---|---|---|']
    for row in result['rows']:
        cells = [f"the command failed: {row['error']}"] + [''] * 5 \
            if 'error' in row else [f"{row[f'{split}_{scorer}_mrr']:.4f}"
                                    for split in ('valid', 'test')
                                    for scorer in SCORERS]
        lines.append(f"| {row['share']} | " + ' | '.join(cells) +
                     f" | {row['ran']['day']} ({row['ran']['git_commit']}) |")
    return '\n'.join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--dataset', default='fb15k-237')
    parser.add_argument('--budget', type=float, default=600.)
    parser.add_argument('--shares', type=float, nargs='+',
                        default=[0.2, 0.35, 0.5, 0.65, 0.8])
    parser.add_argument('--valid-triples', type=int, default=2000)
    parser.add_argument('--test-triples', type=int, default=4000)
    args = parser.parse_args()
    folder = os.path.join(SHARED, args.dataset)
    if not os.path.isdir(folder):
        print(f'skipped: {folder} not found')
        return
    data = load_neural_lp(folder)
    samples = {'valid': sample(data, 'valid', args.valid_triples),
               'test': sample(data, 'test', args.test_triples)}
    result = {'dataset': args.dataset, 'budget_seconds': args.budget,
              'valid_triples': samples['valid'].size(1),
              'test_triples': samples['test'].size(1), 'rows': [],
              'machine': machine()}
    kept = earlier_rows(result, args.shares)
    with tempfile.TemporaryDirectory() as work:
        copy = without_test(folder, work)
        done = []
        for share in args.shares:
            done.append(run(data, copy, args.budget, share, work, samples))
            result['rows'] = sorted(kept + done, key=lambda row: row['share'])
            write_json('mining_share.json', result)
    write_markdown('mining_share.md', table(result), 'mining_share.py')
    print(table(result))


if __name__ == '__main__':
    main()
