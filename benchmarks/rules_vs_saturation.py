"""Do the learned rules agree with the saturation of their patterns?

    python benchmarks/rules_vs_saturation.py [--datasets family kinship umls]

Trains DegreEmbed and DRUM (paper settings, same seed, the epoch budgets of
reproduce.py with early stopping), then for every relation q and every
pattern of length <= L (inverse relations included) compares two rule
confidences with the pattern's comprehensive saturation eta (every split as
the graph, inverse edges counted, so that the patterns are the same as the
rules'):

* attention: the attention of the operator paths that apply the rule
  (the paper's definition; relative to the best rule);
* grounded: the share of the model's score mass on the training queries of q
  (each without its own edge) that the rule carries, rho included
  (pyg_degreembed.interpret.rules.grounded_rules).

Per model and confidence: Spearman's rank correlation over all patterns,
agreement@5 (share of the top-5 rules among the 5 patterns of highest
saturation), eta of the top rule, and how many of the top-3 rules hold for
no training triple (no path of the rule from h to t for any training query
(h, q, t) without its own edge).  For Family, the top rules of `brother`
are printed next to the paper's Tables 4 and 5.

Writes benchmarks/results/rules_vs_saturation_<dataset>.{json,md},
rules_vs_saturation.md (the summary, also in README.md) and the t-SNE plot of
DegreEmbed's degree embeddings, embedding_tsne_<dataset>.png.
"""
import argparse
import itertools
import os
import statistics

import torch
from reproduce import RULE_EPOCHS
from scipy.stats import spearmanr
from torch_geometric import seed_everything

from pyg_degreembed import (DegreEmbedReasoner, RuleReasoner, fit,
                            retain_freed_memory)
from pyg_degreembed.interpret.plot import plot_entity_embedding
from pyg_degreembed.interpret.rules import Rule, rule_masses
from pyg_degreembed.interpret.saturation import saturation

from common import (RESULTS, load_benchmark, machine, update_readme,
                    write_json, write_markdown)

MODELS = (('DegreEmbed', DegreEmbedReasoner), ('DRUM', RuleReasoner))
KINDS = ('attention', 'grounded')
L = 2
# The paper's Tables 4 (DegreEmbed) and 5 (DRUM): top rules for brother on
# Family (in red in Table 5: rules the paper calls wrong).
PAPER_BROTHER = {
    'DegreEmbed': [('brother, sister', 1.00), ('brother, brother', 0.81),
                   ('son, mother', 0.55), ('son, father', 0.18)],
    'DRUM': [('son, mother', 1.00), ('brother, brother', 0.52),
             ('mother, mother (wrong)', 0.50), ('son, father', 0.48),
             ('brother, sister', 0.35), ('mother, father (wrong)', 0.13)],
}


def attention_confidences(model, R, K, patterns):
    r"""Attention confidence of every pattern for the R forward queries
    (L = 2: the identity-padded sums in closed form)."""
    with torch.no_grad():
        a = model.operator_attention(torch.arange(R)).double()
    # a: [R, T, 2, K + 1]; identity is operator K.
    one = (a[:, :, 0, :K] * a[:, :, 1, K:]).sum(1) + \
        (a[:, :, 0, K:] * a[:, :, 1, :K]).sum(1)            # [R, K]
    two = torch.einsum('rti,rtj->rij', a[:, :, 0, :K], a[:, :, 1, :K])
    conf = torch.cat([one, two.reshape(R, K * K)], dim=1)  # pattern order
    return conf / conf.max(dim=1, keepdim=True).values


def grounded_confidences(model, data, R, patterns):
    index = {p: i for i, p in enumerate(patterns)}
    conf = torch.zeros(R, len(patterns), dtype=torch.double)
    for q in range(R):
        mass, total = rule_masses(model, data, q)
        for body, value in mass.items():
            if body:
                conf[q, index[body]] = value / total
    return conf


def compare(conf, eta, support, names, patterns):
    per_relation = {}
    for q, name in enumerate(names):
        c, s = conf[q].tolist(), eta[q].tolist()
        by_conf = sorted(range(len(patterns)), key=lambda i: -c[i])
        by_sat = sorted(range(len(patterns)), key=lambda i: -s[i])
        top = by_conf[0]
        per_relation[name] = {
            'spearman': float(spearmanr(c, s).statistic),
            'agreement@5': len(set(by_conf[:5]) & set(by_sat[:5])) / 5,
            'top_rule': Rule(q, patterns[top], c[top]).format(names),
            'top_rule_eta': s[top],
            'top3_without_support': sum(not support[q, i]
                                        for i in by_conf[:3]),
            'top3': [Rule(q, patterns[i], c[i]).format(names)
                     for i in by_conf[:3]],
        }
    values = per_relation.values()
    return {
        'mean_spearman': statistics.mean(v['spearman'] for v in values),
        'mean_agreement@5': statistics.mean(v['agreement@5']
                                            for v in values),
        'mean_top_rule_eta': statistics.mean(v['top_rule_eta']
                                             for v in values),
        'top3_without_support': sum(v['top3_without_support']
                                    for v in values),
        'per_relation': per_relation,
    }


