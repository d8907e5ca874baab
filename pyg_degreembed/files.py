r"""Safe result and checkpoint files: atomic writes, stale temporaries of
dead writers cleaned up, one writer per file, writability checked before
any work starts."""
import glob
import os
import tempfile
from contextlib import contextmanager
from typing import Any, Callable, Iterator


class FileError(ValueError):
    r"""A file cannot be written (or is being written by another
    process)."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _temporary_prefix(path: str) -> str:
    return f'.{os.path.basename(path)}.'


def remove_stale_temporaries(path: str) -> int:
    r"""Removes the temporary files that writers of :obj:`path` which no
    longer run left behind (killed during a write).  Returns how many."""
    folder = os.path.dirname(os.path.abspath(path))
    removed = 0
    for tmp in glob.glob(os.path.join(
            glob.escape(folder), glob.escape(_temporary_prefix(path)) +
            '*.tmp')):
        pid = os.path.basename(tmp)[len(_temporary_prefix(path)):]
        pid = pid.split('.', 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            try:
                os.remove(tmp)
                removed += 1
            except OSError:
                pass
    return removed


def check_writable(path: str, what: str = 'file'):
    r"""Refuses, before any work, a :obj:`path` that cannot be written: a
    folder, a path below a file, or a folder without write permission."""
    if os.path.isdir(path):
        raise FileError(f'{path}: is a folder, not a {what} path')
    folder = os.path.dirname(os.path.abspath(path))
    existing = folder
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise FileError(f'{path}: cannot write the {what}: {existing} is a '
                        'file, not a folder')
    if not os.access(existing, os.W_OK | os.X_OK):
        raise FileError(f'{path}: cannot write the {what}: no write '
                        f'permission in {existing}')
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise FileError(f'{path}: cannot write the {what}: the file is '
                        'read-only')


def atomic_write(path: str, write: Callable[[Any], None],
                 binary: bool = True):
    r"""Calls :obj:`write(file)` on a temporary file in the folder of
    :obj:`path`, then renames it to :obj:`path`: readers see the old file
    or the new one, never a half-written one.  The temporary file's name
    holds the writer's process id; the temporaries of writers that were
    killed are removed first (:func:`remove_stale_temporaries`).  A failed
    write (disk full, permissions) raises :class:`FileError` and keeps the
    old file."""
    check_writable(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        remove_stale_temporaries(path)
        fd, tmp = tempfile.mkstemp(
            dir=folder, prefix=f'{_temporary_prefix(path)}{os.getpid()}.',
            suffix='.tmp')
    except OSError as e:
        raise FileError(f'{path}: cannot write ({e.strerror or e})') \
            from None
    try:
        with os.fdopen(fd, 'wb' if binary else 'w') as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(e, (OSError, RuntimeError)):
            reason = getattr(e, 'strerror', None) or \
                str(e).strip().splitlines()[0]
            raise FileError(f'{path}: could not be written ({reason}); '
                            'the previous file is kept') from None
        raise


@contextmanager
def exclusive(path: str) -> Iterator[None]:
    r"""Holds the lock file :obj:`path + ".lock"` (created exclusively,
    holding the process id) while the block runs, so that two processes
    never write :obj:`path` at once.  A lock left by a process that no
    longer runs is taken over."""
    lock = path + '.lock'
    check_writable(lock, 'lock file')
    os.makedirs(os.path.dirname(os.path.abspath(lock)), exist_ok=True)
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            break
        except FileExistsError:
            try:
                pid = int(open(lock).read().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if pid and pid != os.getpid() and _alive(pid):
                raise FileError(f'{path}: another process (pid {pid}) is '
                                f'writing it (lock file {lock})') from None
            try:
                os.remove(lock)  # left by a dead process
            except FileNotFoundError:
                pass
    else:
        raise FileError(f'{path}: cannot take the lock file {lock}')
    with os.fdopen(fd, 'w') as f:
        f.write(str(os.getpid()))
    try:
        yield
    finally:
        try:
            os.remove(lock)
        except FileNotFoundError:
            pass
