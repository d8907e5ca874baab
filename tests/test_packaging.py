r"""The package as it would be published: a wheel and an sdist build from
the tracked files, hold the typing marker and the bundled data, and install
into a fresh virtual environment whose import test passes.  Skipped where
the :obj:`build` package is absent."""
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPORT_TEST = (
    'import os, pyg_degreembed as p\n'
    'from pyg_degreembed.data.datasets import load_dataset\n'
    'assert os.path.isfile(os.path.join(os.path.dirname(p.__file__), '
    '"py.typed"))\n'
    'print(p.__file__, load_dataset("family").num_nodes)\n')


def test_wheel_and_sdist_build_and_install(tmp_path):
    pytest.importorskip('build')
    tracked = subprocess.run(['git', 'ls-files'], cwd=ROOT, text=True,
                             capture_output=True)
    if tracked.returncode != 0:
        pytest.skip('not a git checkout')
    source = tmp_path / 'source'
    for name in tracked.stdout.splitlines():  # the tracked files only
        if os.path.isfile(os.path.join(ROOT, name)):
            os.makedirs(source / os.path.dirname(name), exist_ok=True)
            shutil.copy2(os.path.join(ROOT, name), source / name)
    out = tmp_path / 'dist'
    subprocess.run([sys.executable, '-m', 'build', '--no-isolation',
                    '--outdir', str(out), str(source)], check=True,
                   capture_output=True)
    wheel = next(out.glob('*.whl'))
    sdist = next(out.glob('*.tar.gz'))
    names = zipfile.ZipFile(wheel).namelist()
    assert 'pyg_degreembed/py.typed' in names
    assert 'pyg_degreembed/data/family/train.txt' in names
    assert not any(n.startswith('tests/') for n in names)
    with tarfile.open(sdist) as archive:
        members = archive.getnames()
    assert any(n.endswith('pyg_degreembed/py.typed') for n in members)
    assert any(n.endswith('CITATION.cff') for n in members)
    # build makes the wheel from the sdist: installing it tests both. The
    # dependencies (torch, PyG) come from this environment, the package only
    # from the wheel.
    env = tmp_path / 'venv'
    subprocess.run([sys.executable, '-m', 'venv', '--system-site-packages',
                    str(env)], check=True)
    python = str(env / 'bin' / 'python')
    subprocess.run([python, '-m', 'pip', 'install', '-q', '--no-deps',
                    '--no-index', str(wheel)], check=True,
                   capture_output=True)
    result = subprocess.run([python, '-c', IMPORT_TEST], check=True,
                            capture_output=True, text=True, cwd=str(tmp_path))
    location, num_nodes = result.stdout.split()
    assert location.startswith(str(env)) and num_nodes == '3007'


def test_package_type_checks(tmp_path):
    r"""The package's annotations hold (mypy, as configured in setup.cfg:
    the untyped dependencies, PyG among them, are read as :obj:`Any`)."""
    pytest.importorskip('mypy')
    result = subprocess.run(
        [sys.executable, '-m', 'mypy', '--cache-dir', str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'no issues found' in result.stdout
