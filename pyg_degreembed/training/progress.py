r"""Progress of long loops (training epochs, evaluations): a :obj:`tqdm` bar
on a terminal, and one log line at a steady interval elsewhere (a log file,
a job under :obj:`nohup`), so that a long epoch always shows life."""
import sys
import time
from typing import Callable, Optional

from tqdm.auto import tqdm


def log_line(text: str):
    r"""Prints one line and flushes it (so that it reaches a log file at
    once); the default :obj:`log` of :func:`~pyg_degreembed.fit`."""
    print(text, flush=True)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f'{seconds // 3600}h{seconds % 3600 // 60:02d}m'
    if seconds >= 60:
        return f'{seconds // 60}m{seconds % 60:02d}s'
    return f'{seconds}s'


class Progress:
    r"""Reports the progress of a loop of :obj:`total` steps.

    On a terminal (standard error is a TTY) it shows a :obj:`tqdm` bar;
    otherwise it calls :obj:`log` with one line at most every
    :obj:`interval` seconds: steps done, items per second, the running mean
    loss (if given) and the estimated time left.

    Args:
        total (int): The number of steps.
        desc (str): What is running, e.g. :obj:`"epoch 3"`.
        unit (str, optional): What the items are. (default:
            :obj:`"queries"`)
        enabled (bool, optional): :obj:`False` reports nothing.
            (default: :obj:`True`)
        interval (float, optional): Seconds between two log lines.
            (default: :obj:`30.0`)
        log (callable, optional): Receives the log lines. (default:
            :func:`log_line`)
        terminal (bool, optional): Whether to draw a bar; default: whether
            standard error is a terminal.
    """
    def __init__(self, total: int, desc: str, unit: str = 'queries',
                 enabled: bool = True, interval: float = 30.0,
                 log: Optional[Callable[[str], None]] = log_line,
                 terminal: Optional[bool] = None):
        if terminal is None:
            terminal = sys.stderr.isatty()
        self.total, self.desc, self.unit = total, desc, unit
        self.interval = interval
        self.bar = tqdm(total=total, desc=desc, leave=False) \
            if enabled and terminal else None
        # Where the log lines go (none with a bar).
        self.log = log if enabled and not terminal else None
        self.start = self.last = time.perf_counter()
        self.steps = self.items = 0
        self.loss_sum, self.loss_items = 0., 0

    def update(self, items: int, loss: Optional[float] = None):
        r"""One step of :obj:`items` items, with its mean loss."""
        self.steps += 1
        self.items += items
        if loss is not None:
            self.loss_sum += loss * items
            self.loss_items += items
        if self.bar is not None:
            self.bar.update(1)
        elif self.log is not None:
            now = time.perf_counter()
            if now - self.last >= self.interval and self.steps < self.total:
                self.last = now
                self.log(self.line(now))

    def line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        text = (f'{self.desc}: {self.steps}/{self.total} batches, '
                f'{self.items / elapsed:.0f} {self.unit}/s')
        if self.loss_items:
            text += f', running loss {self.loss_sum / self.loss_items:.4f}'
        left = elapsed / self.steps * (self.total - self.steps)
        return text + f', ETA {_duration(left)}'

    def close(self):
        if self.bar is not None:
            self.bar.close()
