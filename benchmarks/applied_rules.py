"""Rules applied as a symbolic miner applies them (AppliedRules) against the
trained model's sum over paths, chosen on validation.

    python benchmarks/applied_rules.py --dataset umls [--num-steps 2]

For each dataset: trains DegreEmbed with the defaults (seed 0) for the
tie-break, counts support and groundings of every cyclic rule of length
<= L once (rule_counts), then ranks the validation and test queries with
every setting of the grid: unseen u in UNSEEN x tie-break (none / the
trained model) x answer-type rules (with / without) with 3 keys, and 1 or 5
keys at u = 50 with both.
--model drum trains DRUM instead (cheaper on FB15k-237); --quick runs only
the settings chosen (with and without the model as tie-break), each with
and without the constant rules (chosen on the mean over every KG run so),
and the library's default as train --scorer auto runs it (choose_scorer:
the u of the confidences chosen on validation, then the model or the rules
per query relation), with the two-fold validation estimate of choosing u.
--seed S (with --quick) trains with another seed, into
results/applied_rules/seeds/ (the setting is chosen on seed 0 only).
Writes results/applied_rules/<dataset>-L<L>.json (validation and test MRR
of every setting, realistic and optimistic ties, and the model's own);
`--table-only` writes results/applied_rules.md: the setting with the best
mean validation MRR over the datasets run, and its test figures.
"""
import argparse
import glob
import json
import os
import statistics
import time

import torch
from torch_geometric import seed_everything

from pyg_degreembed import DegreEmbedReasoner, RuleReasoner, compute_ranks, fit
from pyg_degreembed.interpret.applied_rules import AppliedRules, rule_counts
from pyg_degreembed.interpret.constant_rules import constant_rule_counts
from pyg_degreembed.interpret.mining import MinedCounts
from pyg_degreembed.training.scorer import (AGGREGATION_SETTINGS,
                                            UNSEEN_CHOICES,
                                            PerRelationScorer,
                                            choose_scorer,
                                            chosen_reciprocal_ranks,
                                            describe, relation_choice)

from common import (RESULTS, chosen_length, load_benchmark, save_run,
                    test_metrics, update_readme, write_markdown)

UNSEEN = (5., 20., 50., 100., 200.)
MODELS = {'degreembed': DegreEmbedReasoner, 'drum': RuleReasoner}
FOLDER = os.path.join(RESULTS, 'applied_rules')


def settings(unseen_values=UNSEEN, full=True):
    if not full:  # the settings chosen with and without a tie-break model
        for tie_break in ('model', 'none'):
            unseen, keys, _, answer_types, _ = chosen_setting(load_runs(),
                                                              tie_break)
            for constants in (False, True):
                yield {'unseen': unseen, 'num_keys': keys,
                       'tie_break': tie_break, 'answer_types': answer_types,
                       'constants': constants}
        return
    for answer_types in (True, False):
        for tie_break in ('none', 'model'):
            for unseen in unseen_values:
                yield {'unseen': unseen, 'num_keys': 3,
                       'tie_break': tie_break, 'answer_types': answer_types}
    for keys in (1, 5):
        yield {'unseen': 50., 'num_keys': keys, 'tie_break': 'model',
               'answer_types': True}


def mrr(ranks) -> dict:
    return {tie: ranks.metrics(tie)['mrr']
            for tie in ('realistic', 'optimistic')}


def best_overall(options) -> int:
    r"""The ranking with the best MRR, the earliest among equals."""
    mrr = [ranks.metrics()['mrr'] for ranks in options]
    return mrr.index(max(mrr))


def per_relation_choice(num_relations):
    return lambda part: relation_choice(part, num_relations)


def one_for_all_choice(num_relations):
    return lambda part: torch.full((2 * num_relations, ), best_overall(part))


def unseen_then_relation_choice(num_relations):
    r"""As choose_scorer: the rules' u by the best MRR over all queries
    (options: the rules with each u, then the model), then the rules or the
    model per query relation."""
    def choose(part):
        u = best_overall(part[:-1])
        model = relation_choice([part[u], part[-1]], num_relations) == 1
        return torch.where(model, len(part) - 1, u)
    return choose


