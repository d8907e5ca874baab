"""The default command end to end on synthetic KGs with planted rules, from
100k triples up: per size, each stage's wall time, the peak RSS, the test
MRR against sampled candidates and the recall of the planted rules.

    python benchmarks/scale_end_to_end.py --triples 100000 1000000
    python benchmarks/scale_end_to_end.py --triples 1000000 --processes 2
    python benchmarks/scale_end_to_end.py --table-only

Per size T: a KG of T triples requested over T / 10 entities and 50
relations (``synthetic.py``, seed 0, 500 valid and 500 test triples,
generated into ``--work`` and kept there), then ``pyg-degreembed train
--dataset <it> --time-budget B --eval-candidates 500 --max-memory 20``
(``--max-memory``, GB: the issue's 20 GB) with B = T / 1e6 x
``--seconds-per-million`` (720: two hours at 10M), at least 60 s,
everything else its defaults, alone on the machine in its own process
(with ``--processes P > 1`` under ``torchrun --nproc_per_node P``, gloo),
its RSS sampled every 0.5 s (``common.timed``).

A row: ``num_triples`` (generated), ``num_entities``, ``processes``,
``budget_seconds``, ``max_memory_gb``, ``wall_seconds`` (the command's,
less its test ranking), ``stage_seconds`` (set-up, mining, training,
choice: what the command's metrics file records), ``test_ranking_seconds``,
``peak_rss_gb`` (of the command, the largest process under torchrun),
``peak_rss_stage`` (the stage it was sampled in),
``mrr_sampled`` (realistic ties, each test answer against 500 filtered
candidates drawn at random: the OGB protocol, not comparable with full
ranking),
``planted_recall`` (the share of the planted rules among the 10 best rules
of their head relation in the checkpoint's applied rules,
``synthetic.planted_recall``) and the command's summary lines.

Writes results/scale_end_to_end.json (rows merged by size and processes),
results/scale_end_to_end.md and results/scale_end_to_end.png (wall seconds
per stage against triples, log-log; the .md gives the slopes between
consecutive sizes).
"""
import argparse
import json
import math
import os
import re
import sys
from typing import Optional

from common import (RESULTS, figure, machine, save_figure, timed,
                    write_json, write_markdown)
from synthetic import generate, planted_recall, write

from pyg_degreembed import AppliedRules, load_dataset
from pyg_degreembed.training.checkpoint import load_checkpoint

OUTPUT = 'scale_end_to_end.json'
STAGES = ('set-up', 'mining', 'training', 'choice')
EVAL_CANDIDATES = 500
#: Valid and test triples at most (each): ranking a query costs about the
#: whole graph's edges, for the model and the rules alike.
MAX_EVAL = 500


