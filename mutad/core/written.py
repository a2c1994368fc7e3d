"""Files a differentiation wrote traced values to, and the reads that would lose their derivative.

``np.save`` and its family write numbers: what a program reads back of them (``np.load``,
``np.loadtxt``, ``pickle.load``) is a plain array, a constant of the differentiation, so a
derivative that flows through the file is silently cut. A save of traced values runs as NumPy's
(``saving``) and is remembered, while differentiations run in this thread
(``levels.ACTIVE.written``), by what it wrote to: the file object itself, the file (device and
inode: a path, a file descriptor, another name of the same file all reach it) and, for an
in-memory buffer, the text or bytes it wrote (read back through ``buffer.getvalue()`` into a new
buffer). A read of any of those in the same differentiation is refused (``check_read``).
"""

import io
import os

from .errors import UnsupportedOperationError
from .levels import ACTIVE, carries_derivative

SUFFIXES = {"save": ".npy", "savez": ".npz", "savez_compressed": ".npz"}
"""The suffix NumPy's savers add to a path that lacks it (``np.save("u", x)`` writes u.npy)."""


class _Written:
    __slots__ = ("target", "file", "content")

    def __init__(self, target, file, content):
        self.target = target  # the file object itself, or None for a path
        self.file = file  # (device, inode), or None
        self.content = content  # what it wrote to an in-memory buffer, or None


def _traced(items):
    return any(_traced(x) if type(x) in (list, tuple) else carries_derivative(x) for x in items)


def _identity(source):
    """(device, inode) of the file ``source`` names (a path, a descriptor, a file object with a
    descriptor), or None."""
    try:
        if isinstance(source, (str, bytes, os.PathLike)):
            status = os.stat(os.path.realpath(os.fspath(source)))
        elif isinstance(source, int):
            status = os.fstat(source)
        elif hasattr(source, "fileno"):
            status = os.fstat(source.fileno())
        else:
            return None
    except (OSError, ValueError, TypeError, io.UnsupportedOperation):
        return None
    return status.st_dev, status.st_ino


def _in_memory(source):
    return isinstance(source, (io.StringIO, io.BytesIO))


def source(args, kwargs):
    """The file a saver or a reader (``np.save(file, x)``, ``np.loadtxt(fname)``,
    ``pickle.load(file)``, ``np.frombuffer(buffer)``) is given."""
    if args:
        return args[0]
    return next((kwargs[k] for k in ("file", "fname", "buffer") if k in kwargs), None)


def saving(original):
    """``original``, one of NumPy's savers (``np.save(file, arr)``), remembering what it writes
    to when traced values are among its arguments."""

    def save(*args, **kwargs):
        if not (ACTIVE.running and _traced((*args, *kwargs.values()))):
            return original(*args, **kwargs)
        file = source(args, kwargs)
        start = file.tell() if _in_memory(file) else None
        y = original(*args, **kwargs)
        target, content = None, None
        if isinstance(file, (str, bytes, os.PathLike)):
            path = os.fspath(file)
            suffix = SUFFIXES.get(original.__name__)
            if suffix is not None and not os.fsdecode(path).endswith(suffix):
                path = os.fsdecode(path) + suffix
            file = path
        else:
            target = file
            if start is not None:
                content = file.getvalue()[start:file.tell()] or None
        ACTIVE.written.append(_Written(target, _identity(file), content))
        return y

    return save


def check_read(name, source):
    """Refuse ``name``'s read of ``source`` (a path, a descriptor, a file object, a buffer) if
    a save of traced values in the running differentiation wrote to it."""
    if not ACTIVE.written:
        return
    identity = _identity(source)
    content = source.getvalue() if _in_memory(source) else (
        bytes(source) if isinstance(source, (bytes, bytearray, memoryview)) else None)
    for written in ACTIVE.written:
        if (written.target is source or (identity is not None and written.file == identity)
                or _contains(content, written.content)):
            raise UnsupportedOperationError(
                f"{name} reads back values the differentiated function saved from traced "
                "arrays: what it reads is plain numbers, which would lose their derivative "
                "(the derivative through the file would be silently cut). Pass the array itself "
                "on instead of saving and loading it (or x.copy()), or save outside the "
                "differentiated function (mutad.stop_gradient(x) saves values no derivative "
                "flows through).")


def _contains(content, part):
    if content is None or part is None:
        return False
    if type(content) is not type(part):
        encode = (lambda s: s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s)
        content, part = encode(content), encode(part)
    return part in content