def run(dataset, seed):
    data = load_benchmark(dataset)
    R, K = data.num_relations, 2 * data.num_relations
    names = list(data.relation_names)
    patterns = [p for length in range(1, L + 1)
                for p in itertools.product(range(K), repeat=length)]
    index = {p: i for i, p in enumerate(patterns)}
    eta = torch.zeros(R, len(patterns), dtype=torch.double)
    for s in saturation(data, L, graph='all', inverse=True):
        eta[s.relation, index[s.pattern]] = s.comprehensive
    result = {'dataset': dataset, 'epochs': RULE_EPOCHS[dataset],
              'seed': seed, 'machine': machine(), 'models': {}}
    support = None
    for name, cls in MODELS:
        seed_everything(seed)
        model = cls(R, num_steps=L, rank=3)
        fit(model, data, epochs=RULE_EPOCHS[dataset], progress=False,
            seed=seed, log=None)
        if name == 'DegreEmbed':
            plot_entity_embedding(
                model, data, os.path.join(RESULTS,
                                          f'embedding_tsne_{dataset}.png'),
                relation_names=names)
        grounded = grounded_confidences(model, data, R, patterns)
        if support is None:  # a rule holds iff it carries score (rho > 0)
            support = grounded > 0
        result['models'][name] = {
            kind: compare(conf, eta, support, names, patterns)
            for kind, conf in (('attention', attention_confidences(
                model, R, K, patterns)), ('grounded', grounded))}
        for kind in KINDS:
            m = result['models'][name][kind]
            print(dataset, name, kind, {k: round(v, 3) for k, v in m.items()
                                        if k != 'per_relation'}, flush=True)
    write_json(f'rules_vs_saturation_{dataset}.json', result)
    write_dataset_table(result, names)
    return result


def write_dataset_table(result, names):
    dataset = result['dataset']
    header = ' | '.join(f'{m} {k} {what}' for what in ('ρ', 'agr@5',
                                                       'top-rule η')
                        for m, _ in MODELS for k in KINDS)
    lines = [f'# Rules vs saturation on {dataset}', '',
             f'Command: `{result["machine"]["command"]}` (commit '
             f'{result["machine"]["git_commit"]}). Spearman over all '
             f'patterns of length <= {L}; agreement@5 = share of the top-5 '
             'rules among the top-5 saturated patterns; η of the top rule.',
             '', f'| relation | {header} |', '|---' * 13 + '|']

    def cells(q):
        out = []
        for key, fmt in (('spearman', '.2f'), ('agreement@5', '.1f'),
                         ('top_rule_eta', '.3f')):
            for m, _ in MODELS:
                for k in KINDS:
                    v = result['models'][m][k]['per_relation'][q][key]
                    out.append(format(v, fmt))
        return ' | '.join(out)

    for q in names:
        lines.append(f'| {q} | {cells(q)} |')
    if dataset == 'family':
        lines += ['', '## Top rules for brother', '']
        for m, _ in MODELS:
            lines.append(f'**{m}** (paper: ' + '; '.join(
                f'{body} {c:.2f}' for body, c in PAPER_BROTHER[m]) + ')')
            lines.append('')
            for k in KINDS:
                rules = result['models'][m][k]['per_relation']['brother']
                lines.append(f'* {k}: ' + '; '.join(
                    f'`{r}`' for r in rules['top3']))
            lines.append('')
    write_markdown(f'rules_vs_saturation_{dataset}.md', '\n'.join(lines),
                   'rules_vs_saturation.py')


def summary(results):
    lines = ['| KG | model | confidence | mean Spearman ρ | mean agreement@5 '
             '| mean η of top rule | top-3 rules that hold for no '
             'training triple |', '|---' * 7 + '|']
    for result in results:
        for m, _ in MODELS:
            for k in KINDS:
                v = result['models'][m][k]
                R = len(v['per_relation'])
                lines.append(
                    f"| {result['dataset']} | {m} | {k} | "
                    f"{v['mean_spearman']:.2f} | "
                    f"{v['mean_agreement@5']:.2f} | "
                    f"{v['mean_top_rule_eta']:.3f} | "
                    f"{v['top3_without_support']} of {3 * R} |")
    text = '\n'.join(lines)
    write_markdown('rules_vs_saturation.md', text, 'rules_vs_saturation.py')
    update_readme('rules', text)
    print(text)


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--datasets', nargs='+',
                        default=['family', 'kinship', 'umls'])
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args()
    retain_freed_memory()
    summary([run(dataset, args.seed) for dataset in args.datasets])