def dataset(triples: int, work: str) -> str:
    folder = os.path.join(work, f'synthetic-{triples}')
    if not os.path.exists(os.path.join(folder, 'planted.json')):
        splits, planted = generate(triples, max(triples // 10, 100),
                                   max_eval=MAX_EVAL)
        write(folder, splits, planted, 50)
    return folder


def recall(checkpoint: str, folder: str) -> float:
    payload = load_checkpoint(checkpoint)
    if 'rules' not in payload:
        return 0.
    data = load_dataset(folder)
    with open(os.path.join(folder, 'planted.json')) as f:
        planted = json.load(f)
    return planted_recall(AppliedRules.from_payload(payload['rules']), data,
                          planted)


def run(triples: int, processes: int, seconds_per_million: float,
        work: str, max_memory: Optional[float]) -> dict:
    folder = dataset(triples, work)
    budget = max(60., triples / 1e6 * seconds_per_million)
    checkpoint = os.path.join(work, f'run-{triples}-{processes}.pt')
    launcher = [sys.executable, '-m', 'pyg_degreembed.cli'] \
        if processes == 1 else \
        [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node',
         str(processes), '-m', 'pyg_degreembed.cli']
    argv = [*launcher, 'train', '--dataset',
            folder, '--time-budget', f'{budget:g}', '--eval-candidates',
            str(EVAL_CANDIDATES), '--checkpoint', checkpoint, '--no-progress',
            '--overwrite']
    if max_memory is not None:
        argv += ['--max-memory', f'{max_memory:g}']
    out, code, seconds, peak, peak_at = timed(argv)
    if code != 0:
        raise RuntimeError(f'{" ".join(argv)} failed:\n{out}')
    with open(os.path.splitext(checkpoint)[0] + '.json') as f:
        metrics = json.load(f)
    sizes = {}
    for split in ('train', 'valid', 'test'):
        with open(os.path.join(folder, f'{split}.txt')) as f:
            sizes[split] = sum(1 for _ in f)
    entities = re.search(r'^(\d+) entities, ', out, re.M)
    return {
        'num_triples': sum(sizes.values()),
        'num_triples_requested': triples,
        'num_entities': int(entities.group(1)),
        'processes': processes,
        'budget_seconds': round(budget, 1),
        'max_memory_gb': max_memory,
        'wall_seconds': round(seconds - metrics['ranking_seconds'], 1),
        'run_seconds': round(metrics['run_seconds'], 1),
        'stage_seconds': {k: round(v, 1) for k, v in
                          metrics['stage_seconds'].items()},
        'test_ranking_seconds': round(metrics['ranking_seconds'], 1),
        'peak_rss_gb': round(peak, 2),
        'peak_rss_stage': stage_at(peak_at, metrics['stage_seconds']),
        'mrr_sampled': metrics['metrics']['realistic']['mrr'],
        'eval_candidates': metrics['eval_candidates'],
        'planted_recall': recall(checkpoint, folder),
        'log': [line for line in out.splitlines()
                if line.startswith(('rule length', 'batch size',
                                    'time budget', 'mining', 'stopped',
                                    'applied', 'scorer', 'checkpoint'))],
    }


def stage_at(seconds: float, stage_seconds: dict) -> str:
    # The stage running :obj:`seconds` into the command (its stages' wall
    # seconds in order; the interpreter's start counted in the first, the
    # test ranking after the last).
    end = 0.
    for stage, length in stage_seconds.items():
        end += length
        if seconds <= end:
            return stage
    return 'test ranking'


def slopes(rows, key=lambda r: r['wall_seconds']) -> str:
    # The slopes of log(seconds) against log(triples) between consecutive
    # sizes run with one process.
    rows = sorted((r for r in rows if r['processes'] == 1),
                  key=lambda r: r['num_triples'])
    if len(rows) < 2:
        return 'n/a'
    return ', '.join(
        f"{_size(a)}-{_size(b)} "
        f"{math.log(key(b) / key(a)) / math.log(b['num_triples'] / a['num_triples']):.2f}"  # noqa: E501
        for a, b in zip(rows, rows[1:]))


def _size(row) -> str:
    # 1027895 -> '1M', 309457 -> '300k': the size as requested.
    n = row['num_triples_requested']
    return f'{n // 10**6}M' if n >= 10**6 else f'{n // 1000}k'


def table(rows) -> str:
    lines = ['| triples | entities | processes | budget s | memory limit GB '
             '| wall s | '
             + ' | '.join(f'{s} s' for s in STAGES) +
             ' | test ranking s | peak RSS GB | MRR (500 sampled) | '
             'planted recall |',
             '|' + '---|' * (10 + len(STAGES))]
    for r in sorted(rows, key=lambda r: (r['num_triples'], r['processes'])):
        lines.append(
            f"| {r['num_triples']:,} | {r['num_entities']:,} | "
            f"{r['processes']} | {r['budget_seconds']:.0f} | "
            f"{r.get('max_memory_gb') or '-'} | "
            f"{r['wall_seconds']:.0f} | " + ' | '.join(
                f"{r['stage_seconds'].get(s, 0):.0f}" for s in STAGES) +
            f" | {r['test_ranking_seconds']:.0f} | {r['peak_rss_gb']:.1f}"
            + (f" ({r['peak_rss_stage']})" if 'peak_rss_stage' in r else '')
            + ' | '
            f"{r['mrr_sampled']:.3f} | {r['planted_recall']:.2f} |")
    lines.append('')
    lines.append('Slopes of log(seconds) against log(triples), one '
                 'process, between consecutive sizes: wall '
                 f'{slopes(rows)}; set-up '
                 f"{slopes(rows, lambda r: r['stage_seconds']['set-up'])}; "
                 'test ranking '
                 f"{slopes(rows, lambda r: r['test_ranking_seconds'])}.")
    return '\n'.join(lines)


def plot(rows):
    rows = sorted((r for r in rows if r['processes'] == 1),
                  key=lambda r: r['num_triples'])
    if not rows:
        return None
    fig, axes = figure(1, 1, (5, 3.5))
    ax = axes[0][0]
    x = [r['num_triples'] for r in rows]
    for stage in STAGES:
        ax.plot(x, [max(r['stage_seconds'].get(stage, 0), 0.1)
                    for r in rows], 'o-', label=stage)
    ax.plot(x, [r['test_ranking_seconds'] for r in rows], 's--',
            label='test ranking')
    ax.plot(x, [r['wall_seconds'] for r in rows], 'k^-', label='wall')
    ax.set_xscale('log')
    ax.set_yscale('log')
    ax.set_xlabel('triples')
    ax.set_ylabel('seconds')
    ax.legend(fontsize=7)
    fig.tight_layout()
    return save_figure(fig, 'scale_end_to_end.png')


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--triples', nargs='+', type=int,
                        default=[100_000, 1_000_000])
    parser.add_argument('--processes', type=int, default=1)
    parser.add_argument('--seconds-per-million', type=float, default=720.)
    parser.add_argument('--work', default=os.path.join('runs', 'scale'))
    parser.add_argument('--max-memory', type=float, default=20.,
                        help="train's --max-memory in GB (0: none)")
    parser.add_argument('--table-only', action='store_true')
    args = parser.parse_args()
    path = os.path.join(RESULTS, OUTPUT)
    result = {'rows': []}
    if os.path.exists(path):
        with open(path) as f:
            result = json.load(f)
    if not args.table_only:
        os.makedirs(args.work, exist_ok=True)
        for triples in args.triples:
            row = run(triples, args.processes, args.seconds_per_million,
                      args.work, args.max_memory or None)
            print(json.dumps({k: v for k, v in row.items() if k != 'log'}),
                  flush=True)
            result['rows'] = [
                r for r in result['rows']
                if (r['num_triples_requested'], r['processes']) !=
                (triples, args.processes)] + [row]
            result['machine'] = machine()
            write_json(OUTPUT, result)
    text = table(result['rows'])
    write_markdown('scale_end_to_end.md', text, 'scale_end_to_end.py')
    plot(result['rows'])
    print(text)


if __name__ == '__main__':
    main()
