"""Equal wall time: our default command under a time budget against AnyBURL
given the same budget for learning and applying its rules.

    python benchmarks/anytime.py --datasets umls kinship --budgets 60 180
    python benchmarks/anytime.py                  # every dataset and budget
    python benchmarks/anytime.py --table-only

Per dataset and budget B, one run after the other, alone on the machine:

* ours: ``pyg-degreembed train --dataset X --time-budget B`` (everything
  else its defaults), in its own process; ``wall_seconds`` is the process's
  wall time less its test ranking (which the command times and reports:
  ``test_ranking_seconds``); ``test_mrr`` is the filtered test MRR with
  realistic ties; ``peak_rss_gb`` the process's peak (sampled).  On the
  GraIL splits (fb237_v1, WN18RR_v1) the model trained on X ranks the
  test triples of X_ind on X_ind's graph (``pyg-degreembed evaluate
  --graph``), timed apart like the test ranking, with the choice it makes
  on X_ind's own observed triples (which exist only once X_ind is given;
  its line ``on a new graph`` is in the log).
* AnyBURL (``../shared/tools/anyburl/run.sh``, release 23-1, 2 threads): its
  learning time is chosen so that learning + applying fit in B (applying
  includes its test predictions, which ours leaves out): first B/2 (B/4
  on FB15k-237, whose rules take long to apply), then, while a run does not
  fit, the learning time scaled by how much it missed; a run that fits in
  less than ``ROOM`` of B is followed once by one whose learning time is
  scaled up alike; at most three tries.  The row keeps the run with the
  longest learning time that fitted (every try is in ``anyburl_tries``).
  ``--anyburl-only`` runs AnyBURL's side of rows already written again
  (ours kept), the tries recorded reused where the policy asks for their
  learning time; ``--ours-only`` runs our side of rows already written
  again (AnyBURL's kept).  Its MRR is AnyBURL's own Eval (top-100
  candidates; an answer outside them counts 0).

Writes results/anytime/<dataset>.json (rows merged by budget: a rerun of a
budget replaces its row; each side run says when and on which commit:
``ran``) and regenerates results/anytime.md, the README's
table and results/anytime.png from every file.
"""
import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
from typing import Sequence

from common import (ANYBURL_DIR, RESULTS, SHARED, machine, ran,
                    timed, update_readme, write_json, write_markdown)

ANYBURL = os.path.join(ANYBURL_DIR, 'run.sh')
DATASETS = ['family', 'kinship', 'umls', 'wn18rr', 'fb15k-237', 'fb237_v1',
            'WN18RR_v1']
BUDGETS = {'fb15k-237': [600, 1800]}
DEFAULT_BUDGETS = [60, 180, 600]
INDUCTIVE = ('fb237_v1', 'WN18RR_v1')


def folder(name: str) -> str:
    if name in INDUCTIVE:
        return os.path.join(SHARED, 'grail', name)
    return os.path.join(SHARED, name)


def ours(dataset: str, budget: float, work: str,
         keep: str = None) -> dict:
    checkpoint = os.path.join(work, 'run.pt')
    argv = [sys.executable, '-m', 'pyg_degreembed.cli', 'train',
            '--dataset', folder(dataset), '--time-budget', str(budget),
            '--checkpoint', checkpoint, '--no-progress', '--overwrite']
    out, code, seconds, peak, _ = timed(argv)
    if code != 0:
        raise RuntimeError(f'{" ".join(argv)} failed:\n{out}')
    with open(os.path.splitext(checkpoint)[0] + '.json') as f:
        metrics = json.load(f)
    if keep is not None:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(checkpoint, os.path.join(keep, f'{dataset}-{budget}.pt'))
    row = {'test_mrr': metrics['metrics']['realistic']['mrr'],
           'wall_seconds': round(seconds - metrics['ranking_seconds'], 1),
           'run_seconds': round(metrics['run_seconds'], 1),
           'test_ranking_seconds': round(metrics['ranking_seconds'], 1),
           'peak_rss_gb': round(peak, 2),
           'log': [line for line in out.splitlines()
                   if line.startswith(('rule length', 'time budget',
                                       'mining', 'stopped', 'applied',
                                       'scorer', 'on new graphs',
                                       'checkpoint'))]}
    if dataset in INDUCTIVE:
        argv = [sys.executable, '-m', 'pyg_degreembed.cli', 'evaluate',
                '--checkpoint', checkpoint, '--graph',
                folder(dataset) + '_ind', '--json',
                os.path.join(work, 'ind.json')]
        out, code, seconds, peak, _ = timed(argv)
        if code != 0:
            raise RuntimeError(f'{" ".join(argv)} failed:\n{out}')
        with open(os.path.join(work, 'ind.json')) as f:
            metrics = json.load(f)
        row['log'] += [line for line in out.splitlines()
                       if line.startswith('on a new graph')]
        row['transductive_test_mrr'] = row['test_mrr']
        row['test_mrr'] = metrics['metrics']['realistic']['mrr']
        row['test_ranking_seconds'] = round(seconds, 1)
        row['peak_rss_gb'] = max(row['peak_rss_gb'], round(peak, 2))
    return row