def two_fold_mrr(options, choose, halvings: int = 1):
    r"""Validation MRR of a choice among the rankings :obj:`options` of the
    validation queries (:obj:`choose` maps rankings to the index of the
    one for each query relation) made on the other half of the validation
    triples (both halves, pooled; a triple's tail and head queries in one
    half), the mean over :obj:`halvings` seeded halvings (seeds 0, 1,
    ...)."""
    T = options[0].relation.numel() // 2  # tail queries, then head ones
    values = []
    for seed in range(halvings):
        half = torch.zeros(T, dtype=torch.bool)
        half[torch.randperm(T, generator=torch.Generator().manual_seed(
            seed))[:T // 2]] = True
        fold = torch.cat([half, half])
        total = 0.
        for chosen_on in (fold, ~fold):
            choice = choose([subset(ranks, chosen_on) for ranks in options])
            picked = chosen_reciprocal_ranks(options, choice)
            total += float(picked[~chosen_on].sum())
        values.append(total / fold.numel())
    return sum(values) / len(values)


def subset(ranks, mask):
    return ranks._replace(
        ranks={tie: value[mask] for tie, value in ranks.ranks.items()},
        relation=ranks.relation[mask], direction=ranks.direction[mask],
        candidates=None if ranks.candidates is None else
        ranks.candidates[mask])


def per_relation_outcome(applied, data, model_valid, rules_valid) -> dict:
    r"""The model or the rules per query relation (chosen on the whole
    validation set, as train does): its test metrics, and the two-fold
    validation MRR of that choice against one choice for all queries."""
    R = data.num_relations
    options = [rules_valid, model_valid]
    use_model = relation_choice(options, R) == 1
    test = compute_ranks(PerRelationScorer(applied, use_model), data,
                         'test')
    return {'model_relations': int(use_model.sum()),
            'query_relations': 2 * R,
            'valid_two_fold': {
                'per_relation': two_fold_mrr(options,
                                             per_relation_choice(R)),
                'one_for_all': two_fold_mrr(options,
                                            one_for_all_choice(R))},
            'test': test_metrics(test)}


def default_outcome(model, data, num_steps) -> dict:
    r"""What train --scorer auto gives (choose_scorer, the library's
    default): the scorer, the u chosen, validation and test metrics, and
    the two-fold validation MRR of choosing u on validation against the
    first u of UNSEEN_CHOICES for all KGs (the model or the rules per query
    relation in both); and (max_plus) the validation and test MRR of the
    same choice with max-plus only (the aggregation not chosen)."""
    start = time.perf_counter()
    # Counted once for both choices, as choose_scorer counts them.
    mined = MinedCounts(rule_counts(data, num_steps),
                        constant_rule_counts(data), 'exact', '', 0.)
    choice = choose_scorer(model, data, num_steps, mined=mined)
    seconds = time.perf_counter() - start
    max_plus = choose_scorer(model, data, num_steps, mined=mined,
                             aggregations=AGGREGATION_SETTINGS['max-plus'])
    R = data.num_relations
    options = choice.valid_ranks  # the rules with each u, then the model
    use_model = choice.use_model
    if use_model is None:
        use_model = torch.full((2 * R, ), choice.name == 'model')
    return {'scorer': choice.name, 'unseen': choice.unseen,
            'aggregation': describe(choice.aggregation),
            'reason': choice.reason, 'seconds': seconds,
            'max_plus': {split: mrr(compute_ranks(max_plus.scorer, data,
                                                  split))
                         for split in ('valid', 'test')},
            'model_relations': int(use_model.sum()),
            'query_relations': 2 * R,
            'valid': mrr(compute_ranks(choice.scorer, data, 'valid')),
            'test': test_metrics(compute_ranks(choice.scorer, data, 'test')),
            'valid_two_fold': {
                'unseen_chosen': two_fold_mrr(
                    options, unseen_then_relation_choice(R)),
                'unseen_fixed': two_fold_mrr(
                    options[:1] + options[-1:], per_relation_choice(R))}}


def run(name: str, num_steps: int, epochs: int, model_name: str,
        unseen_values, full: bool, seed: int = 0):
    data = load_benchmark(name)
    seed_everything(seed)
    model = MODELS[model_name](data.num_relations, num_steps=num_steps)
    start = time.perf_counter()
    fit(model, data, epochs=epochs, patience=3, seed=seed, progress=False)
    train_seconds = time.perf_counter() - start
    model_ranks = {split: compute_ranks(model, data, split)
                   for split in ('valid', 'test')}
    out = {'model': {split: mrr(ranks)
                     for split, ranks in model_ranks.items()}}
    start = time.perf_counter()
    counts = rule_counts(data, num_steps)
    count_seconds = time.perf_counter() - start
    out['settings'] = []
    for setting in settings(unseen_values, full):
        applied = AppliedRules.mine(
            data, num_steps, unseen=setting['unseen'],
            num_keys=setting['num_keys'], counts=counts,
            tie_break=model if setting['tie_break'] == 'model' else None,
            answer_types=setting['answer_types'],
            constants=setting.get('constants', False))
        start = time.perf_counter()
        valid = compute_ranks(applied, data, 'valid')
        seconds = time.perf_counter() - start
        test = compute_ranks(applied, data, 'test')
        row = {**setting, 'num_rules': applied.rule_key.numel(),
               'valid': mrr(valid), 'valid_seconds': seconds,
               'test': test_metrics(test)}
        if setting['tie_break'] == 'model':
            row['per_relation'] = per_relation_outcome(
                applied, data, model_ranks['valid'], valid)
        out['settings'].append(row)
        print(name, setting, 'valid', row['valid'], 'test',
              row['test']['realistic']['mrr'], flush=True)
    if not full:
        out['default'] = default_outcome(model, data, num_steps)
        print(name, 'default', out['default']['reason'], 'test',
              out['default']['test']['realistic']['mrr'], flush=True)
    # Settings run before (other --unseen values) are kept.
    relative = os.path.join('applied_rules', f'{name}-L{num_steps}.json') \
        if seed == 0 else os.path.join(
            'applied_rules', 'seeds', f'{name}-L{num_steps}-seed{seed}.json')
    path = os.path.join(RESULTS, relative)
    if os.path.exists(path):
        before = json.load(open(path))
        if before.get('tie_break_model', 'degreembed') == model_name:
            done = {key(row) for row in out['settings']}
            out['settings'] = [row for row in before['settings']
                               if key(row) not in done] + out['settings']
    save_run(relative,
             {'dataset': name, 'num_steps': num_steps, 'seed': seed,
              'tie_break_model': model_name, 'epochs_budget': epochs},
             {**out, 'train_seconds': train_seconds,
              'count_seconds': count_seconds})


def key(setting) -> tuple:
    return (setting['unseen'], setting['num_keys'], setting['tie_break'],
            setting['answer_types'], setting.get('constants', False))


def full_grid_runs(runs):
    # The runs of every setting without constant rules (those with them
    # are run for the chosen settings only).
    def size(run_):
        return sum(not row.get('constants', False)
                   for row in run_['settings'])
    grid = max(size(r) for r in runs)
    return [r for r in runs if size(r) == grid]


#: The KGs the setting is chosen on (those with 3 seeds in the paper's
#: table); the others are reported with it.
CHOSEN_ON = ('family', 'kinship', 'umls')


def load_runs() -> list:
    return [json.load(open(path))
            for path in sorted(glob.glob(os.path.join(FOLDER, '*.json')))]


def setting_means(runs) -> dict:
    r"""The mean validation MRR (realistic ties) of each setting without
    constant rules over the runs of the whole grid on the KGs of
    CHOSEN_ON."""
    full = [r for r in full_grid_runs(runs) if r['dataset'] in CHOSEN_ON]
    by_setting = {}
    for run_ in full:
        for row in run_['settings']:
            if row.get('constants', False):
                continue
            by_setting.setdefault(key(row), []).append(
                row['valid']['realistic'])
    return {k: statistics.mean(v) for k, v in by_setting.items()
            if len(v) == len(full)}


def chosen_setting(runs, tie_break=None) -> tuple:
    r"""The setting of the best mean validation MRR over the runs of the
    whole grid (runs of a part of it, --quick, are reported with it where
    they have it); with :obj:`tie_break`, the best of those with that
    tie-break (:obj:`"none"`: the rules alone).  Then the constant rules:
    on where that setting with them has the better mean validation MRR
    over every run that has it both ways (all KGs, see constant_means)."""
    means = {k: v for k, v in setting_means(runs).items()
             if tie_break in (None, k[2])}
    best = max(means, key=means.get)[:4]
    with_, without, _ = constant_means(runs, best)
    return best + (with_ is not None and with_ > without, )


def at_chosen_length(runs) -> list:
    r"""The runs at the rule length train --steps auto chooses on their KG
    (each KG counts once in the choices of the default's elements)."""
    return [run_ for run_ in runs
            if run_['num_steps'] == chosen_length(run_['dataset'])]


def constant_means(runs, setting) -> tuple:
    r"""Mean validation MRR of :obj:`setting` with and without constant
    rules over the runs at the chosen rule length that have both, and those
    runs' datasets."""
    on, off, names = [], [], []
    for run_ in at_chosen_length(runs):
        rows = {key(row): row['valid']['realistic']
                for row in run_['settings']}
        if setting[:4] + (True, ) in rows and setting[:4] + (False, ) in rows:
            on.append(rows[setting[:4] + (True, )])
            off.append(rows[setting[:4] + (False, )])
            names.append(run_['dataset'])
    if not on:
        return None, None, names
    return statistics.mean(on), statistics.mean(off), names


def default_test(run_, row, per_relation: bool) -> float:
    r"""Test MRR of train --scorer auto: as run (choose_scorer) where the
    run has it, else the applied rules or the model, whichever has the
    better validation MRR, per query relation where
    :obj:`per_relation`."""
    if 'default' in run_:
        return run_['default']['test']['realistic']['mrr']
    if per_relation:
        return row['per_relation']['test']['realistic']['mrr']
    if row['valid']['realistic'] >= run_['model']['valid']['realistic']:
        return row['test']['realistic']['mrr']
    return run_['model']['test']['realistic']


def per_relation_means(runs, best) -> tuple:
    r"""Mean two-fold validation MRR of the per-relation choice and of
    one choice for all queries, over the runs (any seed, at the chosen rule
    length) of the chosen setting :obj:`best` that record them, and those
    runs' datasets."""
    rows = [(run_['dataset'], row['per_relation']['valid_two_fold'])
            for run_ in at_chosen_length(runs) for row in run_['settings']
            if key(row) == best and 'per_relation' in row]
    if not rows:
        return None, None, []
    return (statistics.mean(r['per_relation'] for _, r in rows),
            statistics.mean(r['one_for_all'] for _, r in rows),
            [name for name, _ in rows])


def per_relation_chosen(runs, best) -> bool:
    r"""Whether the model-or-rules choice is made per query relation (the
    better two-fold validation estimate, see per_relation_means)."""
    per_relation, one_for_all, _ = per_relation_means(runs, best)
    return per_relation is not None and per_relation > one_for_all


def per_relation_sentence(runs, best) -> str:
    per_relation, one_for_all, names = per_relation_means(runs, best)
    if per_relation is None:
        return 'Model or rules per query relation: not run.'
    return (f'Model or rules per query relation (two-fold validation MRR, '
            f'each half choosing for the other, mean over {len(names)} runs '
            f"of {', '.join(sorted(set(names)))}): {per_relation:.4f}, "
            f'against {one_for_all:.4f} for one choice for all queries, so '
            f"{'per relation' if per_relation > one_for_all else 'one'}.")


def unseen_sentence(runs) -> str:
    r"""The two-fold validation MRR of choosing u on validation (from
    UNSEEN_CHOICES) against the first u for all, mean over the runs at the
    chosen rule length that have the default recorded."""
    rows = [(run_['dataset'], run_['default'])
            for run_ in at_chosen_length(runs) if 'default' in run_]
    if not rows:
        return 'The u of the confidences: not run with the default.'
    chosen = statistics.mean(d['valid_two_fold']['unseen_chosen']
                             for _, d in rows)
    fixed = statistics.mean(d['valid_two_fold']['unseen_fixed']
                            for _, d in rows)
    picked = ', '.join(f"{name} {d['unseen']:g}" for name, d in rows)
    return (f'The u of the confidences, chosen on each KG\'s validation set '
            f"from {', '.join(f'{u:g}' for u in UNSEEN_CHOICES)} "
            f'(two-fold validation MRR, mean over {len(rows)} runs of '
            f"{', '.join(sorted({name for name, _ in rows}))}): "
            f'{chosen:.4f}, against {fixed:.4f} with '
            f'u = {UNSEEN_CHOICES[0]:g} for all; chosen: {picked}.')


def ablation_lines(runs, best) -> list:
    r"""The default's elements added one at a time (seed 0): test MRR
    (validation MRR in brackets where one ranking is scored; the choices
    are made on validation)."""
    out = ['Ablation (seed 0; test MRR, realistic ties, validation MRR in '
           'brackets; each column adds one element to the one before; the '
           'last is the default):', '',
           '| dataset | L | model (sum over paths) | applied rules, u = '
           f'{best[0]:g} | + constant rules | + model or rules per query '
           'relation | + u chosen on validation | + aggregation chosen on '
           'validation (rules and model combined) |',
           '|---|---|---|---|---|---|---|---|']

    def cell(test, valid=None):
        return f'{test:.4f}' + ('' if valid is None else f' ({valid:.4f})')
    for run_ in runs:
        rows = {key(row): row for row in run_['settings']}
        plain, const = rows.get(best[:4] + (False, )), \
            rows.get(best[:4] + (True, ))
        if plain is None or const is None or 'default' not in run_:
            continue
        default = run_['default']
        # Runs before the aggregation was chosen: their default is max-plus.
        max_plus = default.get('max_plus', {
            'valid': default['valid'],
            'test': {'realistic': default['test']['realistic']['mrr']}})
        chosen = 'not run' if 'aggregation' not in default else \
            cell(default['test']['realistic']['mrr'],
                 default['valid']['realistic']) + \
            f" ({default['aggregation']})"
        out.append(
            f"| {run_['dataset']} | {run_['num_steps']} | "
            f"{cell(run_['model']['test']['realistic'], run_['model']['valid']['realistic'])} | "  # noqa: E501
            f"{cell(plain['test']['realistic']['mrr'], plain['valid']['realistic'])} | "  # noqa: E501
            f"{cell(const['test']['realistic']['mrr'], const['valid']['realistic'])} | "  # noqa: E501
            f"{cell(const['per_relation']['test']['realistic']['mrr'])} | "
            f"{cell(max_plus['test']['realistic'], max_plus['valid']['realistic'])} "  # noqa: E501
            f"(u = {default['unseen']:g}) | {chosen} |")
    return out


def all_runs() -> list:
    r"""The runs of seed 0 and of the other seeds."""
    return load_runs() + [json.load(open(path)) for path in sorted(
        glob.glob(os.path.join(FOLDER, 'seeds', '*.json')))]


def constants_sentence(runs, best) -> str:
    with_, without, names = constant_means(runs, best)
    if with_ is None:
        return 'Constant rules: not run with this setting.'
    return (f'Constant rules (chosen on the mean validation MRR of this '
            f"setting over {', '.join(names)}): {with_:.4f} with, "
            f'{without:.4f} without, so {"on" if best[4] else "off"}.')


def table():
    runs = load_runs()
    if not runs:
        raise SystemExit(f'no runs in {FOLDER}')
    best = chosen_setting(runs)
    chosen_on = [r for r in full_grid_runs(runs) if r['dataset'] in CHOSEN_ON]
    means = setting_means(runs)
    runs = [r for r in runs if any(key(s) == best for s in r['settings'])]
    per_relation = per_relation_chosen(all_runs(), best)
    lines = [
        f'Chosen on the mean validation MRR (realistic ties) over the '
        f'{len(chosen_on)} runs of the whole grid on ('
        f"{', '.join(r['dataset'] for r in chosen_on)}): unseen u = "
        f'{best[0]:g}, {best[1]} keys, tie-break {best[2]}, answer-type '
        f'rules {best[3]}.', '',
        constants_sentence(runs, best), '',
        per_relation_sentence(all_runs(), best), '',
        unseen_sentence(all_runs()), '',
        '| dataset | L | tie-break model | rules | model valid | applied '
        'valid | model test | applied test (realistic / optimistic) | H@1 '
        '| H@10 | default test (the better on validation'
        f"{', per query relation' if per_relation else ''}) |",
        '|---|---|---|---|---|---|---|---|---|---|---|']
    for run_ in runs:
        row = next(r for r in run_['settings'] if key(r) == best)
        test = row['test']
        lines.append(
            f"| {run_['dataset']} | {run_['num_steps']} | "
            f"{run_.get('tie_break_model', 'degreembed')} | "
            f"{row['num_rules']}"
            f" | {run_['model']['valid']['realistic']:.3f}"
            f" | {row['valid']['realistic']:.3f}"
            f" | {run_['model']['test']['realistic']:.3f}"
            f" | {test['realistic']['mrr']:.3f} / "
            f"{test['optimistic']['mrr']:.3f}"
            f" | {100 * test['realistic']['hits@1']:.1f}"
            f" | {100 * test['realistic']['hits@10']:.1f}"
            f" | {default_test(run_, row, per_relation):.3f} |")
    ablation = ablation_lines(runs, best)
    headline = lines + ['', *ablation, '', 'Every setting: '
                        '`benchmarks/results/applied_rules.md`.']
    lines += ['', 'Mean validation MRR of every setting:', '',
              '| unseen u | keys | tie-break | answer types '
              '| mean valid MRR |',
              '|---|---|---|---|---|']
    for k, mean in sorted(means.items()):
        lines.append(f'| {k[0]:g} | {k[1]} | {k[2]} | {k[3]} | '
                     f'{mean:.4f} |')
    lines += ['', 'Validation MRR of the chosen settings without / with '
              'constant rules:', '',
              '| dataset | L | tie-break | without | with |',
              '|---|---|---|---|---|']
    for run_ in runs:
        rows = {key(row): row['valid']['realistic']
                for row in run_['settings']}
        for tie_break in ('model', 'none'):
            setting = chosen_setting(load_runs(), tie_break)[:4]
            if setting + (True, ) in rows:
                lines.append(
                    f"| {run_['dataset']} | {run_['num_steps']} | {tie_break}"
                    f' | {rows[setting + (False, )]:.4f} | '
                    f'{rows[setting + (True, )]:.4f} |')
    lines += ['', *ablation]
    path = write_markdown('applied_rules.md', '\n'.join(lines),
                          'applied_rules.py')
    update_readme('applied_rules', '\n'.join(headline))
    print('\n'.join(lines))
    print('wrote', path)


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--dataset', action='append', default=[])
    parser.add_argument('--num-steps', type=int, default=2)
    parser.add_argument('--epochs', type=int, default=20)
    parser.add_argument('--model', default='degreembed', choices=MODELS,
                        help='the tie-break model trained')
    parser.add_argument('--unseen', type=float, nargs='+', default=UNSEEN)
    parser.add_argument('--quick', action='store_true',
                        help='only the settings chosen on the full grid')
    parser.add_argument('--table-only', action='store_true')
    parser.add_argument('--seed', type=int, default=0,
                        help='other seeds go to results/applied_rules/seeds/ '
                        '(the setting is chosen on seed 0\'s grid)')
    args = parser.parse_args()
    for name in args.dataset:
        run(name, args.num_steps, args.epochs, args.model, args.unseen,
            not args.quick, args.seed)
    table()
