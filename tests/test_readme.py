r"""The README's Python snippet runs as written (with one epoch instead of
ten, to keep CI short), so it can never drift from the API."""
import os
import re
import subprocess
import sys

README = os.path.join(os.path.dirname(__file__), '..', 'README.md')


def snippet(marker: str) -> str:
    text = open(README, encoding='utf-8').read()
    match = re.search(rf'<!-- snippet:{marker} -->\n```python\n(.*?)```',
                      text, re.S)
    assert match, f'no snippet {marker!r} in README.md'
    return match.group(1)


def test_using_it_snippet_runs(tmp_path):
    code = snippet('using-it')
    assert len(code.strip().splitlines()) < 15
    assert 'epochs=10' in code
    code = code.replace('epochs=10', 'epochs=1')
    proc = subprocess.run([sys.executable, '-c', code], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines()  # less fit's log
             if not line.startswith(('epoch', 'threads:'))]
    assert 0 < float(lines[0]) <= 1  # the MRR
    assert '<=' in lines[1] and len(lines) >= 5  # then rules and paths