def anyburl_once(dataset: str, learn: int, work: str) -> dict:
    base = folder(dataset)
    if dataset in INDUCTIVE:
        args = [os.path.join(base, 'train.txt'),
                os.path.join(base + '_ind', 'valid.txt'),
                os.path.join(base + '_ind', 'test.txt'),
                os.path.join(base + '_ind', 'train.txt')]
    else:
        trains = [os.path.join(base, f) for f in ('facts.txt', 'train.txt')
                  if os.path.exists(os.path.join(base, f))]
        args = [','.join(trains), os.path.join(base, 'valid.txt'),
                os.path.join(base, 'test.txt')]
    out_dir = os.path.join(work, f'anyburl-{learn}')
    out, code, seconds, _, _ = timed(['bash', ANYBURL, out_dir, str(learn),
                                      *args])
    if code != 0:
        raise RuntimeError(f'AnyBURL failed:\n{out}')
    result = json.loads(out.strip().splitlines()[-1])
    shutil.rmtree(out_dir, ignore_errors=True)
    return {'mrr': result['mrr'], 'learn_seconds': learn,
            'wall_seconds': round(seconds, 1),
            'learn_wall': result['learn_wall'],
            'apply_wall': result['apply_wall'],
            'peak_rss_gb': round(result['peak_rss_kb'] / 1e6, 2),
            'rules': result['rules']}


#: A run of AnyBURL that fits in less than this share of the budget is
#: followed by one that learns longer.
ROOM = 0.75


def anyburl(dataset: str, budget: float, work: str,
            known: Sequence[dict] = ()) -> dict:
    # The tries of the policy in the module's description; those of
    # `known` (recorded for this budget) are reused where the policy asks
    # for their learning time.
    known_runs = {run['learn_seconds']: run for run in known}
    learn = max(1, int(budget / (4 if dataset == 'fb15k-237' else 2)))
    tries, best, grown = [], None, False
    for _ in range(3):
        run = known_runs.get(learn) or anyburl_once(dataset, learn, work)
        tries.append(run)
        # Missed by wall - budget, or fitted with room: learn that much
        # less or more (apply scales with the rules, which grow with the
        # learning time).
        scaled = max(1, int(learn * budget / run['wall_seconds'] * 0.9))
        if run['wall_seconds'] <= budget:
            best = run if best is None or run['learn_seconds'] > \
                best['learn_seconds'] else best
            if grown or run['wall_seconds'] >= ROOM * budget or \
                    scaled <= learn:
                break
            grown = True
        elif best is not None:
            break
        learn = scaled
    if best is None:
        best = min(tries, key=lambda run: run['wall_seconds'])
        best = {**best, 'over_budget': True}
    return {**best, 'anyburl_tries': tries}


def table() -> str:
    lines = ['| dataset | budget (s) | ours: test MRR | ours: wall s '
             '(test ranking s) | AnyBURL: MRR | AnyBURL: learn s, wall s | '
             'ours - AnyBURL |',
             '|---|---|---|---|---|---|---|']
    for path in sorted(glob.glob(os.path.join(RESULTS, 'anytime',
                                              '*.json'))):
        with open(path) as f:
            result = json.load(f)
        for row in sorted(result['rows'], key=lambda r: r['budget_seconds']):
            o, a = row['ours'], row['anyburl']
            lines.append(
                f"| {result['dataset']} | {row['budget_seconds']} | "
                f"{o['test_mrr']:.3f} | {o['wall_seconds']:.0f} "
                f"({o['test_ranking_seconds']:.0f}) | {a['mrr']:.3f} | "
                f"{a['learn_seconds']}, {a['wall_seconds']:.0f}"
                f"{' (over budget)' if a.get('over_budget') else ''} | "
                f"{o['test_mrr'] - a['mrr']:+.3f} |")
    return '\n'.join(lines)


