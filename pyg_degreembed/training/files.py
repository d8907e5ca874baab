r"""Safe result and checkpoint files: atomic writes, stale temporaries of
dead writers cleaned up, one writer per file, writability checked before
any work starts."""
import glob
import os
import sys
import tempfile
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence, Set

import torch

if sys.platform == 'win32':  # no fcntl: filelock's lock
    fcntl = None
else:
    import fcntl


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


#: The first bytes of each kind of file the library writes, to recognise
#: an existing file before it is replaced.
_SIGNATURES = {'checkpoint': (b'PK\x03\x04', ), 'png': (b'\x89PNG', ),
               'json': (b'{', b'[')}


def _looks_like(path: str, kind: str) -> bool:
    try:
        with open(path, 'rb') as f:
            start = f.read(4096).lstrip()
    except OSError:
        return True  # check_writable reports what is wrong
    return not start or start.startswith(_SIGNATURES[kind])


def input_files(spec: str) -> list:
    r"""The files a command reads for :obj:`spec` (a file, or every file of
    a folder), for :func:`check_output`."""
    if os.path.isdir(spec):
        return [os.path.join(spec, name) for name in os.listdir(spec)]
    return [spec] if os.path.isfile(spec) else []


def check_output(path: str, what: str, kind: str,
                 inputs: Sequence[str] = ()):
    r"""Refuses, before any work, an output :obj:`path` that
    :func:`check_writable` refuses, that is one of the command's
    :obj:`inputs` (files; a symbolic link or another name of the same file
    counts), or that exists as a file of another kind than :obj:`kind`
    (:obj:`"checkpoint"`, :obj:`"json"` or :obj:`"png"`, recognised by
    their first bytes; an empty file counts as any kind)."""
    check_writable(path, what)
    for other in inputs:
        if os.path.exists(path) and os.path.exists(other) and \
                os.path.samefile(path, other) or \
                os.path.realpath(path) == os.path.realpath(other):
            raise FileError(f'{path}: is an input of this command ({other}); '
                            f'the {what} would replace it: give another '
                            'path')
    if os.path.isfile(path) and not _looks_like(path, kind):
        raise FileError(f'{path}: exists and is not a {kind} file; the '
                        f'{what} would replace it: give another path (or '
                        'delete the file first)')


def atomic_write(path: str, write: Callable[[Any], None],
                 binary: bool = True):
    r"""Calls :obj:`write(file)` on a temporary file in the folder of
    :obj:`path`, then renames it to :obj:`path`: readers see the old file
    or the new one, never a half-written one.  The temporary file's name
    holds the writer's process id; the temporaries of writers that were
    killed are removed first (:func:`remove_stale_temporaries`).  Where
    :obj:`path` is a symbolic link, the file it points to is replaced (the
    link stays).  A failed
    write (disk full, permissions) raises :class:`FileError` and keeps the
    old file."""
    check_writable(path)
    path = os.path.realpath(path)  # a symbolic link: replace its target
    folder = os.path.dirname(path)
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
    r"""Holds the lock file :obj:`path + ".lock"` while the block runs, so
    that two processes never write :obj:`path` at once.

    The lock is the operating system's (:func:`fcntl.flock`; on systems
    without it :class:`filelock.FileLock`): taking it is atomic, and the
    system releases it when its process ends, however it ends, so a lock
    left by a killed process is never a held lock.  The holder writes its
    process id into the file (for the message another process gets) and
    removes the file before it releases the lock (where the folder allows);
    a taker checks that the file it locked is still the one at the path, so
    removing it never lets two processes hold the lock.  The lock is
    re-entrant within a process: a command that holds it for its whole run
    calls :func:`~pyg_degreembed.fit`, which takes it again."""
    lock_path = path + '.lock'
    key = os.path.realpath(lock_path)
    if key in _HELD:  # this process holds it already (one command)
        yield
        return
    check_writable(lock_path, 'lock file')
    os.makedirs(os.path.dirname(os.path.abspath(lock_path)), exist_ok=True)
    _HELD.add(key)
    try:
        with (_portable_lock if fcntl is None else _system_lock)(
                path, lock_path):
            yield
    finally:
        _HELD.discard(key)


#: The lock files this process holds (:func:`exclusive` is re-entrant).
_HELD: Set[str] = set()


@contextmanager
def _system_lock(path: str, lock_path: str) -> Iterator[None]:
    while True:
        fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            _held_by_another(path, lock_path)
        try:
            if os.stat(lock_path).st_ino == os.fstat(fd).st_ino:
                break  # the file at the path, locked
        except FileNotFoundError:
            pass
        os.close(fd)  # its holder removed it meanwhile: take the new one
    try:
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        yield
    finally:
        try:
            os.remove(lock_path)
        except OSError:  # a folder made read-only: the file stays, unlocked
            pass
        os.close(fd)  # releases the lock


def _held_by_another(path: str, lock_path: str):
    try:
        with open(lock_path) as f:
            pid = f.read().strip()
    except OSError:
        pid = ''
    who = f'another process (pid {pid})' if pid.isdigit() else \
        'another process'
    raise FileError(f'{path}: {who} is writing it (lock file {lock_path})')


@contextmanager
def _portable_lock(path: str, lock_path: str) -> Iterator[None]:
    # Where fcntl is missing (Windows): filelock's lock (the file stays).
    from filelock import FileLock, Timeout
    lock = FileLock(lock_path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        _held_by_another(path, lock_path)
    try:
        yield
    finally:
        lock.release()


class UnsafeFileError(ValueError):
    r"""A file :func:`load_plain` refuses; the message is the reason alone
    (without torch's advice to load it with :obj:`weights_only=False`)."""


def load_plain(path: str, map_location='cpu') -> Any:
    r"""Reads a file written by :func:`torch.save` with
    :obj:`weights_only=True` (tensors and plain data only: no code runs).
    Anything else raises :class:`UnsafeFileError` with the reason: Python
    objects that could run code, or a file that is not one :func:`torch.save`
    wrote."""
    try:
        with warnings.catch_warnings():  # torch's notes on pickle protocols
            warnings.simplefilter('ignore')
            return torch.load(path, map_location=map_location,
                              weights_only=True)
    except Exception as e:  # unpickling errors come in many types
        text = str(e)
        if 'GLOBAL' in text:
            raise UnsafeFileError(
                'the file holds Python objects that are not tensors or '
                'plain data, and loading them could run code') from None
        if 'Weights only load failed' in text:
            raise UnsafeFileError(
                'the file was not written by torch.save with tensors and '
                'plain data only: a raw pickle or another format') from None
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        raise UnsafeFileError(f'{type(e).__name__}: '
                              f'{lines[0] if lines else "unreadable"}') \
            from None
