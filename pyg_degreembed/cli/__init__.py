r"""The :obj:`pyg-degreembed` command line.

.. code-block:: bash

    pyg-degreembed train --dataset family --checkpoint runs/family.pt
    pyg-degreembed evaluate --checkpoint runs/family.pt
    pyg-degreembed evaluate --checkpoint runs/fb237_v1.pt \
        --graph fb237_v1_ind
    pyg-degreembed predict --checkpoint runs/family.pt --head 1 \
        --relation brother
    pyg-degreembed rules --checkpoint runs/family.pt --relation aunt
    pyg-degreembed explain --checkpoint runs/family.pt --head 1 \
        --relation brother --tail 3
    pyg-degreembed saturation --dataset family --relation brother
    pyg-degreembed plot --checkpoint runs/family.pt --out embedding.png

A failure exits with status 2 and one line :obj:`error: ...` on stderr.
"""
import argparse
import os
import signal
import sys
import threading
import time
import warnings
from typing import List, Optional

from pyg_degreembed.cli.analysis import _plot_parser, _saturation_parser
from pyg_degreembed.cli.common import CLIError
from pyg_degreembed.cli.reason import (_evaluate_parser, _explain_parser,
                                       _predict_parser, _rules_parser)
from pyg_degreembed.cli.train import _train_parser
from pyg_degreembed.data.io import KGFormatError
from pyg_degreembed.training.budget import set_memory_limit
from pyg_degreembed.training.checkpoint import CheckpointError
from pyg_degreembed.training.loop import TrainingInterrupted
from pyg_degreembed.training.runtime import retain_freed_memory
from pyg_degreembed.version import __version__


class _Parser(argparse.ArgumentParser):
    r"""Reports a bad command line as one line :obj:`error: ...` (exit 2),
    like every other failure, instead of argparse's usage block."""
    def error(self, message: str):
        print(f'error: {self.prog}: {message} (see {self.prog} --help)',
              file=sys.stderr)
        sys.exit(2)


class _Terminated(Exception):
    r"""SIGTERM, raised in the main thread so that locks and temporary
    files are released on the way out."""


def _terminate(signum, frame):
    raise _Terminated()


def _show_warning(message, category, filename, lineno, file=None,
                  line=None):
    # A warning on the command line: one line, like the errors.
    print(f'warning: {message}', file=sys.stderr)


def main(argv: Optional[List[str]] = None) -> int:
    started = time.perf_counter()
    parser = build_parser()
    args = parser.parse_args(argv)
    args.started = started
    memory_limit = getattr(args, 'max_memory', None)
    if memory_limit is None:
        retain_freed_memory()
    set_memory_limit(None if memory_limit is None else memory_limit * 1e9)
    previous = signal.signal(signal.SIGTERM, _terminate) \
        if threading.current_thread() is threading.main_thread() else None
    show_warning, warnings.showwarning = warnings.showwarning, _show_warning
    try:
        args.handler(args)
    except (CLIError, CheckpointError, KGFormatError, OSError,
            ValueError) as e:
        print(f'error: {e}', file=sys.stderr)
        return 2
    except MemoryError:
        print('error: out of memory (the machine has too little for this '
              'setting: try a smaller --batch-size, --dim or --steps)',
              file=sys.stderr)
        return 2
    except TrainingInterrupted as e:  # saved where it stood
        print(f'error: {e}', file=sys.stderr)
        return 143 if e.signum == signal.SIGTERM else 130
    except (KeyboardInterrupt, _Terminated) as e:
        what = 'interrupted' if isinstance(e, KeyboardInterrupt) else \
            'terminated (SIGTERM)'
        saved = getattr(args, 'saved_run', None)
        if saved is not None and os.path.exists(saved):
            what += f'; {saved} holds the run so far: add --resume to go on'
        print(f'error: {what}', file=sys.stderr)
        return 130 if isinstance(e, KeyboardInterrupt) else 143
    except Exception as e:  # a bug: still one line, the traceback on demand
        if os.environ.get('PYG_DEGREEMBED_TRACEBACK'):
            raise
        message = str(e).strip().splitlines()
        print(f'error: internal error ({type(e).__name__}'
              f'{": " + message[0] if message else ""}); run with '
              'PYG_DEGREEMBED_TRACEBACK=1 for the traceback and please '
              'report it', file=sys.stderr)
        return 1
    finally:
        set_memory_limit(None)
        warnings.showwarning = show_warning
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog='pyg-degreembed',
        description='Learn logic rules on knowledge graphs (DegreEmbed, '
        'DRUM, Neural LP), predict links and explain them.')
    parser.add_argument('--version', action='version',
                        version=f'pyg-degreembed {__version__}')
    sub = parser.add_subparsers(dest='command', required=True)
    for add in (_train_parser, _evaluate_parser, _predict_parser,
                _rules_parser, _explain_parser, _saturation_parser,
                _plot_parser):
        add(sub)
    return parser


__all__ = ['CLIError', 'build_parser', 'main']
