"""The choice for new graphs (made on validation ranked without the constant
rules) against the training KG's choice carried over, on the GraIL splits,
with one trained model per split.

    python benchmarks/new_graph_choice.py                  # every split
    python benchmarks/new_graph_choice.py --datasets WN18RR_v1 --budget 60
    python benchmarks/new_graph_choice.py --table-only

Per split X: the default command (``pyg-degreembed train --dataset X
--time-budget B``, seed 0) trains the model and makes both choices in one
pass over the validation queries; the test triples of ``X_ind`` are ranked
on ``X_ind``'s graph (new entities: the rules without their constant rules)
twice from the same checkpoint: ``new_graph``, as ``evaluate --graph`` ranks
(the checkpoint's choice for new graphs: :math:`u` and the model or the
rules per query relation chosen on validation without the constant rules),
and ``carried``, the training KG's choice (made with the constant rules)
with its :math:`u`, as before the choice for new graphs existed (the
checkpoint without its field ``new_graph``).

A row: ``dataset``, ``budget_seconds``, per variant the ``scorer``, ``u``
(for new graphs; the training KG's is in the log) and ``test_mrr``
(realistic ties), and the command's log lines of both choices.
The choices use validation only; the test MRRs are reported, never chosen
on.

Writes results/new_graph_choice.json (rows merged by dataset) and
results/new_graph_choice.md.
"""
import os
import tempfile

from common import SHARED, default_command, per_dataset_main

from pyg_degreembed import compute_ranks, load_model
from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                scorer_from_checkpoint)

DATASETS = [f'{kg}_v{i}' for kg in ('WN18RR', 'fb237') for i in (1, 2, 3, 4)]


def run(dataset: str, budget: float) -> dict:
    name = os.path.join('grail', dataset)
    with tempfile.TemporaryDirectory() as work:
        checkpoint, out, _, _ = default_command(name, budget, work)
        payload = load_checkpoint(checkpoint)
        model, graph = load_model(checkpoint,
                                  graph=os.path.join(SHARED, name + '_ind'))
    row = {'dataset': dataset, 'budget_seconds': budget,
           'log': [line for line in out.splitlines()
                   if line.startswith(('rule length', 'scorer',
                                       'on new graphs'))]}
    choices = {'new_graph': payload,
               'carried': {**payload, 'new_graph': None}}
    for variant, record in choices.items():
        scorer = scorer_from_checkpoint(record, model, new_graph=True)
        choice = record['new_graph'] or record
        row[variant] = {
            'scorer': choice['scorer'], 'u': choice.get('unseen'),
            'test_mrr': compute_ranks(scorer, graph, 'test')
            .metrics()['mrr']}
        print(dataset, variant, row[variant], flush=True)
    return row


def table(rows) -> str:
    lines = ['| split | carried over: scorer | test MRR | for new graphs: '
             'scorer (u) | test MRR | difference |',
             '|---|---|---|---|---|---|']
    for row in rows:
        cells = [row['dataset']]
        for variant in ('carried', 'new_graph'):
            v = row[variant]
            u = '' if v['u'] is None else f" (u = {v['u']:g})"
            cells += [f"{v['scorer']}{u}", f"{v['test_mrr']:.4f}"]
        gain = row['new_graph']['test_mrr'] - row['carried']['test_mrr']
        cells.append(f'{gain:+.4f}')
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


if __name__ == '__main__':
    per_dataset_main(__doc__, DATASETS, run, table, 'new_graph_choice.py')
