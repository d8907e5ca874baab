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

``--checkpoint FILE`` (e.g. of ``anytime.py --keep-checkpoints``): the
checkpoint's rules, with its model, ranked under each aggregation of
``CHECKPOINT_SETTINGS`` (max-plus of 3; noisy-or of 3, 5, 10 and 50 rules,
each with the model's weight 0, 0.1, 0.3 and 0.5; the non-redundant
noisy-or of 10 and 50 rules, overlap 0.7) at the checkpoint's u, on
``--triples`` seeded validation triples: each setting's MRR, and the
two-fold MRR (``applied_rules.two_fold_mrr``, 10 halvings) of one setting
for all (``preferred_choice``) and of a setting per query relation
(``relation_choice``, prior 100 and others) among the model and the
settings of train's choice (``AGGREGATION_CHOICES``), those plus the
others without redundancy, and all of them.  Writes
``results/aggregation_checkpoint_<dataset>.json``.
"""
import argparse
import json
import os
import re
import tempfile
import time

import torch
from applied_rules import two_fold_mrr
from common import default_command, load_benchmark, machine, write_json
from pyg_degreembed import AppliedRules, compute_ranks
from pyg_degreembed.data.kg import split_triples
from pyg_degreembed.interpret.applied_rules import (AGGREGATIONS,
                                                    Aggregation, rule_counts)
from pyg_degreembed.interpret.constant_rules import constant_rule_counts
from pyg_degreembed.training.checkpoint import load_checkpoint, model_and_data
from pyg_degreembed.training.graph_choice import sampled_triples
from pyg_degreembed.training.scorer import (AGGREGATION_CHOICES,
                                            UnseenChoices, preferred_choice,
                                            relation_choice)

CHECKPOINT_SETTINGS = [Aggregation('max-plus', 3)] + [
    Aggregation('noisy-or', keys, weight) for keys in (3, 5, 10, 50)
    for weight in (0., 0.1, 0.3, 0.5)] + [
    Aggregation('noisy-or', keys, 0., 0.7) for keys in (10, 50)]
PRIORS = (30., 100., 300.)


def from_checkpoint(path: str, num_triples: int, seed: int = 1):
    payload = load_checkpoint(path)
    model, data = model_and_data(payload, path)
    dataset = os.path.basename(os.path.normpath(payload['kg']['source']))
    rules = AppliedRules.from_payload(payload['rules'], tie_break=model)
    # The u the rules' confidences were computed with.
    u = float((rules.support.double() / rules.confidence -
               rules.groundings).median().round())
    start = time.perf_counter()
    rules.measure_overlap(data, seed=0)
    overlap_seconds = time.perf_counter() - start
    valid = sampled_triples(split_triples(data, 'valid'), num_triples, seed)
    start = time.perf_counter()
    *ranked, model_ranks = compute_ranks(
        UnseenChoices(rules, [u], CHECKPOINT_SETTINGS), data, valid)
    ranking_seconds = time.perf_counter() - start
    R = data.num_relations

    def one_for_all(options):
        return torch.full((2 * R, ), preferred_choice(options))

    groups = {'choices': [a for a in CHECKPOINT_SETTINGS
                          if a in AGGREGATION_CHOICES],
              'without redundancy': [a for a in CHECKPOINT_SETTINGS
                                     if a.redundancy is None],
              'all': CHECKPOINT_SETTINGS}
    two_fold = {}
    for name, group in groups.items():
        options = [ranked[CHECKPOINT_SETTINGS.index(a)] for a in group] + \
            [model_ranks]
        two_fold[name] = {'settings': len(group), 'one for all': round(
            two_fold_mrr(options, one_for_all, 10), 4)}
        for prior in PRIORS:
            two_fold[name][f'per relation, prior {prior:g}'] = round(
                two_fold_mrr(options, lambda o: relation_choice(o, R, prior),
                             10), 4)
    print(write_json(
        f"aggregation_checkpoint_{dataset}.json", {
            'dataset': dataset, 'checkpoint': os.path.basename(path),
            'unseen': u,
            'validation_triples': valid.size(1), 'seed': seed,
            'valid_mrr': {'model': round(model_ranks.mrr(), 4), **{
                str(tuple(a)): round(r.mrr(), 4)
                for a, r in zip(CHECKPOINT_SETTINGS, ranked)}},
            'two_fold': two_fold, 'overlap_seconds': round(overlap_seconds),
            'ranking_seconds': round(ranking_seconds),
            'machine': machine()}))


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
    parser.add_argument('--checkpoint')
    parser.add_argument('--triples', type=int, default=3000)
    args = parser.parse_args()
    if args.checkpoint:
        return from_checkpoint(args.checkpoint, args.triples)
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
