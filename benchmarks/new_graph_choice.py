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
ranks), with its ``seconds``; and ``on_graph_one_aggregation``, that choice
as it was made before it chose an aggregation per query relation: on the
same sampled triples, per query relation the model or the rules under the
one aggregation chosen (``training.scorer.relation_choice`` with
``PRIOR_QUERIES``).  Both on-graph variants are also ranked on ``X_ind``'s
validation triples (never read by a choice: what tells them apart).

A row: ``dataset``, ``budget_seconds``, per variant the ``scorer``, ``u``
(the training KG's is in the log), ``test_mrr`` (realistic ties) and, for
``on_graph``, its ``reason`` (and ``valid_mrr`` for both on-graph
variants); and the command's log lines of the choices.
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
from pyg_degreembed.data.kg import graph_triples
from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                scorer_from_checkpoint)
from pyg_degreembed.training.graph_choice import (choose_on_graph,
                                                  sampled_triples)
from pyg_degreembed.training.scorer import (PRIOR_QUERIES,
                                            PerRelationScorer,
                                            relation_choice)

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
    row['on_graph'] = {'reason': choice.reason, 'seconds': round(seconds, 1),
                       **ranked(choice.scorer, model, choice.rules, graph)}
    print(dataset, 'on_graph', row['on_graph'], flush=True)
    row['on_graph_one_aggregation'] = ranked(
        one_aggregation(choice.rules, model, graph), model, choice.rules,
        graph)
    print(dataset, 'on_graph_one_aggregation',
          row['on_graph_one_aggregation'], flush=True)
    return row


def ranked(scorer, model, rules, graph) -> dict:
    # An on-graph variant: what ranks, and its validation and test MRR.
    return {'scorer': 'model' if scorer is model else 'rules' if scorer is
            rules else 'per-relation', 'u': None,
            **{f'{split}_mrr': compute_ranks(scorer, graph, split).mrr()
               for split in ('valid', 'test')}}


def one_aggregation(rules, model, graph):
    # The choice on the graph with one aggregation for every relation: per
    # query relation the model or `rules` (the u, length and aggregation
    # chosen), on the triples choose_on_graph samples (seed 0).
    sample = sampled_triples(graph_triples(graph))
    options = [compute_ranks(scorer, graph, sample, remove_edge=True)
               for scorer in (rules, model)]
    use_model = relation_choice(options, graph.num_relations,
                                PRIOR_QUERIES) == 1
    if bool(use_model.all()):
        return model
    return rules if not use_model.any() else \
        PerRelationScorer(rules, use_model)


def table(rows) -> str:
    lines = ['| split | budget (s) | carried over: scorer | test MRR | for '
             'new graphs: scorer (u) | test MRR | on the graph: scorer | '
             'test MRR (choice s) | on the graph - for new graphs | on the '
             'graph, one aggregation: valid MRR, test MRR | on the graph: '
             'valid MRR |',
             '|---|---|---|---|---|---|---|---|---|---|---|']
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
        one = row.get('on_graph_one_aggregation')
        cells.append('' if one is None else
                     f"{one['valid_mrr']:.4f}, {one['test_mrr']:.4f}")
        valid = (row.get('on_graph') or {}).get('valid_mrr')
        cells.append('' if valid is None else f'{valid:.4f}')
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


if __name__ == '__main__':
    per_dataset_main(__doc__, DATASETS, run, table, 'new_graph_choice.py')
