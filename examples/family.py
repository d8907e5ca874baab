"""Train DegreEmbed on the bundled Family KG, evaluate it and print rules.

    python examples/family.py [--epochs 10] [--device cpu] [--seed 0]

Paper settings: rule length L = 2, rank T = 3, 128-d embeddings and LSTM
states, Adam with learning rate 1e-3, batch size 128, early stopping on the
filtered validation MRR.  The test metrics are printed twice: ranked by the
model's own score (the paper's), and by the rules of length <= 2 mined from
the training graph with empirical confidences, the best rule first and the
trained model breaking ties (AppliedRules, the library's default scorer).
"""
import argparse
import time

import torch
from torch_geometric import seed_everything

from pyg_degreembed import (AppliedRules, DegreEmbedReasoner, bundled_path,
                            compute_ranks, extract_rules, fit, load_neural_lp)

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument('--dataset', default='family',
                    help="'family', 'kinship', 'umls' or a Neural-LP folder")
parser.add_argument('--epochs', type=int, default=10)
parser.add_argument('--patience', type=int, default=3)
parser.add_argument('--seed', type=int, default=0)
parser.add_argument('--device', default='cpu')
parser.add_argument('--loss', default='nll', choices=['nll', 'bce'])
args = parser.parse_args()

seed_everything(args.seed)
folder = args.dataset if '/' in args.dataset else bundled_path(args.dataset)
data = load_neural_lp(folder)
print(f'{args.dataset}: {data.num_nodes} entities, {data.num_relations} '
      f'relations, {data.train_edge_index.size(1)} training triples')

model = DegreEmbedReasoner(data.num_relations, num_steps=2, rank=3,
                           embedding_dim=128, hidden_channels=128)
start = time.perf_counter()
result = fit(model, data, epochs=args.epochs, patience=args.patience,
             batch_size=128, lr=1e-3, seed=args.seed, loss=args.loss,
             device=torch.device(args.device))
print(f'trained in {time.perf_counter() - start:.1f}s; best epoch '
      f'{result.best_epoch} (valid MRR {result.best_valid_mrr:.4f})')

applied = AppliedRules.mine(data, num_steps=2, tie_break=model)
print('\nfiltered test metrics (both directions pooled)')
print(f"{'scorer':<15}{'ties':<12}{'MRR':>8}{'MR':>9}{'H@1':>8}{'H@3':>8}"
      f"{'H@10':>8}")
for scorer, name in ((model, 'model'), (applied, 'applied rules')):
    ranks = compute_ranks(scorer, data, 'test')
    for tie in ('realistic', 'optimistic'):
        m = ranks.metrics(tie)
        print(f"{name:<15}{tie:<12}{m['mrr']:8.4f}{m['mr']:9.2f}"
              f"{m['hits@1']:8.4f}{m['hits@3']:8.4f}{m['hits@10']:8.4f}")

print('\ntop rules')
for name in data.relation_names[:4]:
    relation = data.relation_names.index(name)
    for rule in extract_rules(model, relation, k=3, data=data):
        print('  ' + rule.format(data.relation_names))
