"""Helpers shared by the benchmark scripts: machine description and atomic
result files."""
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import torch
import torch_geometric

from pyg_degreembed import compute_ranks, fit
from pyg_degreembed.checkpoint import save_json
from pyg_degreembed.datasets import BUNDLED, load_dataset
from pyg_degreembed.evaluation import TIE_POLICIES

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'results')
#: The benchmark datasets: $PYG_DEGREEMBED_DATASETS, else ../shared/datasets
#: beside the checkout.
SHARED = os.environ.get('PYG_DEGREEMBED_DATASETS') or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared',
    'datasets')


def machine() -> dict:
    cpu = platform.processor()
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    cpu = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass

    def git(*args):
        return subprocess.run(['git', *args], capture_output=True, text=True,
                              cwd=os.path.dirname(RESULTS)).stdout.strip()

    try:
        commit = git('rev-parse', '--short', 'HEAD')
        if git('status', '--porcelain', '--', '../pyg_degreembed'):
            commit += '+uncommitted-changes'
    except OSError:
        commit = ''
    return {
        'cpu': cpu,
        'cores': os.cpu_count(),
        'torch_threads': torch.get_num_threads(),
        'python': platform.python_version(),
        'torch': torch.__version__,
        'torch_geometric': torch_geometric.__version__,
        'platform': platform.platform(),
        'git_commit': commit,
        'command': ' '.join([os.path.basename(sys.executable)] + sys.argv),
    }


def write_json(name: str, payload: dict) -> str:
    r"""Writes :obj:`payload` to :obj:`benchmarks/results/name`
    atomically."""
    path = os.path.join(RESULTS, name)
    save_json(path, payload)
    return path


def save_run(name: str, fields: dict, info: dict) -> str:
    r"""Writes one run as :obj:`results/name`: :obj:`fields` (what was
    run), :obj:`info` (what was measured), the peak RSS and the machine."""
    return write_json(name, {
        **fields, **info,
        'peak_rss_gb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss /
        1e6,
        'machine': machine()})


def load_benchmark(name: str):
    r"""A bundled dataset by name, or a folder of
    :obj:`../shared/datasets`."""
    folder = name if name in BUNDLED else os.path.join(SHARED, name)
    if not os.path.isdir(folder) and name not in BUNDLED:
        raise SystemExit(f'{name}: no folder at {os.path.normpath(SHARED)}')
    return load_dataset(folder)


def test_metrics(ranks) -> dict:
    r"""Overall test metrics under every tie policy."""
    return {tie: {k: v for k, v in ranks.metrics(tie).items()
                  if k != 'per_relation'} for tie in TIE_POLICIES}


def fit_and_test(model, data, epochs: int, seed: int, patience: int = 3,
                 **fit_kwargs) -> dict:
    r"""Trains a rule reasoner with :func:`pyg_degreembed.fit` (the paper's
    settings unless :obj:`fit_kwargs` say otherwise, early stopping on
    validation after :obj:`patience` epochs without improvement) and ranks
    the test triples with the weights that were best on validation."""
    start = time.perf_counter()
    result = fit(model, data, epochs=epochs, patience=patience, seed=seed,
                 progress=False, **fit_kwargs)
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    ranks = compute_ranks(model, data, 'test', batch_size=256)
    return {'epochs': len(result.history),
            'best_epoch': result.best_epoch,
            'best_valid_mrr': result.best_valid_mrr,
            'seconds_per_epoch': statistics.mean(
                h['seconds'] for h in result.history),
            'history': result.history,
            'train_seconds': train_seconds,
            'test_seconds': time.perf_counter() - start,
            'test': test_metrics(ranks)}


HITS = ('hits@1', 'hits@3', 'hits@10')


def figure(rows: int, cols: int, size):
    r"""A matplotlib figure with the non-interactive backend."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt.subplots(rows, cols, squeeze=False, figsize=size)


def hits_bars(ax, runs, title: str):
    r"""Grouped bars of test Hits@1/3/10 (%, realistic ties) of
    :obj:`runs`, a list of (label, run JSON)."""
    width = 0.8 / max(len(runs), 1)
    for j, (label, run) in enumerate(runs):
        m = run['test']['realistic']
        bars = ax.bar([i + j * width for i in range(len(HITS))],
                      [100 * m[k] for k in HITS], width, label=label)
        ax.bar_label(bars, fmt='%.0f', fontsize=6)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(HITS))],
                  ['Hits@1', 'Hits@3', 'Hits@10'])
    ax.set(title=title, ylim=(0, 110))


def metric_cells(run) -> str:
    r"""Test MRR and Hits@1/3/10 (%, realistic ties) as table cells."""
    m = run['test']['realistic']
    hits = ' | '.join(f'{100 * m[k]:.1f}' for k in HITS)
    return f'{m["mrr"]:.3f} | {hits}'


def save_figure_and_table(name: str, fig, lines, script: str):
    r"""Writes :obj:`results/name.png` and :obj:`results/name.md`."""
    fig.tight_layout()
    png = os.path.join(RESULTS, f'{name}.png')
    fig.savefig(png, dpi=120)
    with open(os.path.join(RESULTS, f'{name}.md'), 'w') as f:
        f.write(f'<!-- generated by benchmarks/{script} -->\n' +
                '\n'.join(lines) + '\n')
    print('\n'.join(lines))
    print('wrote', png)


def update_readme(name: str, text: str):
    r"""Replaces the block between :obj:`<!-- name:start -->` and
    :obj:`<!-- name:end -->` of the top-level README.md with :obj:`text`."""
    readme = os.path.join(os.path.dirname(RESULTS), '..', 'README.md')
    start, end = f'<!-- {name}:start -->', f'<!-- {name}:end -->'
    content = open(readme).read()
    if start not in content or end not in content:
        return
    head, rest = content.split(start, 1)
    content = head + start + '\n' + text + '\n' + end + \
        rest.split(end, 1)[1]
    with open(readme, 'w') as f:
        f.write(content)
