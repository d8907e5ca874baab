r"""The examples that run in CI, in their small settings."""
import os
import subprocess
import sys

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'examples')


def test_degree_weighted_gnn_quick():
    out = subprocess.run([sys.executable, os.path.join(
        EXAMPLES, 'degree_weighted_gnn.py'), '--quick'], capture_output=True,
        text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    table = out.stdout.split('filtered test metrics')[1].splitlines()[2:]
    rows = {line.split()[0] + ('+rho' if 'rho' in line else ''):
            [float(v) for v in line.split()[-4:]] for line in table}
    assert set(rows) == {'GraphConv', 'GraphConv+rho', 'RGCN', 'RGCN+rho'}
    for mrr, h1, h10, seconds in rows.values():
        assert 0 < h1 <= mrr <= h10 <= 1 and seconds > 0
    # Different networks (the weights change what they learn).
    for layer in ('GraphConv', 'RGCN'):
        assert rows[layer][:3] != rows[layer + '+rho'][:3]
