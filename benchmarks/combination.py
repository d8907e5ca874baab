"""Rules and model combined: the grid that
``training.scorer.AGGREGATION_SETTINGS`` was chosen from.

    python benchmarks/combination.py [--datasets family kinship umls]
        [--time-budget 120] [--steps 2] [--output combination.json]

Per dataset: the default command (``pyg-degreembed train --dataset X
--time-budget B``) trains the model and records its test MRR; then, with that
model, the applied rules (u = 200, constant rules included) rank with
``aggregation='noisy-or'``, ``num_keys=k`` and ``model_weight=alpha``
(``AppliedRules``: the noisy-or of a candidate's k best rules and of the
model's score scaled to the query's best, weighted by alpha; k = 1 is the
best rule alone, alpha = 0 the rules alone).  Filtered validation and test
MRR (realistic ties) for k in {1, 3, 50} and alpha in {0, 0.1, 0.3, 0.5,
0.7}, and the test MRR of the pair with the best validation MRR.  Writes
``results/combination.json``.
"""
import argparse
import json
import tempfile

from common import default_command, load_benchmark, machine, write_json
from pyg_degreembed import AppliedRules, compute_ranks, load_model
from pyg_degreembed.interpret.applied_rules import rule_counts
from pyg_degreembed.interpret.constant_rules import constant_rule_counts

KEYS = (1, 3, 50)
ALPHAS = (0., 0.1, 0.3, 0.5, 0.7)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--datasets', nargs='+',
                        default=['family', 'kinship', 'umls'])
    parser.add_argument('--time-budget', type=float, default=120.)
    parser.add_argument('--steps', type=int, default=2)
    parser.add_argument('--output', default='combination.json',
                        help='the file written in results/')
    args = parser.parse_args()
    rows = []
    for name in args.datasets:
        kg = load_benchmark(name)
        with tempfile.TemporaryDirectory() as work:
            checkpoint, _, metrics, _ = default_command(
                name, args.time_budget, work)
            default = metrics['metrics']['realistic']['mrr']
            model = load_model(checkpoint, kg)[0].eval()
        counts = rule_counts(kg, args.steps)
        constants = constant_rule_counts(kg)
        grid = []
        for keys in KEYS:
            for alpha in ALPHAS:
                scorer = AppliedRules.mine(
                    kg, args.steps, num_keys=keys, counts=counts,
                    constant_counts=constants, aggregation='noisy-or',
                    tie_break=model, model_weight=alpha)
                cell = {'keys': keys, 'alpha': alpha}
                for split in ('valid', 'test'):
                    cell[f'{split}_mrr'] = round(compute_ranks(
                        scorer, kg, split).metrics()['mrr'], 4)
                print(name, json.dumps(cell), flush=True)
                grid.append(cell)
        best = max(grid, key=lambda c: c['valid_mrr'])
        rows.append({'dataset': name, 'num_steps': args.steps,
                     'time_budget': args.time_budget,
                     'default_test_mrr': round(default, 4),
                     'chosen_on_valid': best, 'grid': grid})
        print(json.dumps(rows[-1]['chosen_on_valid']), 'default',
              rows[-1]['default_test_mrr'])
    print(write_json(args.output, {'rows': rows, 'machine': machine()}))


if __name__ == '__main__':
    main()
