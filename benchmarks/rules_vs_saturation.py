"""Do the learned rules agree with the saturation of their patterns?

    python benchmarks/rules_vs_saturation.py [--dataset family] [--epochs 10]

Trains DegreEmbed and DRUM (paper settings, same seed), then for every
relation q compares the rule confidence of every pattern of length <= L
(inverse relations included) with its comprehensive saturation eta (every
split as the graph, inverse edges counted, so that the patterns are the same
as the rules'):

* Spearman's rank correlation over all patterns,
* agreement@5: the share of the model's top-5 rules among the 5 patterns of
  highest saturation,
* eta of the model's top rule.

Writes benchmarks/results/rules_vs_saturation_<dataset>.{json,md} and the
t-SNE plot of DegreEmbed's entity embeddings,
benchmarks/results/embedding_tsne_<dataset>.png.
"""
import argparse
import itertools
import os
import statistics

import torch
from scipy.stats import spearmanr
from torch_geometric import seed_everything

from common import RESULTS, machine, write_json
from pyg_degreembed import (DegreEmbedReasoner, RuleReasoner, fit,
                            load_neural_lp)
from pyg_degreembed.datasets import bundled_path
from pyg_degreembed.plot import plot_entity_embedding
from pyg_degreembed.rules import Rule, rule_confidence
from pyg_degreembed.saturation import saturation

parser = argparse.ArgumentParser()
parser.add_argument('--dataset', default='family')
parser.add_argument('--epochs', type=int, default=10)
parser.add_argument('--seed', type=int, default=0)
args = parser.parse_args()

data = load_neural_lp(bundled_path(args.dataset))
R, L, K = data.num_relations, 2, 2 * data.num_relations
names = list(data.relation_names)
patterns = [p for length in range(1, L + 1)
            for p in itertools.product(range(K), repeat=length)]
eta = {(s.relation, s.pattern): s.comprehensive
       for s in saturation(data, L, graph='all', inverse=True)}

result = {'dataset': args.dataset, 'epochs': args.epochs, 'seed': args.seed,
          'machine': machine(), 'models': {}}
for name, cls in (('DegreEmbed', DegreEmbedReasoner), ('DRUM', RuleReasoner)):
    seed_everything(args.seed)
    model = cls(R, num_steps=L, rank=3)
    fit(model, data, epochs=args.epochs, progress=False, seed=args.seed)
    if name == 'DegreEmbed':
        plot_entity_embedding(
            model, data, os.path.join(
                RESULTS, f'embedding_tsne_{args.dataset}.png'),
            relation_names=names)
    per_relation = {}
    with torch.no_grad():
        attention = model.operator_attention(torch.arange(R))
    for q in range(R):
        conf = [rule_confidence(attention[q], p) for p in patterns]
        sat = [eta.get((q, p), 0.) for p in patterns]
        rho = spearmanr(conf, sat).statistic
        by_conf = sorted(range(len(patterns)), key=lambda i: -conf[i])
        by_sat = sorted(range(len(patterns)), key=lambda i: -sat[i])
        top = by_conf[0]
        per_relation[names[q]] = {
            'spearman': float(rho),
            'agreement@5': len(set(by_conf[:5]) & set(by_sat[:5])) / 5,
            'top_rule': Rule(q, patterns[top], 1.).format(names),
            'top_rule_eta': sat[top],
            'best_pattern': Rule(q, patterns[by_sat[0]], 1.).format(names),
            'best_pattern_eta': sat[by_sat[0]],
        }
    result['models'][name] = {
        'mean_spearman': statistics.mean(v['spearman']
                                         for v in per_relation.values()),
        'mean_agreement@5': statistics.mean(v['agreement@5']
                                            for v in per_relation.values()),
        'mean_top_rule_eta': statistics.mean(v['top_rule_eta']
                                             for v in per_relation.values()),
        'per_relation': per_relation,
    }
    print(name, {k: round(v, 3) for k, v in result['models'][name].items()
                 if k.startswith('mean')})

write_json(f'rules_vs_saturation_{args.dataset}.json', result)
lines = [f'# Rules vs saturation on {args.dataset}', '',
         f'Command: `{result["machine"]["command"]}` (commit '
         f'{result["machine"]["git_commit"]}). Spearman over all '
         f'{len(patterns)} patterns of length <= {L}; agreement@5 = share of '
         'the top-5 rules among the top-5 saturated patterns; eta of the top '
         'rule.', '',
         '| relation | DegreEmbed ρ | DRUM ρ | DegreEmbed agr@5 | DRUM agr@5 '
         '| DegreEmbed top-rule η | DRUM top-rule η |', '|---' * 7 + '|']
for q in names:
    d, m = (result['models'][n]['per_relation'][q]
            for n in ('DegreEmbed', 'DRUM'))
    lines.append(f"| {q} | {d['spearman']:.2f} | {m['spearman']:.2f} | "
                 f"{d['agreement@5']:.1f} | {m['agreement@5']:.1f} | "
                 f"{d['top_rule_eta']:.3f} | {m['top_rule_eta']:.3f} |")
d, m = result['models']['DegreEmbed'], result['models']['DRUM']
lines.append(f"| **mean** | {d['mean_spearman']:.2f} | "
             f"{m['mean_spearman']:.2f} | {d['mean_agreement@5']:.2f} | "
             f"{m['mean_agreement@5']:.2f} | {d['mean_top_rule_eta']:.3f} | "
             f"{m['mean_top_rule_eta']:.3f} |")
with open(os.path.join(RESULTS, f'rules_vs_saturation_{args.dataset}.md'),
          'w') as f:
    f.write('\n'.join(lines) + '\n')
print('\n'.join(lines))
