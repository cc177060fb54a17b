"""File output shared by the host and its plugins.

:func:`write_text_atomic` is the one way passhost writes a result file (``passhost run
--output/--report``, ``passhost bisect``'s ``before.txt``/``after.txt``, the ``trace`` and
``print-ir`` instruments); :func:`write_bytes_atomic` is its binary twin, which format
plugins use to write models (``passhost-onnx``). A reader never sees a half-written file, and a failed write
leaves the old file (if any) in place.

What ``path`` is decides how it is written:

- a regular file or a new path: a temporary file beside it, renamed over it;
- a symbolic link: the file it points to is written that way (the link stays a link);
- ``-``: standard output, once the whole content is known;
- a character device, pipe or socket (``/dev/null``, ``/dev/stdout``): opened and written
  in place once the whole content is known -- never replaced by a regular file;
- a directory: :class:`IsADirectoryError`.

:func:`plugin_output_to_stderr` keeps standard output for passhost's own output: while it
is active, ``sys.stdout`` is standard error, so whatever plugin code prints (at import,
in a hook, a pass or an instrument) cannot corrupt a printed module or ``list --json``,
and :func:`output_stream` is the real standard output, which ``-`` and the command line
write to.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import secrets
import stat
import sys
import threading
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Optional

import numpy as np

from .weights import file_span, is_mapped, release

__all__ = ["write_text_atomic", "write_bytes_atomic", "atomic_writer", "replace_file", "write_buffers", "copy_range",
           "written_bytes", "output_stream", "plugin_output_to_stderr"]

_TRIES = 100
#: buffers per ``os.writev`` call (the kernel's limit)
_IOV_MAX = min(os.sysconf("SC_IOV_MAX"), 1024) if hasattr(os, "sysconf") and "SC_IOV_MAX" in os.sysconf_names \
    else 1024
#: bytes gathered into one ``os.writev`` at most (larger buffers go alone: one call each)
_GATHER = 1 << 20
#: a replaced file at least this large is released off the caller's path (see _replace)
_RELEASE_LATER = 1 << 20
_OUTPUT: list = []   # the real standard output, while plugin_output_to_stderr is active
#: descriptors of atomic_writer's temporary files that will be fsynced (see _start_writeback)
_SYNCED: set = set()
_FADVISE = hasattr(os, "posix_fadvise") and hasattr(os, "POSIX_FADV_DONTNEED") and sys.platform.startswith("linux")


def output_stream():
    """The stream passhost's own output goes to: standard output, even while
    :func:`plugin_output_to_stderr` sends everything else printed there to stderr."""
    return _OUTPUT[-1] if _OUTPUT else sys.stdout


@contextlib.contextmanager
def plugin_output_to_stderr() -> Iterator[None]:
    """Send ``print()`` output to stderr for the duration; passhost writes its results
    to :func:`output_stream`. ``passhost`` runs every command inside it."""
    _OUTPUT.append(sys.stdout)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _OUTPUT.pop()


def _create_temp(directory: str, name: str) -> tuple:
    """A new, empty file next to the target: ``(fd, path)``. It is created with mode
    ``0o666`` so the kernel applies the umask (no process-wide ``os.umask`` toggling,
    which would race with other threads)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TRIES):
        tmp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name in {directory!r}")


def write_text_atomic(path: str, text: str, *, fsync: bool = True) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically.

    The text goes to a temporary file in the same directory and is renamed over ``path``
    with :func:`os.replace`. An existing file keeps its permission bits; a new one gets
    ``0o666`` less the umask, like :func:`open`. On any failure the temporary file is
    removed and ``path`` is untouched.

    :param fsync: flush the data to disk before the rename (a crash cannot leave an empty
        file); instruments that dump many files per pass turn it off
    :raises OSError: the directory is missing or not writable, or the write failed;
        callers turn it into their own :class:`~passhost.errors.PasshostError`
    """
    write_bytes_atomic(path, text.encode("utf-8"), fsync=fsync)


def write_bytes_atomic(path: str, data: bytes, *, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`write_text_atomic`)."""
    with atomic_writer(path, fsync=fsync) as f:
        f.write(data)


