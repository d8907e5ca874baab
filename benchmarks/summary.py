"""One machine-readable summary of the committed runs:
results/summary.json, a list of records

    {"dataset", "model", "settings", "num_steps", "seeds",
     "test_mrr_realistic", "test_mrr_optimistic", "h1", "h10"}

(test metrics, mean over seeds; H@k as fractions).  Settings:
  "paper"       DegreEmbed with the paper's settings (L = 2, the model's own
                score): results/runs/ and the inductive runs
  "default"     the CLI's default scorer (--scorer auto): the applied rules
                with the trained model as tie-break, in the setting chosen
                on validation, or the model alone where it is better on
                validation (results/applied_rules/, inductive
                'degreembed-rules')
  "rules-only"  the applied rules without a model (inductive 'rules')
Rows of other rule lengths say so in num_steps.

    python benchmarks/summary.py
"""
import glob
import json
import os
import statistics

from applied_rules import FOLDER, chosen_setting, key

from common import RESULTS, update_readme, write_json


def record(dataset, model, settings, num_steps, tests):
    def mean(tie, metric):
        values = [t[tie].get(metric) for t in tests]
        return None if None in values else statistics.mean(values)
    return {'dataset': dataset, 'model': model, 'settings': settings,
            'num_steps': num_steps, 'seeds': len(tests),
            'test_mrr_realistic': mean('realistic', 'mrr'),
            'test_mrr_optimistic': mean('optimistic', 'mrr'),
            'h1': mean('realistic', 'hits@1'),
            'h10': mean('realistic', 'hits@10')}


def default_outcome(run, best):
    r"""What train --scorer auto gives on one run: ('rules', its test
    metrics) or ('model', the model's test MRRs), whichever is better on
    validation; None where the run lacks the chosen setting."""
    row = next((r for r in run['settings'] if key(r) == best), None)
    if row is None:
        return None
    if row['valid']['realistic'] >= run['model']['valid']['realistic']:
        return 'rules', row['test']
    return 'model', {tie: {'mrr': run['model']['test'][tie]}
                     for tie in ('realistic', 'optimistic')}


def load(pattern):
    return [json.load(open(p)) for p in sorted(glob.glob(pattern))]


def main():
    out = []
    groups = {}
    for run in load(os.path.join(RESULTS, 'runs', '*-degreembed-seed*.json')):
        groups.setdefault((run['dataset'], run.get('num_steps', 2)),
                          []).append(run['test'])
    for (dataset, steps), tests in sorted(groups.items()):
        out.append(record(dataset, 'DegreEmbed', 'paper', steps, tests))
    runs = load(os.path.join(FOLDER, '*.json'))
    if runs:
        best = chosen_setting(runs)
        seeds = {}
        for run in load(os.path.join(FOLDER, 'seeds', '*.json')):
            seeds.setdefault((run['dataset'], run['num_steps']),
                             []).append(run)
        for run in runs:
            if not any(key(r) == best for r in run['settings']):
                continue
            model = run.get('tie_break_model', 'degreembed')
            outcomes = [default_outcome(r, best) for r in [run] + seeds.get(
                (run['dataset'], run['num_steps']), [])]
            outcomes = [o for o in outcomes if o is not None]
            rules_chosen = all(o[0] == 'rules' for o in outcomes)
            out.append(record(
                run['dataset'], f'applied rules + {model}' if rules_chosen
                else model if all(o[0] == 'model' for o in outcomes) else
                f'applied rules or {model} (per seed, on validation)',
                'default', run['num_steps'], [o[1] for o in outcomes]))
    names = {'degreembed': ('DegreEmbed', 'paper'),
             'degreembed-rules': ('applied rules + DegreEmbed', 'default'),
             'rules': ('applied rules', 'rules-only')}
    groups = {}
    for run in load(os.path.join(RESULTS, 'inductive', '*.json')):
        if run['model'] in names:
            groups.setdefault((run['split'], run['model'],
                               run.get('num_steps', 2)),
                              []).append(run['test'])
    for (split, model, steps), tests in sorted(groups.items()):
        label, settings = names[model]
        out.append(record(split, label, settings, steps, tests))
    path = write_json('summary.json', out)
    print(f'{len(out)} records -> {path}')
    update_readme('headline', headline(out))


#: AnyBURL (release 23-1, 100 s of rule learning with 2 threads on a 2-core
#: machine, its own evaluation), test MRR, as measured for issue #27.
ANYBURL = {'family': 0.980, 'kinship': 0.664, 'umls': 0.934,
           'wn18rr': 0.481, 'fb15k-237': 0.281, 'fb237_v1': 0.380,
           'WN18RR_v1': 0.693}


def headline(records) -> str:
    r"""The README's results table: per dataset, the default and the
    paper-settings DegreEmbed (test MRR, realistic ties, L = 2 for the
    paper's), and AnyBURL's figure."""
    def find(dataset, settings, steps=None):
        rows = [r for r in records if r['dataset'] == dataset and
                r['settings'] == settings and
                (steps is None or r['num_steps'] == steps)]
        return max(rows, key=lambda r: r['seeds']) if rows else None

    def cell(row):
        if row is None:
            return '–'
        return f"{row['test_mrr_realistic']:.3f} (L = {row['num_steps']}, " \
            f"{row['seeds']} seed{'s' if row['seeds'] > 1 else ''})"

    lines = ['| dataset | default | paper settings | AnyBURL, 100 s |',
             '|---|---|---|---|']
    for dataset, anyburl in ANYBURL.items():
        lines.append(f'| {dataset} | {cell(find(dataset, "default"))} | '
                     f'{cell(find(dataset, "paper", 2))} | {anyburl:.3f} |')
    return '\n'.join(lines)


if __name__ == '__main__':
    main()
