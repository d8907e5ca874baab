"""Helpers shared by the benchmark scripts: machine description and atomic
result files."""
import os
import platform
import subprocess
import sys

import torch
import torch_geometric

from pyg_degreembed.checkpoint import save_json

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'results')


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
