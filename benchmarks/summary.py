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
                validation (per query relation where that was chosen, see
                applied_rules.py) (results/applied_rules/, inductive
                'degreembed-rules'); the model alone at the chosen rule
                length where the rules are too many to mine (MODEL_DEFAULT,
                results/runs/steps<L>/)
  "rules-only"  the applied rules without a model (inductive 'rules')
  "other-L"     the default's scorer at another rule length than the one
                train --steps auto chooses on that KG (on an inductive
                split: on its training graph), measured to compare
"default" rows are at the chosen length (choose_rule_length, computed here
on each KG's training graph: the datasets must be present).

    python benchmarks/summary.py
"""
import glob
import json
import os
import re
import statistics

from applied_rules import (FOLDER, all_runs, chosen_setting, key,
                           per_relation_chosen)

from common import (RESULTS, chosen_length, update_readme, write_json,
                    write_markdown)


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


def default_settings(dataset: str, num_steps: int) -> str:
    return 'default' if num_steps == chosen_length(dataset) else 'other-L'


def default_outcome(run, best, per_relation):
    r"""What train --scorer auto gives on one run: ('rules', its test
    metrics) or ('model', the model's test MRRs), whichever is better on
    validation, or, with :obj:`per_relation`, the choice per query
    relation (('per-relation', its test metrics) where both rank some);
    None where the run lacks the chosen setting."""
    if 'default' in run:  # run by choose_scorer itself
        return run['default']['scorer'], run['default']['test']
    row = next((r for r in run['settings'] if key(r) == best), None)
    if row is None or (per_relation and 'per_relation' not in row):
        return None
    if per_relation:
        outcome = row['per_relation']
        kind = ('rules' if outcome['model_relations'] == 0 else 'model'
                if outcome['model_relations'] == outcome['query_relations']
                else 'per-relation')
        return kind, outcome['test']
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
        per_relation = per_relation_chosen(all_runs(), best)
        seeds = {}
        for run in load(os.path.join(FOLDER, 'seeds', '*.json')):
            seeds.setdefault((run['dataset'], run['num_steps']),
                             []).append(run)
        for run in runs:
            if not any(key(r) == best for r in run['settings']):
                continue
            model = run.get('tie_break_model', 'degreembed')
            outcomes = [default_outcome(r, best, per_relation)
                        for r in [run] + seeds.get(
                            (run['dataset'], run['num_steps']), [])]
            outcomes = [o for o in outcomes if o is not None]
            if not outcomes:
                continue
            kinds = {o[0] for o in outcomes}
            label = (f'applied rules + {model}' if kinds == {'rules'} else
                     model if kinds == {'model'} else
                     f'applied rules or {model} (per query relation, on '
                     'validation)' if per_relation else
                     f'applied rules or {model} (per seed, on validation)')
            out.append(record(run['dataset'], label,
                              default_settings(run['dataset'],
                                               run['num_steps']),
                              run['num_steps'], [o[1] for o in outcomes]))
    for dataset in MODEL_DEFAULT:
        steps = chosen_length(dataset)
        tests = [run['test'] for run in load(os.path.join(
            RESULTS, 'runs', f'steps{steps}', f'{dataset}-degreembed-seed*'
            '.json'))]
        if tests:
            out.append(record(dataset, 'DegreEmbed (the rules are too many '
                              'to mine at this L)', 'default', steps, tests))
    names = {'degreembed': ('DegreEmbed', 'paper'),
             'degreembed-rules': ('applied rules + DegreEmbed', 'default'),
             'rules': ('applied rules', 'rules-only')}
    groups, per_relation_splits = {}, set()
    for run in load(os.path.join(RESULTS, 'inductive', '*.json')):
        if str(run.get('scorer')).startswith('model for'):
            per_relation_splits.add(run['split'])
        if run['model'] in names:
            groups.setdefault((run['split'], run['model'],
                               run.get('num_steps', 2)),
                              []).append(run['test'])
    for (split, model, steps), tests in sorted(groups.items()):
        label, settings = names[model]
        if model == 'degreembed-rules':
            settings = default_settings(split, steps)
            if split in per_relation_splits:
                label = 'applied rules or DegreEmbed (per query relation, ' \
                    'on validation)'
        out.append(record(split, label, settings, steps, tests))
    path = write_json('summary.json', out)
    print(f'{len(out)} records -> {path}')
    update_readme('headline', headline(out))
    text = cap_table()
    write_markdown('rule_length_cap.md', text, 'summary.py')
    update_readme('rule-length-cap', text)
    print(text)


#: The longest rule length train --steps auto may choose, compared.
CAPS = (3, 4, 5)


def default_valid(run):
    r"""Validation MRR (realistic ties) of the default's choice in a run of
    applied_rules.py --quick or of inductive.py 'degreembed-rules' (read
    from the reason choose_scorer gives); None where the run lacks it."""
    if 'default' in run:
        return run['default']['valid']['realistic']
    reason = run.get('scorer_reason')
    if not reason:
        return None
    values = [float(v) for v in re.findall(r'\d\.\d{4}', reason)]
    return values[-1] if 'for the others' in reason else max(values)


def cap_table() -> str:
    r"""Validation and test MRR of the default when the rule length chosen
    from the data may reach 3, 4 or 5 edges, on every KG where that cap
    changes the length and the runs exist; the cap is chosen on the mean
    validation MRR over the KGs that have a run at every cap's length."""
    runs = {}
    found = [(run['dataset'], run, run.get('default', {}).get('test'))
             for run in all_runs()]
    found += [(run['split'], run, run['test']) for run in load(
        os.path.join(RESULTS, 'inductive', '*.json'))
        if run['model'] == 'degreembed-rules']
    for dataset, run, test in found:
        valid = default_valid(run)
        if valid is not None:
            runs.setdefault((dataset, run['num_steps']), []).append(
                (valid, test['realistic']['mrr']))
    header = ' | '.join(f'cap {c}: L, valid, test (seeds)' for c in CAPS)
    lines = [f'| KG | {header} |', '|---' * (len(CAPS) + 1) + '|']
    complete = []
    for dataset in sorted({d for d, _ in runs}):
        lengths = [chosen_length(dataset, c) for c in CAPS]
        if len(set(lengths)) == 1:
            continue
        cells, valids = [], []
        for L in lengths:
            rs = runs.get((dataset, L), [])
            if rs:
                valids.append(statistics.mean(v for v, _ in rs))
                cells.append(f'{L}, {valids[-1]:.4f}, '
                             f'{statistics.mean(t for _, t in rs):.3f} '
                             f'({len(rs)})')
            else:
                cells.append(f'{L}, not run')
        if len(valids) == len(CAPS):
            complete.append(valids)
        lines.append(f'| {dataset} | ' + ' | '.join(cells) + ' |')
    means = [statistics.mean(v[i] for v in complete)
             for i in range(len(CAPS))] if complete else []
    if means:
        lines.append(f'| mean valid ({len(complete)} KGs) | ' + ' | '.join(
            f'{m:.4f}' for m in means) + ' |')
    lines += ['', 'Test MRR and validation MRR (the validation set of the '
              'training graph on the inductive splits) of the default '
              '(`train --scorer auto`: applied rules or the model per query '
              'relation), mean over seeds; the other KGs take the same length '
              'under every cap. Chosen: cap '
              f'{CAPS[means.index(max(means))] if means else "–"} (the best '
              'mean validation MRR).']
    return '\n'.join(lines)


#: KGs whose default is the model alone, at the rule length train chooses:
#: there the rules of that length are too many to mine (train prints
#: "applied rules: not mined (...); the model ranks"); their default row is
#: the DegreEmbed run of reproduce.py at that length (results/runs/steps<L>).
MODEL_DEFAULT = ('fb15k-237', )

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
