"""Redundant rules counted once (SAFRAN's non-redundant noisy-or): the grid
that the ``non-redundant`` settings of ``training.scorer.AGGREGATION_SETTINGS``
were chosen from.

    python benchmarks/redundancy.py [--datasets kinship umls wn18rr]
        [--time-budget 60 60 180] [--output redundancy.json]

Per dataset: the default command (``pyg-degreembed train --dataset X
--time-budget B``) mines the rules and trains the model; from its checkpoint,
the rules' overlaps are measured (``AppliedRules.measure_overlap``: the
Jaccard index of the rules' predictions on sampled training heads, seconds
and cluster counts per threshold recorded), then the same rules (the u the
command chose, the model as tie-break) rank the full validation and test
splits with max-plus of 3, and with the noisy-or of 3 and 50 rules under
each redundancy (none, 0.9, 0.7, 0.5): filtered MRR, realistic ties.
Writes ``results/redundancy.json``.
"""
import argparse
import json
import tempfile
import time

import torch

from common import default_command, load_benchmark, machine, write_json
from pyg_degreembed import AppliedRules, compute_ranks
from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                model_from_checkpoint)

THRESHOLDS = (None, 0.9, 0.7, 0.5)
SETTINGS = [('max-plus', 3, None)] + [
    ('noisy-or', keys, threshold) for keys in (3, 50)
    for threshold in THRESHOLDS]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--datasets', nargs='+',
                        default=['kinship', 'umls', 'wn18rr'])
    parser.add_argument('--time-budget', type=float, nargs='+',
                        default=[60., 60., 180.],
                        help='one per dataset (or one for all)')
    parser.add_argument('--output', default='redundancy.json',
                        help='the file written in results/')
    args = parser.parse_args()
    budgets = args.time_budget * len(args.datasets) \
        if len(args.time_budget) == 1 else args.time_budget
    rows = []
    for name, budget in zip(args.datasets, budgets):
        kg = load_benchmark(name)
        with tempfile.TemporaryDirectory() as work:
            checkpoint, out, metrics, _ = default_command(name, budget, work)
            payload = load_checkpoint(checkpoint)
        model = model_from_checkpoint(payload).eval()
        rules = AppliedRules.from_payload(payload['rules'], tie_break=model)
        start = time.perf_counter()
        rules.measure_overlap(kg)
        row = {'dataset': name, 'time_budget': budget,
               'default_test_mrr': round(
                   metrics['metrics']['realistic']['mrr'], 4),
               'default_choice': next(line for line in out.splitlines()
                                      if line.startswith('applied rules:')),
               'rules': rules.num_rules,
               'overlap_seconds': round(time.perf_counter() - start, 1),
               'overlap_pairs': rules.overlap.pairs.size(1),
               'clusters': {str(t): torch.unique(rules.clusters(t)).numel()
                            for t in THRESHOLDS if t is not None},
               'grid': []}
        for aggregation, keys, threshold in SETTINGS:
            config = {**payload['rules']['config'],
                      'aggregation': aggregation, 'num_keys': keys}
            config.pop('model_weight', None)
            config.pop('redundancy', None)
            scorer = AppliedRules.from_payload(
                {**rules.to_payload(), 'config': config}, tie_break=model)
            scorer.redundancy = threshold
            cell = {'aggregation': aggregation, 'keys': keys,
                    'redundancy': threshold}
            for split in ('valid', 'test'):
                cell[f'{split}_mrr'] = round(compute_ranks(
                    scorer, kg, split).metrics()['mrr'], 4)
            print(json.dumps({'dataset': name, **cell}), flush=True)
            row['grid'].append(cell)
        rows.append(row)
    print(write_json(args.output, {'rows': rows, 'machine': machine()}))


if __name__ == '__main__':
    main()
