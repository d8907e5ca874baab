r"""The documentation builds offline with warnings as errors (the guide and
the API reference generated from the docstrings)."""
import os
import shutil
import subprocess
import sys

DOCS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'docs')


def test_docs_build_without_warnings(tmp_path):
    source = tmp_path / 'docs'
    shutil.copytree(DOCS, source, ignore=shutil.ignore_patterns(
        '_build', 'generated'))
    # conf.py imports the package from the folder above it.
    os.symlink(os.path.abspath(os.path.join(DOCS, '..', 'pyg_degreembed')),
               tmp_path / 'pyg_degreembed')
    proc = subprocess.run(
        [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-b', 'html',
         '-q', str(source), str(tmp_path / 'html')], capture_output=True,
        text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (tmp_path / 'html' / 'generated' /
            'pyg_degreembed.training.loop.html').read_text()
    assert 'max_steps' in page  # fit's docstring, in full
    assert (tmp_path / 'html' / 'guide' / 'applied-rules.html').exists()
