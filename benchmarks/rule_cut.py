"""The rules cut at a length chosen on validation (``train --cut-rules``)
against the rules of the full length L (the default), with one trained model
per dataset.

    python benchmarks/rule_cut.py                           # every dataset
    python benchmarks/rule_cut.py --datasets WN18RR_v1 fb237_v1 --budget 60
    python benchmarks/rule_cut.py --table-only

Per dataset (a GraIL split, e.g. ``WN18RR_v1``, or a transductive KG of
``../shared/datasets``): the default command (``pyg-degreembed train
--dataset X --time-budget B``, seed 0) trains the model and chooses the rule
length L; the rules are mined again as the command mines them
(``interpret.mining.mine_counts`` at L, seed 0, within a third of the
budget) and the choice (``training.scorer.choose_scorer``) is made twice on
every validation triple, with the same model and counts: ``full``, the
default (the rules of length <= L), and ``cut``, that of ``--cut-rules``
(``max_lengths=range(L, 1, -1)``: the longest rules kept chosen with the
aggregation, from L down to 2).  Each ranks the test triples as the
checkpoint would (``scorer_from_checkpoint``): on a GraIL split, those of
``X_ind`` on its own graph (new entities: without the constant rules).

A row: ``dataset``, ``num_steps`` (L), ``budget_seconds`` and per variant
the chosen ``scorer``, ``max_length`` (the longest rules kept),
``path_rules``, ``valid_mrr`` (the chosen scorer's, realistic ties),
``test_mrr`` (realistic ties) and the choice's ``reason``.  The choices use
validation only; the test MRRs are reported, never chosen on.

Writes results/rule_cut.json (rows merged by dataset) and
results/rule_cut.md.
"""
import os
import tempfile

from common import SHARED, default_command, per_dataset_main

from pyg_degreembed import compute_ranks, load_model
from pyg_degreembed.interpret.mining import mine_counts
from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                scorer_from_checkpoint)
from pyg_degreembed.training.scorer import choose_scorer

DATASETS = [f'{kg}_v{i}' for kg in ('WN18RR', 'fb237') for i in (1, 2, 3, 4)]


def run(dataset: str, budget: float) -> dict:
    grail = os.path.isdir(os.path.join(SHARED, 'grail', dataset))
    name = os.path.join('grail', dataset) if grail else dataset
    with tempfile.TemporaryDirectory() as work:
        checkpoint, out, _, _ = default_command(name, budget, work)
        payload = load_checkpoint(checkpoint)
        model, data = load_model(checkpoint)
        test_data = load_model(checkpoint, graph=os.path.join(
            SHARED, name + '_ind'))[1] if grail else data
    L = payload['rules']['config']['num_steps']
    mined = mine_counts(data, L, time_limit=budget / 3)
    row = {'dataset': dataset, 'num_steps': L, 'budget_seconds': budget,
           'mining': mined.description,
           'log': [line for line in out.splitlines()
                   if line.startswith(('rule length', 'scorer'))]}
    for variant, lengths in (('full', None), ('cut', range(L, 1, -1))):
        choice = choose_scorer(model, data, L, mined=mined,
                               max_lengths=lengths)
        record = {**payload, 'rules': choice.applied.to_payload(),
                  'scorer': choice.name,
                  'model_relations': choice.use_model,
                  'relation_settings': choice.relation_settings()}
        scorer = scorer_from_checkpoint(record, model, new_graph=grail)
        test = compute_ranks(scorer, test_data, 'test')
        row[variant] = {
            'scorer': choice.name,
            'max_length': choice.applied.num_steps,
            'path_rules': choice.applied.rule_key.numel(),
            'valid_mrr': compute_ranks(choice.scorer, data,
                                       'valid').metrics()['mrr'],
            'test_mrr': test.metrics()['mrr'],
            'reason': choice.reason}
        print(dataset, variant, row[variant], flush=True)
    return row


def table(rows) -> str:
    lines = ['| dataset | L | full: kept, scorer | valid | test | cut: kept, '
             'scorer | valid | test |', '|---|---|---|---|---|---|---|---|']
    for row in rows:
        cells = [row['dataset'], str(row['num_steps'])]
        for variant in ('full', 'cut'):
            v = row[variant]
            cells += [f"<= {v['max_length']} edges, {v['scorer']}",
                      f"{v['valid_mrr']:.4f}", f"{v['test_mrr']:.4f}"]
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


if __name__ == '__main__':
    per_dataset_main(__doc__, DATASETS, run, table, 'rule_cut.py')
