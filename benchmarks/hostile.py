"""The slow cases of the hostile-input suite, run as a user would (one
process at a time), each against its bound:

* ``--steps 1000000``: refused in one line within seconds (was 6 GB in 40 s);
* a star KG (one hub with 110k ``member`` edges, and a few other relations)
  through the default ``train`` under a 60 s budget: ends within the budget
  (the test ranking timed apart) and a few GB;
* SIGTERM in the middle of the first epoch of FB15k-237 (WN18RR where it is
  absent): exits within seconds with a resumable checkpoint of where it
  stood, and ``--resume`` goes on from that step.

    python benchmarks/hostile.py

Writes ``benchmarks/results/hostile.json`` and ``hostile.md``.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import torch

from common import SHARED, largest_rss, machine, write_json, write_markdown

CLI = [sys.executable, '-m', 'pyg_degreembed.cli']


def run(argv, folder, signal_after=None):
    # The command's exit code, wall seconds, peak RSS (GB, its own), last
    # stderr line and, with signal_after, seconds from SIGTERM to its end.
    out = open(os.path.join(folder, 'out.txt'), 'w')
    err = open(os.path.join(folder, 'err.txt'), 'w')
    start = time.perf_counter()
    proc = subprocess.Popen(CLI + argv, stdout=out, stderr=err)
    sent, peak = None, 0

    def wait(seconds=float('inf')):
        # Until the command ends or `seconds` from the start, its RSS
        # sampled (its own ru_maxrss is reset by its memory probes).
        nonlocal peak
        while proc.poll() is None and \
                time.perf_counter() - start < seconds:
            peak = max(peak, largest_rss(proc.pid))
            time.sleep(0.2)

    if signal_after is not None:
        wait(signal_after)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            sent = time.perf_counter()
    wait()
    status = proc.wait()
    end = time.perf_counter()
    out.close()
    err.close()
    lines = open(os.path.join(folder, 'err.txt')).read().strip().splitlines()
    return {'command': 'pyg-degreembed ' + ' '.join(argv),
            'exit_code': status,
            'wall_seconds': round(end - start, 1),
            'peak_rss_gb': round(peak / 1e9, 2),
            'stderr_last_line': lines[-1] if lines else '',
            'seconds_after_signal': None if sent is None else
            round(end - sent, 1)}


def star_file(path, leaves=110_000):
    with open(path, 'w') as f:
        for i in range(leaves):
            f.write(f'p{i}\tmember\thub\n')
            if i % 10 == 0:  # some structure besides the hub
                f.write(f'p{i}\tknows\tp{(i * 7 + 3) % leaves}\n')
            if i % 50 == 0:
                f.write(f'p{i}\tlives_in\tcity{i % 97}\n')


def main():
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = os.path.join(folder, 'run.pt')
        row = run(['train', '--dataset', 'family', '--steps', '1000000',
                   '--epochs', '1', '--checkpoint', checkpoint], folder)
        rows.append({'case': 'rule length 1e6', 'bound': 'exit 2 in < 10 s',
                     'held': row['exit_code'] == 2 and
                     row['wall_seconds'] < 10, **row})
        print(rows[-1], flush=True)

        star = os.path.join(folder, 'star.tsv')
        star_file(star)
        row = run(['train', '--dataset', star, '--time-budget', '60',
                   '--checkpoint', checkpoint, '--no-progress'], folder)
        metrics = os.path.splitext(checkpoint)[0] + '.json'
        run_seconds = json.load(open(metrics))['run_seconds'] \
            if os.path.exists(metrics) else None
        rows.append({'case': 'star KG, 110k leaves, --time-budget 60',
                     'bound': 'exit 0, run <= 66 s, < 8 GB',
                     'run_seconds': run_seconds,
                     'held': row['exit_code'] == 0 and run_seconds is not None
                     and run_seconds <= 66 and row['peak_rss_gb'] < 8, **row})
        print(rows[-1], flush=True)
        os.remove(checkpoint)

        name = 'fb15k-237' if os.path.isdir(
            os.path.join(SHARED, 'fb15k-237')) else 'wn18rr'
        data = os.path.join(SHARED, name)
        if os.path.isdir(data):
            argv = ['train', '--dataset', data, '--steps', '3', '--scorer',
                    'model', '--time-budget', 'none', '--checkpoint',
                    checkpoint, '--no-progress']
            row = run(argv, folder, signal_after=120)
            state = torch.load(checkpoint, weights_only=True)['state'] \
                if os.path.exists(checkpoint) else None
            step = state and state['global_step']
            rows.append({'case': f'SIGTERM 120 s into {name} (first epoch)',
                         'bound': 'exit 143 within 10 s of the signal, a '
                         'checkpoint of the step reached',
                         'saved_step': step,
                         'held': row['exit_code'] == 143 and
                         row['seconds_after_signal'] <= 10 and bool(step),
                         **row})
            print(rows[-1], flush=True)
            if step:
                row = run(argv + ['--resume', '--max-steps', str(step + 2)],
                          folder)
                after = torch.load(checkpoint, weights_only=True)['state']
                rows.append({'case': '--resume of it, 2 steps more',
                             'bound': 'exit 0, global step + 2',
                             'held': row['exit_code'] == 0 and
                             after['global_step'] == step + 2, **row})
                print(rows[-1], flush=True)
    write_json('hostile.json', {'machine': machine(), 'rows': rows})
    lines = ['| case | bound | held | exit | wall s | peak RSS GB | '
             'last line |', '|---|---|---|---|---|---|---|']
    lines += [f"| {r['case']} | {r['bound']} | "
              f"{'yes' if r['held'] else '**no**'} | {r['exit_code']} | "
              f"{r['wall_seconds']} | {r['peak_rss_gb']} | "
              f"{r['stderr_last_line'][:140]} |" for r in rows]
    write_markdown('hostile.md', '\n'.join(lines), 'hostile.py')
    print('\n'.join(lines))


if __name__ == '__main__':
    main()
