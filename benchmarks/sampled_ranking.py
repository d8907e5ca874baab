"""The test ranking against sampled candidates (``--eval-candidates``) of a
trained checkpoint, timed, for this checkout and optionally an earlier
commit in the same run.

    python benchmarks/sampled_ranking.py \
        --checkpoint runs/scale/run-10000000-1.pt \
        --dataset runs/scale/synthetic-10000000 --triples 50 \
        --compare-with 9bbd754

Each version runs in its own process, one after the other, alone on the
machine: it loads the checkpoint (``scorer_from_checkpoint``, the scorer the
run chose) and the KG, ranks the first test triple (both directions: the
graph is built and the model's weights computed, once per process) and then
the first ``--triples`` test triples (``2 x triples`` queries) against
``--candidates`` (500) filtered candidates drawn at random (seed 0), as
``compute_ranks(..., num_candidates=)`` does. ``--compare-with REV`` runs the
same measurement on the package of commit REV (a ``git worktree`` of it,
removed afterwards). The checkpoint and KG of ``scale_end_to_end.py``
(``--work``) serve: e.g. ``--triples 10000000`` there writes
``synthetic-10000000/`` and ``run-10000000-1.pt``.

Per version: ``first_seconds`` (the first triple, with the one-off work),
``seconds`` and ``seconds_per_query`` (the others), the MRR (realistic
ties) of the ``--triples`` triples and the peak RSS. Writes
results/sampled_ranking.json (one entry per checkpoint file name).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from common import RESULTS, machine, write_json

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(checkpoint: str, folder: str, triples: int,
            candidates: int) -> dict:
    import pyg_degreembed
    from pyg_degreembed import load_dataset
    from pyg_degreembed.data.kg import split_triples
    from pyg_degreembed.evaluation.ranks import compute_ranks
    from pyg_degreembed.training.budget import process_peak
    from pyg_degreembed.training.checkpoint import (load_checkpoint,
                                                    model_from_checkpoint,
                                                    scorer_from_checkpoint)
    payload = load_checkpoint(checkpoint)
    model = model_from_checkpoint(payload).eval()
    data = load_dataset(folder)
    scorer = scorer_from_checkpoint(payload, model)
    test = split_triples(data, 'test')
    start = time.perf_counter()
    compute_ranks(scorer, data, test[:, :1], num_candidates=candidates,
                  progress=False)
    first = time.perf_counter() - start
    start = time.perf_counter()
    ranks = compute_ranks(scorer, data, test[:, 1:triples + 1],
                          num_candidates=candidates, progress=False)
    seconds = time.perf_counter() - start
    return {'package': os.path.dirname(pyg_degreembed.__file__),
            'scorer': type(scorer).__name__,
            'first_seconds': round(first, 1),
            'seconds': round(seconds, 1),
            'queries': 2 * triples,
            'seconds_per_query': round(seconds / (2 * triples), 3),
            'mrr': ranks.metrics()['mrr'],
            'peak_rss_gb': round((process_peak() or 0) / 1e9, 2)}


def run_version(args, package_root: str) -> dict:
    # The measurement in its own process, importing the package from
    # package_root.
    env = dict(os.environ, PYTHONPATH=package_root)
    out = subprocess.run(
        [sys.executable, os.path.join(HERE, 'sampled_ranking.py'),
         '--measure', '--checkpoint', args.checkpoint, '--dataset',
         args.dataset, '--triples', str(args.triples), '--candidates',
         str(args.candidates)], env=env, capture_output=True, text=True,
        check=True, cwd=package_root)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--checkpoint', required=True)
    parser.add_argument('--dataset', required=True)
    parser.add_argument('--triples', type=int, default=50)
    parser.add_argument('--candidates', type=int, default=500)
    parser.add_argument('--compare-with')
    parser.add_argument('--measure', action='store_true',
                        help='measure in this process and print the JSON')
    args = parser.parse_args()
    args.checkpoint = os.path.abspath(args.checkpoint)
    args.dataset = os.path.abspath(args.dataset)
    if args.measure:
        print(json.dumps(measure(args.checkpoint, args.dataset, args.triples,
                                 args.candidates)))
        return
    root = os.path.dirname(HERE)
    versions = {'this checkout': run_version(args, root)}
    if args.compare_with:
        with tempfile.TemporaryDirectory() as tmp:
            tree = os.path.join(tmp, 'tree')
            subprocess.run(['git', 'worktree', 'add', '--detach', tree,
                            args.compare_with], cwd=root, check=True,
                           capture_output=True)
            try:
                versions[args.compare_with] = run_version(args, tree)
            finally:
                subprocess.run(['git', 'worktree', 'remove', '--force',
                                tree], cwd=root, capture_output=True)
    path = os.path.join(RESULTS, 'sampled_ranking.json')
    results = {}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    results[os.path.basename(args.checkpoint)] = {
        'triples': args.triples, 'candidates': args.candidates,
        'versions': versions, 'machine': machine()}
    write_json('sampled_ranking.json', results)
    for name, v in versions.items():
        print(f"{name}: first triple {v['first_seconds']} s, then "
              f"{v['queries']} queries in {v['seconds']} s "
              f"({v['seconds_per_query']} s each), MRR {v['mrr']:.4f}, "
              f"peak {v['peak_rss_gb']} GB")


if __name__ == '__main__':
    main()
