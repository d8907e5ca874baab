"""Read what a DegreEmbed model learned on Family: its rules (also as JSON),
an exact explanation of a correct test prediction (also drawn as a graph,
examples/output/explanation_family.png), and the saturation of the patterns
behind it.

    python examples/interpret.py [--epochs 10] [--out examples/output]
"""
import argparse
import json
import os

import torch
from torch_geometric import seed_everything

from pyg_degreembed import (DegreEmbedReasoner, bundled_path, explain, fit,
                            load_neural_lp)
from pyg_degreembed.data.kg import relation_name
from pyg_degreembed.interpret.plot import plot_explanation
from pyg_degreembed.interpret.saturation import saturation, saturation_table

parser = argparse.ArgumentParser()
parser.add_argument('--epochs', type=int, default=10)
parser.add_argument('--out', default=os.path.join('examples', 'output'))
args = parser.parse_args()
os.makedirs(args.out, exist_ok=True)

data = load_neural_lp(bundled_path('family'))
names = list(data.relation_names)
seed_everything(0)
model = DegreEmbedReasoner(data.num_relations)
fit(model, data, epochs=args.epochs, progress=False, log=None)
model.eval()

print('## Top rules (forward queries; grounded confidence = share of the '
      "model's score on the training queries)")
rules = model.rules(k=3, inverse=False, data=data)
for rule in rules:
    print(rule.format(names))
with open(os.path.join(args.out, 'family_rules.json'), 'w') as f:
    json.dump([{'head': relation_name(data, r.head),
                'body': [relation_name(data, k) for k in r.body],
                'confidence': r.confidence}
               for r in model.rules(k=5, data=data)],
              f, indent=1)

print('\n## Explanation of a correct test prediction')
test = data.test_edge_index
with torch.no_grad():
    for i in range(test.size(1)):
        h, r, t = int(test[0, i]), int(data.test_edge_type[i]), \
            int(test[1, i])
        scores = model(data, torch.tensor([h]), torch.tensor([r]))[0]
        if int(scores.argmax()) == t and names[r] == 'brother':
            break
result = explain(model, data, h, r, t)
entities = data.entity_names
print(f'query {names[r]}({entities[h]}, ?): top answer {entities[t]} '
      f'(a test triple), model score {float(scores[t]):.6f}')
for path in result.paths[:8]:
    print('  ' + path.format(entities, names))
total = sum(p.contribution for p in result.paths)
print(f'  {len(result.paths)} paths; contributions sum to {total:.6f} '
      f'(|difference| = {abs(total - float(scores[t])):.1e})')
picture = os.path.join(args.out, 'explanation_family.png')
plot_explanation(result, picture, entities, names, max_paths=8)
print(f'  drawn as a graph: {picture}')

print(f'\n## Saturation of {names[r]} (paper convention)')
print(saturation_table(saturation(data, 2, relations=[r]), names, top=5))