@contextlib.contextmanager
def atomic_writer(path: str, *, fsync: bool = True,
                  verify: Optional[Callable[[], None]] = None) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into, piece by piece; it replaces
    ``path`` only when the ``with`` block ends without an error (then flushed, fsynced and
    renamed over it, keeping an existing file's permission bits). On an error the
    temporary file is removed and ``path`` is untouched. Format plugins stream large
    models through it (``passhost-onnx`` writes weights straight from their arrays)::

        with atomic_writer("out.onnx") as f:
            for chunk in chunks:
                f.write(chunk)

    ``verify`` (optional) is called once the content is written and before it replaces
    ``path``; if it raises, nothing is replaced. For a regular file it runs while the
    content is flushed to disk (the ``fsync`` waits on a background thread), so a check of
    the result costs no time of its own: ``passhost-onnx`` runs ``onnx.checker`` there.

    ``-``, devices, pipes and sockets get the content in one write at the end (see the
    module docstring); symbolic links are followed.
    """
    if path == "-":
        with _buffered(output_stream(), path, verify) as f:
            yield f
        return
    target = os.path.realpath(path)
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "it is a directory, not a file", path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        with _buffered(None, target, verify) as f:
            yield f
        return
    mode = None if st is None else st.st_mode & 0o777
    directory = os.path.dirname(target)
    fd, tmp = _create_temp(directory, os.path.basename(target))
    try:
        with os.fdopen(fd, "wb") as f:
            if fsync:
                _SYNCED.add(fd)  # write_buffers starts the writeback as it goes
            try:
                yield f
            finally:
                _SYNCED.discard(fd)
            f.flush()
            _WRITTEN[0] += f.tell()
            _settle(f.fileno(), fsync, verify)
        if mode is not None:
            os.chmod(tmp, mode)
        _replace(tmp, target, st)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _settle(fd: int, fsync: bool, verify: Optional[Callable[[], None]]) -> None:
    """``os.fsync(fd)`` (if asked) and ``verify()`` (if given), side by side: the fsync
    waits for the disk on a thread of its own while ``verify`` runs here. Either one's
    error is raised (``verify``'s first), and only after the fsync has returned."""
    if verify is None or not fsync:
        if fsync:
            os.fsync(fd)
        if verify is not None:
            verify()
        return
    failed: list = []

    def sync() -> None:
        try:
            os.fsync(fd)
        except BaseException as err:  # noqa: BLE001 - handed to the caller below
            failed.append(err)

    worker = threading.Thread(target=sync, name="passhost-fsync", daemon=True)
    try:
        worker.start()
    except RuntimeError:  # no thread to spare: one after the other
        os.fsync(fd)
        verify()
        return
    try:
        verify()
    finally:
        worker.join()
    if failed:
        raise failed[0]


def _replace(tmp: str, target: str, st: "os.stat_result | None") -> None:
    """``os.replace(tmp, target)``, with the old file's storage freed off the caller's path.

    Renaming over a file frees its blocks inside the rename, which for a 30 MB model costs
    as long as writing it (ext4: ~6 ms). On POSIX, a large old file is opened first, so the
    rename only drops its name, and the last descriptor is closed by a background thread,
    where the kernel then frees the blocks. The new file is in place when this returns
    either way; a process that exits first has the descriptor closed by the kernel.
    """
    held = None
    if os.name == "posix" and st is not None and st.st_size >= _RELEASE_LATER:
        try:
            held = os.open(target, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:  # unreadable: replace it the plain way
            held = None
    try:
        os.replace(tmp, target)
    finally:
        if held is not None:
            try:
                threading.Thread(target=os.close, args=(held,), name="passhost-release", daemon=True).start()
            except RuntimeError:  # no thread to spare
                os.close(held)


def replace_file(src: str, dst: str) -> None:
    """``os.replace(src, dst)``, the file it replaces (a model's data file from an earlier
    run, gigabytes of blocks) freed off the caller's path, as :func:`atomic_writer` does."""
    try:
        st: os.stat_result | None = os.stat(dst)
    except FileNotFoundError:
        st = None
    _replace(src, dst, st)


def write_buffers(f: BinaryIO, buffers: Iterable, *, on_written: Optional[Callable[[int], None]] = None) -> int:
    """Write ``buffers`` (bytes-like objects: ``bytes``, ``memoryview``, numpy arrays) to the
    binary file ``f`` one after the other; returns the bytes written.

    On a file with a descriptor (what :func:`atomic_writer` yields for a path) they go out
    gathered: runs of small buffers (up to 1 MB and 1,024 buffers) in one ``os.writev``
    each, which for a model of a few hundred small weights is milliseconds faster than one
    ``write`` per buffer, and each large buffer in a call of its own (one call for 100 MB
    of weights was slower than one per weight); on anything else (``io.BytesIO``, standard
    output) through ``f.write``.

    Arrays need not be in memory: a large array mapped from a file (:mod:`passhost.weights`)
    is copied from that file by the kernel (``os.copy_file_range``, else ``os.sendfile``),
    never through the process; an array that is not C-contiguous (a transposed view) is
    written in C order a block of rows at a time. ``buffers`` is consumed as it is written,
    so a generator can make each buffer just before it is written. ``on_written(n)`` is
    called after each large buffer with its size (progress).
    """
    try:
        fd = f.fileno() if hasattr(os, "writev") else None
    except (AttributeError, OSError, io.UnsupportedOperation):
        fd = None
    total = 0
    if fd is None:
        for b in buffers:
            for piece in _pieces(b):
                f.write(piece)
                total += piece.nbytes
        return total
    f.flush()
    out = _Out(fd)
    run: list = []
    size = reported = 0
    for b in buffers:
        if isinstance(b, np.ndarray) and b.nbytes >= _GATHER and (not b.flags.c_contiguous or is_mapped(b)):
            out.writev(run)
            run, size = [], 0
            out.array(b)
        else:
            v = _bytes_of(b)
            if run and (size + v.nbytes > _GATHER or len(run) >= _IOV_MAX):
                out.writev(run)
                run, size = [], 0
            run.append(v)
            size += v.nbytes
            if size >= _GATHER:
                out.writev(run)
                run, size = [], 0
        if on_written is not None and out.total > reported:
            on_written(out.total - reported)
            reported = out.total
    out.writev(run)
    if on_written is not None and out.total > reported:
        on_written(out.total - reported)
    return out.total


def _bytes_of(b: Any) -> memoryview:
    """``b``'s bytes in C order (any numpy dtype, ml_dtypes' too, as bytes)."""
    if isinstance(b, np.ndarray):
        if not b.flags.c_contiguous:
            b = np.ascontiguousarray(b)
        return memoryview(b.reshape(-1).view(np.uint8))
    return memoryview(b).cast("B")


def _pieces(b: Any) -> Iterator[memoryview]:
    """``b``'s bytes in C order as memoryviews (a non-contiguous array a block at a time)."""
    if isinstance(b, np.ndarray) and not b.flags.c_contiguous and b.ndim:
        for block in _row_blocks(b):
            yield _bytes_of(block)
        release(b)
        return
    yield _bytes_of(b)


def _row_blocks(arr: np.ndarray) -> Iterator[np.ndarray]:
    rows = max(1, _BLOCK // max(1, arr[0].nbytes))
    for i in range(0, arr.shape[0], rows):
        yield np.ascontiguousarray(arr[i:i + rows])


class _Out:
    """The descriptor :func:`write_buffers` writes to, with its writeback requests."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.early = fd in _SYNCED and _FADVISE
        self.pos = os.lseek(fd, 0, os.SEEK_CUR) if self.early else 0
        self.pending = 0  # bytes written since the last writeback request
        self.total = 0

    def written(self, n: int) -> None:
        self.total += n
        if self.early:
            self.pending += n
            if self.pending >= _GATHER:
                _start_writeback(self.fd, self.pos, self.pending)
                self.pos, self.pending = self.pos + self.pending, 0

    def writev(self, views: list) -> None:
        """Write ``views`` (one call per run of small ones; a large one alone)."""
        i = 0
        while i < len(views):
            j, size = i, 0
            while j < len(views) and j - i < _IOV_MAX and (size == 0 or size + views[j].nbytes <= _GATHER):
                size += views[j].nbytes
                j += 1
            done = os.writev(self.fd, views[i:j])
            if done == 0 and size:
                raise OSError(errno.EIO, "the file accepted no more bytes")
            self.written(done)
            while i < j and done >= views[i].nbytes:  # whole buffers written
                done -= views[i].nbytes
                i += 1
            if done:  # a short write ended inside views[i]
                views[i] = views[i][done:]

    def array(self, arr: np.ndarray) -> None:
        """A large array: copied from its file, or written a block of rows at a time."""
        span = file_span(arr)
        if span is not None:
            start = 0
            while start < span.length:
                n = min(_COPY_CHUNK, span.length - start)
                copy_range(span.fd, span.offset + start, n, self.fd)
                self.written(n)
                start += n
            return
        for piece in _pieces(arr):
            self.writev([piece])
        release(arr)


def copy_range(src: int, offset: int, length: int, dst: int) -> None:
    """Copy ``length`` bytes at ``offset`` of the open file ``src`` to ``dst`` at its current
    position (which moves past them), in the kernel: ``os.copy_file_range`` where the file
    systems allow it, else ``os.sendfile``, else reads of 8 MB.

    :raises OSError: on a write error, or when ``src`` ends before ``offset + length`` (a
        file truncated while it is read)
    """
    while length > 0:
        n = _COPY[0](src, offset, length, dst)
        if n == 0:
            raise OSError(errno.EIO, f"the source file ended {length} bytes early: it changed while it was read")
        offset += n
        length -= n


def _copy_file_range(src: int, offset: int, length: int, dst: int) -> int:
    try:
        return os.copy_file_range(src, dst, length, offset)
    except OSError as err:
        if err.errno not in _NO_COPY:
            raise
    _COPY[0] = _sendfile  # not between these files: the next method, for good
    return _sendfile(src, offset, length, dst)


def _sendfile(src: int, offset: int, length: int, dst: int) -> int:
    try:
        return os.sendfile(dst, src, offset, min(length, 1 << 30))
    except OSError as err:
        if err.errno not in _NO_COPY:
            raise
    _COPY[0] = _read_write
    return _read_write(src, offset, length, dst)


def _read_write(src: int, offset: int, length: int, dst: int) -> int:
    if hasattr(os, "pread"):
        data = os.pread(src, min(length, 8 << 20), offset)
    else:  # (Windows)
        os.lseek(src, offset, os.SEEK_SET)
        data = os.read(src, min(length, 8 << 20))
    view = memoryview(data)
    while view:
        n = os.write(dst, view)
        if n <= 0:
            raise OSError(errno.EIO, "the file accepted no more bytes")
        view = view[n:]
    return len(data)


#: errors that mean "this way of copying does not work between these files", not "the copy failed"
_NO_COPY = frozenset(e for e in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF,
                                 getattr(errno, "ENOTSUP", errno.EOPNOTSUPP), errno.EPERM,
                                 getattr(errno, "ENOTSOCK", None)) if e is not None)
_COPY: list = [_copy_file_range if hasattr(os, "copy_file_range") else
               _sendfile if hasattr(os, "sendfile") else _read_write]
#: bytes per kernel copy call (each followed by a writeback request)
_COPY_CHUNK = 64 << 20
_BLOCK = 16 << 20
_WRITTEN = [0]


def written_bytes() -> int:
    """Bytes this process has written through :func:`atomic_writer` (and so
    :func:`write_text_atomic`, :func:`write_bytes_atomic`): every file of every model
    saved, for the end-of-run summary."""
    return _WRITTEN[0]


def _start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing ``length`` bytes at ``offset`` to disk now.

    On Linux, ``POSIX_FADV_DONTNEED`` queues the dirty pages of the range for writeback, and
    drops only the pages that are already clean (none, just after the write). So the disk
    works while the rest of the file is written and checked, and the ``fsync`` at the end
    waits only for what is left. On ResNet-50's 100 MB save, in the runs the disk was not
    busy with other writes, the save took 42-50 ms instead of 64-70 ms (8 alternating
    rounds, twice). It is only a hint: an error is ignored, and the fsync still decides."""
    try:
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass


@contextlib.contextmanager
def _buffered(stream, path: str, verify: Optional[Callable[[], None]] = None) -> Iterator[BinaryIO]:
    """Collect the content in memory; write it to ``stream`` (or to ``path``, opened in
    place, for a device or pipe) only when the block ends without an error and ``verify``
    (if given) passes."""
    buf = io.BytesIO()
    yield buf
    if verify is not None:
        verify()
    data = buf.getvalue()
    _WRITTEN[0] += len(data)
    if stream is not None:  # standard output: its byte buffer, or the text stream itself
        raw = getattr(stream, "buffer", None)
        if raw is not None:
            stream.flush()
            raw.write(data)
            raw.flush()
        else:
            stream.write(data.decode("utf-8", "replace"))
            stream.flush()
        return
    with open(path, "wb") as out:
        out.write(data)
