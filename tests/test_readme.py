r"""The README is a product page that runs: its Python tour and its command
line tour run as written (training shortened to one epoch, to keep CI
short), so they can never drift from the API; it stays short, and no
document tells history (that is CHANGELOG.md's job)."""
import glob
import os
import re
import shlex
import subprocess
import sys

from pyg_degreembed.cli import main

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
README = os.path.join(ROOT, 'README.md')


def snippet(marker: str, language: str) -> str:
    text = open(README, encoding='utf-8').read()
    match = re.search(rf'<!-- snippet:{marker} -->\n```{language}\n(.*?)```',
                      text, re.S)
    assert match, f'no snippet {marker!r} in README.md'
    return match.group(1)


def test_the_readme_is_short_and_documents_tell_no_history():
    assert len(open(README, encoding='utf-8').read()) <= 12_000
    pages = [README, os.path.join(ROOT, 'benchmarks', 'README.md')] + \
        glob.glob(os.path.join(ROOT, 'docs', '**', '*.md'), recursive=True)
    for page in pages:
        text = open(page, encoding='utf-8').read().lower()
        for words in (r'this\s+release', r'previous\s+release', 'sitting'):
            assert not re.search(words, text), (page, words)


def test_python_tour_runs(tmp_path):
    code = snippet('quick-tour', 'python')
    assert len(code.strip().splitlines()) <= 15
    assert 'epochs=10' in code
    proc = subprocess.run(
        [sys.executable, '-c', code.replace('epochs=10', 'epochs=1')],
        cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines()  # less fit's log
             if not line.startswith(('epoch', 'threads:'))]
    assert 0 < float(lines[0]) <= 1  # the MRR
    answers = [line.split() for line in lines[1:4]]
    assert all(len(a) in (2, 3) and float(a[1]) > 0 for a in answers)
    assert ['1', 'known'] in [[a[0], a[-1]] for a in answers]
    assert all(line.startswith('daughter(X,Y) <= ') for line in lines[4:7])
    assert len(lines) == 10  # then 3 paths, each atoms and a share
    assert all('(' in line and float(line.split()[-1]) > 0
               for line in lines[7:])


def test_command_line_tour_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    commands = [line.split('#')[0].strip() for line in
                snippet('cli', 'bash').strip().splitlines()]
    assert len(commands) == 6
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == 'pyg-degreembed'
        if argv[1] == 'train':
            argv += ['--epochs', '1', '--dim', '8', '--no-progress']
        assert main(argv[1:]) == 0, command
        out = capsys.readouterr().out
        if argv[1] == 'predict':
            assert out.splitlines()[0] == 'query: 3 daughter ?'
            assert re.search(r'\b1 +\(known\)', out), out
        if argv[1] == 'explain':
            assert out.startswith('score of 1 for 3 daughter ?')
        if '--format' in argv:
            assert all(len(line.split('\t')) == 4
                       for line in out.splitlines())
