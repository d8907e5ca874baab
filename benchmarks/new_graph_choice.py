"""What ranks on a new graph, three ways from one trained model per GraIL
split: the training KG's choice carried over, the choice for new graphs
(made on validation ranked without the constant rules), and the choice made
on the new graph's own triples (what ``evaluate --graph`` ranks with).

    python benchmarks/new_graph_choice.py                  # every split
    python benchmarks/new_graph_choice.py --datasets WN18RR_v1 --budget 60
    python benchmarks/new_graph_choice.py --table-only

Per split X: the default command (``pyg-degreembed train --dataset X
--time-budget B``, seed 0) trains the model and makes both choices in one
pass over the validation queries; the test triples of ``X_ind`` are ranked
on ``X_ind``'s graph (new entities: the rules without their constant rules)
three times from the same checkpoint: ``carried``, the training KG's choice
(made with the constant rules) with its :math:`u` (the checkpoint without
its field ``new_graph``); ``new_graph``, the checkpoint's choice for new
graphs (:math:`u` and the model or the rules per query relation chosen on
validation without the constant rules; ``evaluate --graph --graph-choice
0``); and ``on_graph``, the choice made on up to 1000 of ``X_ind``'s own
observed triples, each ranked without its own edge
(``training.graph_choice.choose_on_graph``, as ``evaluate --graph``
ranks), with its ``seconds``.

A row: ``dataset``, ``budget_seconds``, per variant the ``scorer``, ``u``
(the training KG's is in the log), ``test_mrr`` (realistic ties) and, for
``on_graph``, its ``reason``; and the command's log lines of the choices.
The choices read validation or the new graph's observed triples only; the
test MRRs are reported, never chosen on.

Writes results/new_graph_choice.json (rows merged by dataset) and
results/new_graph_choice.md.
"""
import os
import tempfile
import time

from common import SHARED, default_command, per_dataset_main

from pyg_degreembed import AppliedRules, compute_ranks, load_model
from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                scorer_from_checkpoint)
from pyg_degreembed.training.graph_choice import choose_on_graph

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
            'test_mrr': compute_ranks(scorer, graph, 'test').mrr()}
        print(dataset, variant, row[variant], flush=True)
    start = time.perf_counter()
    choice = choose_on_graph(
        AppliedRules.from_payload(payload['rules'], tie_break=model), graph,
        (payload.get('new_graph') or {}).get('unseen'))
    seconds = time.perf_counter() - start
    scorer = choice.scorer
    row['on_graph'] = {
        'scorer': 'model' if scorer is model else 'rules' if scorer is
        choice.rules else 'per-relation', 'u': None, 'reason': choice.reason,
        'seconds': round(seconds, 1),
        'test_mrr': compute_ranks(scorer, graph, 'test').mrr()}
    print(dataset, 'on_graph', row['on_graph'], flush=True)
    return row


def table(rows) -> str:
    lines = ['| split | budget (s) | carried over: scorer | test MRR | for '
             'new graphs: scorer (u) | test MRR | on the graph: scorer | '
             'test MRR (choice s) | on the graph - for new graphs |',
             '|---|---|---|---|---|---|---|---|---|']
    for row in rows:
        cells = [row['dataset'], f"{row['budget_seconds']:g}"]
        for variant in ('carried', 'new_graph', 'on_graph'):
            v = row.get(variant)
            if v is None:
                cells += ['', '']
                continue
            u = '' if v['u'] is None else f" (u = {v['u']:g})"
            seconds = f" ({v['seconds']:g})" if 'seconds' in v else ''
            cells += [f"{v['scorer']}{u}", f"{v['test_mrr']:.4f}{seconds}"]
        gain = row['on_graph']['test_mrr'] - row['new_graph']['test_mrr'] \
            if 'on_graph' in row else None
        cells.append('' if gain is None else f'{gain:+.4f}')
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


if __name__ == '__main__':
    per_dataset_main(__doc__, DATASETS, run, table, 'new_graph_choice.py')
