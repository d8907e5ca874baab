"""Max-plus against noisy-or: how the rules that reach an answer rank it.

    python benchmarks/aggregation.py [--datasets family kinship umls]
        [--steps 2] [--keys 3 10 50]
    python benchmarks/aggregation.py --end-to-end [--time-budget 120]
        [--compare max-plus auto] [--output aggregation_end_to_end.json]

Per dataset: the applied rules (``AppliedRules.mine``, rule length
``--steps``, constant rules included, u = 200, no tie-break model, so that
the aggregation alone decides) with ``num_keys`` rules per answer, ranked by
max-plus (the best rule, ties by the next) and by noisy-or (``1 - prod(1 -
conf)`` of the same rules first, ties by max-plus); filtered validation and
test MRR under realistic ties (optimistic beside it).  Writes
``results/aggregation.json``.

``--end-to-end``: the default command, ``pyg-degreembed train --dataset X
--time-budget B``, with each ``--aggregation`` of ``--compare`` (by
default ``max-plus`` and ``auto``: every aggregation of
``AGGREGATION_SETTINGS`` chosen with u on validation; the model as
tie-break and the per-relation choice as usual), one run after the other;
the test MRR (realistic ties), the validation MRR of the choice and its
line.  Writes ``results/aggregation_end_to_end.json`` (``--output``).
"""
import argparse
import json
import re
import tempfile
import time

from common import default_command, load_benchmark, machine, write_json
from pyg_degreembed import AppliedRules, compute_ranks
from pyg_degreembed.interpret.applied_rules import AGGREGATIONS, rule_counts
from pyg_degreembed.interpret.constant_rules import constant_rule_counts


def end_to_end(datasets, budget: float, compare, output: str):
    rows = []
    for name in datasets:
        for aggregation in compare:
            with tempfile.TemporaryDirectory() as work:
                _, out, metrics, seconds = default_command(
                    name, budget, work, '--aggregation', aggregation)
            choice = next(line for line in out.splitlines()
                          if line.startswith('scorer:'))
            row = {'dataset': name, 'aggregation': aggregation,
                   'time_budget': budget,
                   'test_mrr': round(
                       metrics['metrics']['realistic']['mrr'], 4),
                   'valid_mrr_of_choice': float(re.findall(
                       r'[0-9.]+', choice.split(':')[-1])[-1]
                       if 'others' in choice else 'nan'),
                   'choice': choice, 'wall_seconds': round(seconds, 1)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(write_json(output, {'rows': rows, 'machine': machine()}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--datasets', nargs='+',
                        default=['family', 'kinship', 'umls'])
    parser.add_argument('--steps', type=int, default=2)
    parser.add_argument('--keys', type=int, nargs='+', default=[3, 10, 50])
    parser.add_argument('--end-to-end', action='store_true')
    parser.add_argument('--time-budget', type=float, default=120.)
    parser.add_argument('--compare', nargs='+', default=['max-plus', 'auto'])
    parser.add_argument('--output', default='aggregation_end_to_end.json',
                        help='the file of --end-to-end in results/')
    args = parser.parse_args()
    if args.end_to_end:
        return end_to_end(args.datasets, args.time_budget, args.compare,
                          args.output)
    rows = []
    for name in args.datasets:
        kg = load_benchmark(name)
        counts = rule_counts(kg, args.steps)
        constants = constant_rule_counts(kg)
        for keys in args.keys:
            for aggregation in AGGREGATIONS:
                rules = AppliedRules.mine(
                    kg, args.steps, num_keys=keys, counts=counts,
                    constant_counts=constants, aggregation=aggregation)
                row = {'dataset': name, 'num_steps': args.steps,
                       'num_keys': keys, 'aggregation': aggregation}
                for split in ('valid', 'test'):
                    start = time.perf_counter()
                    ranks = compute_ranks(rules, kg, split)
                    row[f'{split}_mrr'] = round(ranks.metrics()['mrr'], 4)
                    row[f'{split}_mrr_optimistic'] = round(
                        ranks.metrics('optimistic')['mrr'], 4)
                    row[f'{split}_seconds'] = round(
                        time.perf_counter() - start, 1)
                print(json.dumps(row), flush=True)
                rows.append(row)
    print(write_json('aggregation.json', {'rows': rows,
                                          'machine': machine()}))


if __name__ == '__main__':
    main()