def figure():
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    paths = sorted(glob.glob(os.path.join(RESULTS, 'anytime', '*.json')))
    if not paths:
        return None
    fig, axes = plt.subplots(1, len(paths), figsize=(3.2 * len(paths), 3),
                             squeeze=False)
    for ax, path in zip(axes[0], paths):
        with open(path) as f:
            result = json.load(f)
        rows = sorted(result['rows'], key=lambda r: r['budget_seconds'])
        for who, key, style in (('ours', 'test_mrr', 'o-'),
                                ('anyburl', 'mrr', 's--')):
            ax.plot([r[who]['wall_seconds'] for r in rows],
                    [r[who][key] for r in rows], style,
                    label='ours' if who == 'ours' else 'AnyBURL')
        ax.set_title(result['dataset'])
        ax.set_xlabel('wall seconds')
        ax.set_xscale('log')
    axes[0][0].set_ylabel('test MRR')
    axes[0][0].legend()
    fig.tight_layout()
    path = os.path.join(RESULTS, 'anytime.png')
    fig.savefig(path, dpi=100)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--datasets', nargs='+', default=DATASETS)
    parser.add_argument('--budgets', nargs='+', type=float, default=None,
                        help='seconds (default: 60 180 600; FB15k-237 600 '
                        '1800)')
    parser.add_argument('--table-only', action='store_true')
    parser.add_argument('--anyburl-only', action='store_true',
                        help="rerun AnyBURL's side of rows already written")
    parser.add_argument('--ours-only', action='store_true',
                        help='rerun our side of rows already written')
    parser.add_argument('--keep-checkpoints', metavar='FOLDER',
                        help='copy each run of ours there, as '
                        '<dataset>-<budget>.pt (for a closer look)')
    args = parser.parse_args()
    if args.anyburl_only and args.ours_only:
        parser.error('--anyburl-only and --ours-only exclude each other')
    if not args.table_only:
        if not os.path.exists(ANYBURL) or shutil.which('java') is None:
            print(f'skipped: AnyBURL ({ANYBURL}) or java not found')
            return
        for dataset in args.datasets:
            if not os.path.isdir(folder(dataset)):
                print(f'skipped {dataset}: {folder(dataset)} not found')
                continue
            path = os.path.join(RESULTS, 'anytime', f'{dataset}.json')
            result = {'dataset': dataset, 'rows': []}
            if os.path.exists(path):
                with open(path) as f:
                    result = json.load(f)
            for budget in args.budgets or BUDGETS.get(dataset,
                                                      DEFAULT_BUDGETS):
                budget = int(budget) if budget == int(budget) else budget
                old = [r for r in result['rows']
                       if r['budget_seconds'] == budget]
                if (args.anyburl_only or args.ours_only) and not old:
                    print(f'skipped {dataset} at {budget}s: no row to keep')
                    continue
                when = ran()
                with tempfile.TemporaryDirectory() as work:
                    row = {'budget_seconds': budget,
                           'ours': old[0]['ours'] if args.anyburl_only else
                           {**ours(dataset, budget, work,
                                   args.keep_checkpoints), 'ran': when},
                           'anyburl': old[0]['anyburl'] if args.ours_only
                           else {**anyburl(dataset, budget, work,
                                           old[0]['anyburl']['anyburl_tries']
                                           if args.anyburl_only else ()),
                                 'ran': when}}
                print(json.dumps({'dataset': dataset, **row,
                                  'ours': {k: v for k, v in
                                           row['ours'].items()
                                           if k != 'log'}}), flush=True)
                result['rows'] = [r for r in result['rows']
                                  if r['budget_seconds'] != budget] + [row]
                result['machine'] = machine()
                write_json(os.path.join('anytime', f'{dataset}.json'),
                           result)
    text = table()
    write_markdown('anytime.md', text, 'anytime.py')
    update_readme('anytime-headline', text)
    figure()
    print(text)


if __name__ == '__main__':
    main()
