"""Max-plus against noisy-or: how the rules that reach an answer rank it.

    python benchmarks/aggregation.py [--datasets family kinship umls]
        [--steps 2] [--keys 3 10 50]

Per dataset: the applied rules (``AppliedRules.mine``, rule length
``--steps``, constant rules included, u = 200, no tie-break model, so that
the aggregation alone decides) with ``num_keys`` rules per answer, ranked by
max-plus (the best rule, ties by the next) and by noisy-or (``1 - prod(1 -
conf)`` of the same rules first, ties by max-plus); filtered validation and
test MRR under realistic ties (optimistic beside it).  Writes
``results/aggregation.json``.
"""
import argparse
import json
import time

from common import load_benchmark, machine, write_json
from pyg_degreembed import AppliedRules, compute_ranks
from pyg_degreembed.interpret.applied_rules import AGGREGATIONS, rule_counts
from pyg_degreembed.interpret.constant_rules import constant_rule_counts


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--datasets', nargs='+',
                        default=['family', 'kinship', 'umls'])
    parser.add_argument('--steps', type=int, default=2)
    parser.add_argument('--keys', type=int, nargs='+', default=[3, 10, 50])
    args = parser.parse_args()
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
