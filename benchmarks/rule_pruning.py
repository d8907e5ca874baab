"""What pruning the rules by support (``train --prune``) costs and saves,
with one trained model per dataset.

    python benchmarks/rule_pruning.py                       # every dataset
    python benchmarks/rule_pruning.py --datasets umls kinship --budget 60
    python benchmarks/rule_pruning.py --datasets fb15k-237 \\
        --checkpoint fb15k-237=run.pt --max-triples 1000
    python benchmarks/rule_pruning.py --table-only

Per dataset (a KG of ``../shared/datasets`` or a GraIL split, e.g.
``fb237_v1``): the default command (``pyg-degreembed train --dataset X
--time-budget B``, seed 0) trains the model, mines the rules and chooses the
scorer (or ``--checkpoint X=PATH`` gives such a run, e.g. one kept by
``anytime.py --keep-checkpoints``).  Its rules are then pruned
(``AppliedRules.pruned``) at each support of ``PRUNE_SUPPORTS`` (and kept
whole: the support they were mined with), the checkpoint's choice of scorer
otherwise unchanged, and each ranks: the validation triples by the rules
alone (what ``--prune`` chooses on) and by the checkpoint's scorer, and the
test triples by the scorer (on a GraIL split those of ``X_ind`` on its own
graph: new entities, without the constant rules).  ``--max-triples N``
ranks a seeded sample of N validation and N test triples (the same for
every support).

A row: ``dataset``, ``budget_seconds``, ``scorer`` and per support
(``levels``): ``min_support``, ``path_rules``, ``constant_rules``,
``rules_valid_mrr``, ``valid_mrr``, ``test_mrr`` (realistic ties) and
``test_seconds`` (the scorer's test ranking); ``prune`` is the support that
``--prune``'s rule takes on these validation rankings (the largest, from
the smallest on, until one costs the rules more than ``PRUNE_TOLERANCE`` of
validation MRR).  The test MRRs are reported, never chosen on.

Writes results/rule_pruning.json (rows merged by dataset) and
results/rule_pruning.md.
"""
import argparse
import os
import tempfile
import time

import torch
from common import (SHARED, default_command, rows_by_dataset,
                    write_markdown)

from pyg_degreembed import compute_ranks, load_model
from pyg_degreembed.data.kg import split_triples
from pyg_degreembed.interpret.applied_rules import AppliedRules
from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                scorer_from_checkpoint)
from pyg_degreembed.training.scorer import PRUNE_SUPPORTS, PRUNE_TOLERANCE

DATASETS = ['family', 'kinship', 'umls', 'fb237_v1', 'WN18RR_v1', 'wn18rr']


def sample(data, split: str, max_triples):
    triples = split_triples(data, split)
    if max_triples is None or triples.size(1) <= max_triples:
        return triples
    order = torch.randperm(triples.size(1),
                           generator=torch.Generator().manual_seed(0))
    return triples[:, order[:max_triples]]


def run(dataset: str, budget: float, checkpoint, max_triples) -> dict:
    grail = os.path.isdir(os.path.join(SHARED, 'grail', dataset))
    name = os.path.join('grail', dataset) if grail else dataset
    with tempfile.TemporaryDirectory() as work:
        if checkpoint is None:
            checkpoint = default_command(name, budget, work)[0]
            budget_seconds = budget
        else:
            budget_seconds = None  # as the run that wrote it
        payload = load_checkpoint(checkpoint)
        model, data = load_model(checkpoint,
                                 dataset=os.path.join(SHARED, name))
        test_data = load_model(checkpoint, graph=os.path.join(
            SHARED, name + '_ind'))[1] if grail else data
    if payload.get('rules') is None:
        raise SystemExit(f'{dataset}: the run holds no applied rules')
    valid = sample(data, 'valid', max_triples)
    test = sample(test_data, 'test', max_triples)
    every = AppliedRules.from_payload(payload['rules'], tie_break=model)
    mined = int(every.support.min())
    row = {'dataset': dataset, 'budget_seconds': budget_seconds,
           'scorer': payload['scorer'], 'levels': []}
    for min_support in (mined, *PRUNE_SUPPORTS):
        rules = every.pruned(min_support)
        record = {**payload, 'rules': rules.to_payload()}
        start = time.perf_counter()
        test_ranks = compute_ranks(scorer_from_checkpoint(
            record, model, new_graph=grail), test_data, test)
        level = {
            'min_support': min_support,
            'path_rules': rules.rule_key.numel(),
            'constant_rules': 0 if rules.constant_rules is None else
            len(rules.constant_rules),
            'test_seconds': round(time.perf_counter() - start, 1),
            'test_mrr': test_ranks.metrics()['mrr'],
            'valid_mrr': compute_ranks(scorer_from_checkpoint(
                record, model), data, valid).metrics()['mrr'],
            'rules_valid_mrr': compute_ranks(scorer_from_checkpoint(
                record, model, 'rules'), data, valid).metrics()['mrr']}
        row['levels'].append(level)
        print(dataset, level, flush=True)
    # --prune's rule (training.scorer._prune) on these rankings.
    full = row['levels'][0]['rules_valid_mrr']
    row['prune'] = mined
    for level in row['levels'][1:]:
        if level['rules_valid_mrr'] < full - PRUNE_TOLERANCE:
            break
        row['prune'] = level['min_support']
    row['valid_triples'], row['test_triples'] = valid.size(1), test.size(1)
    return row


def table(rows) -> str:
    lines = ['| dataset | scorer | support >= | path rules | constant rules '
             '| rules: valid MRR | valid MRR | test MRR | test ranking s |',
             '|---|---|---|---|---|---|---|---|---|']
    for row in rows:
        for level in row['levels']:
            chosen = ' (--prune)' if level['min_support'] == row['prune'] \
                else ''
            lines.append(
                f"| {row['dataset']} | {row['scorer']} | "
                f"{level['min_support']}{chosen} | {level['path_rules']} | "
                f"{level['constant_rules']} | "
                f"{level['rules_valid_mrr']:.4f} | {level['valid_mrr']:.4f} "
                f"| {level['test_mrr']:.4f} | {level['test_seconds']:.1f} |")
    return '\n'.join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--datasets', nargs='+', default=DATASETS)
    parser.add_argument('--budget', type=float, default=60.)
    parser.add_argument('--checkpoint', nargs='*', default=[],
                        metavar='DATASET=PATH',
                        help="a run's checkpoint to prune instead of "
                        'training one')
    parser.add_argument('--max-triples', type=int, default=None)
    parser.add_argument('--table-only', action='store_true')
    args = parser.parse_args()
    given = dict(spec.split('=', 1) for spec in args.checkpoint)
    rows = rows_by_dataset(
        'rule_pruning.json', args.datasets,
        lambda dataset: run(dataset, args.budget, given.get(dataset),
                            args.max_triples), args.table_only)
    write_markdown('rule_pruning.md', table(rows), 'rule_pruning.py')
    print(table(rows))


if __name__ == '__main__':
    main()
