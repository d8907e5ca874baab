"""Reason about entities the model never saw: train DegreEmbed on GraIL's
fb237_v1, then answer and explain a query on the inductive graph
fb237_v1_ind (other entities, the same relations).

    python examples/inductive.py [--data ../shared/datasets/grail] \
        [--epochs 10] [--device cpu]

The model depends on relations, not on entity ids: its rules and degree-type
sets carry over to a new graph whose relations are matched by name.
"""
import argparse
import os
import sys
import time

import torch
from torch_geometric import seed_everything

from pyg_degreembed import (DegreEmbedReasoner, align_relations, evaluate,
                            explain, fit, load_neural_lp, predict)
from pyg_degreembed.data.kg import relation_name, split_triples

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
here = os.path.dirname(os.path.abspath(__file__))
parser.add_argument('--data', default=os.path.join(
    here, '..', '..', 'shared', 'datasets', 'grail'),
    help='the folder holding fb237_v1 and fb237_v1_ind')
parser.add_argument('--epochs', type=int, default=10)
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--device', default='cpu')
args = parser.parse_args()

folders = [os.path.join(args.data, name)
           for name in ('fb237_v1', 'fb237_v1_ind')]
if not all(os.path.isdir(folder) for folder in folders):
    sys.exit(f'skipped: no GraIL splits under {args.data} (--data)')

seed_everything(args.seed)
train = load_neural_lp(folders[0])  # train.txt, valid.txt, test.txt only
print(f'training graph: {train.num_nodes} entities, {train.num_relations} '
      f'relations, {train.train_edge_type.numel()} triples')
model = DegreEmbedReasoner(train.num_relations)
start = time.perf_counter()
result = fit(model, train, epochs=args.epochs, seed=args.seed,
             device=torch.device(args.device), progress=False)
print(f'trained in {time.perf_counter() - start:.0f}s, best epoch '
      f'{result.best_epoch} (valid MRR {result.best_valid_mrr:.3f})')

# The new graph: its relations renumbered to the model's, by name.
graph = align_relations(load_neural_lp(folders[1]), train.relation_names)
seen = set(train.entity_names)
print(f'\ninductive graph: {graph.num_nodes} entities '
      f'({sum(e in seen for e in graph.entity_names)} seen in training), '
      f'{graph.train_edge_type.numel()} triples')
m = evaluate(model, graph, 'test')
print(f"its test queries: MRR {m['mrr']:.3f}, H@10 {m['hits@10']:.3f}, "
      f"H@10(50) {m['hits@10(50)']:.3f} (realistic ties)")

# One test query whose answer the model ranks first among the new entities.
names = graph.entity_names
for h, r, t in split_triples(graph, 'test').t().tolist():
    top = predict(model, graph, h, r, k=1, filter_known=False)
    if top and top[0].entity == t:
        break
print(f'\nquery: ({names[h]}, {relation_name(graph, r)}, ?)  '
      f'[{names[h]} never occurs in the training graph]')
for place, answer in enumerate(predict(model, graph, h, r, k=5,
                                       filter_known=False), start=1):
    mark = '  <- the test answer' if answer.entity == t else \
        '  (known)' if answer.known else ''
    print(f'  {place}. {names[answer.entity]}  {answer.score:.4f}{mark}')

why = explain(model, graph, h, r, t)
print(f'\nwhy {names[t]} (score {why.score:.4f}): the rule paths behind it')
for path in why.paths[:5]:
    print('  ' + path.format(names, graph.relation_names))
