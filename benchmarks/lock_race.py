"""Two ``pyg-degreembed train`` runs on one checkpoint path, the second
started while the first runs: exactly one may succeed.  Repeats the race
(20 times by default) with the second start delayed 0 to 2 s, so that it
lands in every stage of the first (start-up, loading, training, saving)
and counts double successes, which must be 0.

    python benchmarks/lock_race.py [--races 20]

Writes ``benchmarks/results/lock_race.json``.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch

from common import machine, write_json


def race(folder: str, delay: float) -> dict:
    checkpoint = os.path.join(folder, 'r.pt')
    for name in os.listdir(folder):
        os.remove(os.path.join(folder, name))

    def start(seed: int):
        return subprocess.Popen(
            [sys.executable, '-m', 'pyg_degreembed.cli', 'train',
             '--dataset', 'family', '--steps', '2', '--scorer', 'model',
             '--max-steps', '2', '--checkpoint', checkpoint, '--seed',
             str(seed), '--no-progress'], stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)

    first = start(1)
    time.sleep(delay)
    second = start(2)
    errors = [p.communicate()[1].strip() for p in (first, second)]
    codes = [first.returncode, second.returncode]
    seed = torch.load(checkpoint, weights_only=True)['fit']['seed'] \
        if os.path.exists(checkpoint) else None
    return {'delay_seconds': delay, 'exit_codes': codes,
            'errors': [e.splitlines()[-1] if e else '' for e in errors],
            'checkpoint_seed': seed,
            'double_success': codes == [0, 0],
            # The checkpoint is the one run that succeeded's.
            'consistent': codes.count(0) == 1 and
            seed == (1 if codes[0] == 0 else 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--races', type=int, default=20)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.races):
            delay = 2. * i / max(args.races - 1, 1)
            rows.append(race(folder, delay))
            print(rows[-1], flush=True)
    summary = {'races': len(rows),
               'double_successes': sum(r['double_success'] for r in rows),
               'consistent': sum(r['consistent'] for r in rows)}
    print(summary)
    write_json('lock_race.json', {'machine': machine(), 'summary': summary,
                                  'rows': rows})


if __name__ == '__main__':
    main()
