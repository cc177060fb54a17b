"""Weights larger than memory: arrays mapped from files, read only where a kernel reads them.

A model's weights can be larger than the machine's memory, and an optimiser needs few of
them in memory at once. So a format plugin maps the weights' file (:func:`map_file`) and
views each weight in place: a read-only numpy array over the mapping, whose pages the
kernel reads from disk only when something reads those elements. Everything else is
built so that nothing reads a weight without need:

- **Identity.** :func:`digest` hashes a large array by dtype, shape and a fixed sample of
  its elements (a few pages, not the weight); :func:`equal` says two arrays are equal
  without reading them when they are the same bytes of the same file, and otherwise
  compares them a block at a time. ``structural_hash`` and ``structural_equal`` of
  constants use them.
- **Letting go.** A page of a mapping that was read stays in the process's resident set
  (``VmHWM`` counts it) until it is dropped: :func:`release` drops an array's pages (they
  stay in the kernel's page cache, so reading them again is cheap), :func:`release_all`
  every mapping's.
- **New weights.** A weight a pass computes (a batch norm folded into a convolution)
  lives in memory. Inside :func:`spill_to_disk`, once new weights fill a budget, each
  further one is written to a scratch file and mapped back (:func:`keep`, which
  :class:`passhost.ir.Constant` calls for every large array it must copy, and
  :func:`adopt`, which FoldConstant calls for what it computes), so a pass folding every
  weight of a 14 GB model holds one at a time.
- **Copying.** :func:`file_span` says where an array's bytes are in a file, so a writer
  can copy them file to file in the kernel (``passhost.io.write_buffers`` does, with
  ``os.copy_file_range``) without reading them into the process.

**Aliasing.** A mapped file must not change while it is mapped: a file truncated under a
mapping makes the next read of a lost page kill the process (``SIGBUS``), and bytes
rewritten in place change the weights the module holds. Replacing the file is safe:
``passhost run M.onnx -o M.onnx`` writes a new file and renames it over the old name,
and the mapping keeps the old file (its inode) until the module is gone. Safe while a
model is mapped: renaming, replacing or deleting its files, copying them, reading them;
unsafe: truncating them, writing into them in place (``open(path, "r+b")``, ``dd
conv=notrunc``), or editing them with a tool that rewrites in place.
"""
from __future__ import annotations

import contextlib
import errno
import mmap
import os
import stat
import tempfile
import weakref
from typing import Iterator, NamedTuple, Optional

import numpy as np

from . import progress

__all__ = ["map_file", "FileSpan", "file_span", "is_mapped", "release", "release_all", "digest", "equal",
           "keep", "adopt", "spill_to_disk", "LARGE", "DEFAULT_BUDGET"]

#: arrays of at least this many bytes are "large": hashed by sample, compared in blocks,
#: and written to the scratch file by :func:`keep` once the budget is used up
LARGE = 1 << 20
#: bytes of new large weights :func:`spill_to_disk` keeps in memory before it writes them out
DEFAULT_BUDGET = 256 << 20
#: elements :func:`digest` samples from a large array
_SAMPLES = 64
#: bytes compared or written at a time
_BLOCK = 16 << 20
_PAGE = mmap.PAGESIZE
_DONTNEED = getattr(mmap, "MADV_DONTNEED", None)


class _Mapping:
    """A live mapping of (part of) a file: where it is in memory and in the file."""

    __slots__ = ("ref", "fd", "address", "length", "offset", "file_id", "__weakref__")

    def __init__(self, mm: mmap.mmap, fd: int, offset: int, length: int, file_id: tuple) -> None:
        self.ref = weakref.ref(mm)
        self.fd = fd
        self.offset = offset
        self.length = length
        self.file_id = file_id
        probe = np.frombuffer(mm, dtype=np.uint8, count=1)
        self.address = probe.ctypes.data
        del probe


_LIVE: dict = {}  # id(mmap) -> _Mapping


def _register(mm: mmap.mmap, fd: int, offset: int, length: int, file_id: tuple) -> None:
    key = id(mm)
    info = _Mapping(mm, fd, offset, length, file_id)
    _LIVE[key] = info
    weakref.finalize(mm, _forget, key, info)


def _forget(key: int, info: _Mapping) -> None:
    if _LIVE.get(key) is info:
        del _LIVE[key]
    try:
        os.close(info.fd)
    except OSError:
        pass


def map_file(path: str) -> mmap.mmap:
    """The file ``path`` mapped read-only (an ``mmap`` to view with ``np.frombuffer``). An
    empty file gives ``b""``.

    :raises OSError: the file cannot be opened or is not a regular file
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        if st.st_size == 0:
            os.close(fd)
            return b""  # type: ignore[return-value]  (mmap cannot map nothing)
        mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    _register(mm, fd, 0, st.st_size, (st.st_dev, st.st_ino))
    return mm


def _mapping_of(arr: np.ndarray) -> Optional[_Mapping]:
    base = arr.base
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    if type(base) is not mmap.mmap:
        return None
    info = _LIVE.get(id(base))
    return info if info is not None and info.ref() is base else None


def is_mapped(arr: np.ndarray) -> bool:
    """Whether ``arr`` views a file mapped by :func:`map_file` or :func:`keep`."""
    return isinstance(arr, np.ndarray) and _mapping_of(arr) is not None


class FileSpan(NamedTuple):
    """Where an array's bytes are: ``length`` bytes at ``offset`` of the open file ``fd``
    (valid while the array lives)."""

    fd: int
    offset: int
    length: int


def file_span(arr: np.ndarray) -> Optional[FileSpan]:
    """Where the bytes of ``arr``, in C order, are in a mapped file; ``None`` for an array
    in memory, or one whose C-order bytes are not one run of the file (a transposed view).

    Before / after, for a weight ``w`` of a file mapped at offset 0::

        file_span(w)        ->  FileSpan(fd=7, offset=4096, length=1048576)
        file_span(w[2:])    ->  FileSpan(fd=7, offset=6144, length=1046528)
        file_span(w.T)      ->  None  (its C order is not the file's)
    """
    if not isinstance(arr, np.ndarray) or not arr.flags.c_contiguous:
        return None
    info = _mapping_of(arr)
    if info is None:
        return None
    start = arr.ctypes.data - info.address
    return FileSpan(info.fd, info.offset + start, arr.nbytes)


def _madvise(info: _Mapping, start: int, end: int) -> None:
    mm = info.ref()
    if mm is None or _DONTNEED is None or end <= start:
        return
    start -= start % _PAGE
    with contextlib.suppress(OSError, ValueError):
        mm.madvise(_DONTNEED, start, min(end, info.length) - start)


def release(arr: np.ndarray) -> None:
    """Drop the pages of ``arr``'s mapping that hold its elements from the process's
    memory (they stay in the page cache); nothing for an array in memory."""
    info = _mapping_of(arr) if isinstance(arr, np.ndarray) else None
    if info is None or arr.size == 0:
        return
    lo, hi = np.lib.array_utils.byte_bounds(arr) if hasattr(np.lib, "array_utils") else np.byte_bounds(arr)
    _madvise(info, lo - info.address, hi - info.address)


def release_all() -> None:
    """Drop every mapped page from the process's memory (:func:`release` of everything)."""
    for info in list(_LIVE.values()):
        _madvise(info, 0, info.length)


# ----------------------------------------------------------------------------- identity


def digest(arr: np.ndarray) -> int:
    """A hash of ``arr``'s dtype, shape and contents: of every byte for a small array, of
    a fixed sample of elements for a large one (:data:`LARGE` bytes or more), which reads
    a few pages of a mapped weight instead of all of it. Equal arrays hash alike; two that
    differ only between the samples hash alike too, and :func:`equal` tells them apart."""
    if arr.nbytes < LARGE:
        return hash((arr.dtype.name, arr.shape, hash(np.require(arr, requirements="C").tobytes())))
    picks = np.linspace(0, arr.size - 1, num=_SAMPLES).astype(np.intp)
    sample = arr.flat[picks]
    release(arr)
    return hash((arr.dtype.name, arr.shape, hash(sample.tobytes())))


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are the same elements of the same memory or the same file."""
    ia, ib = a.__array_interface__, b.__array_interface__
    if ia["data"][0] == ib["data"][0] and a.strides == b.strides:
        return True
    sa, sb = file_span(a), file_span(b)
    if sa is None or sb is None or sa.offset != sb.offset:
        return False
    ma, mb = _mapping_of(a), _mapping_of(b)
    return ma is not None and mb is not None and ma.file_id == mb.file_id


def equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` hold the same dtype, shape and bytes (NaNs compare by their
    bits). The same bytes of the same file are equal unread; other large arrays are
    compared a block of rows at a time, and their mapped pages dropped afterwards."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if _same_bytes(a, b):
        return True
    if a.nbytes < LARGE or a.ndim == 0:
        return np.require(a, requirements="C").tobytes() == np.require(b, requirements="C").tobytes()
    rows = max(1, _BLOCK // max(1, a[0].nbytes))
    try:
        for i in range(0, a.shape[0], rows):
            x = np.ascontiguousarray(a[i:i + rows]).reshape(-1).view(np.uint8)
            y = np.ascontiguousarray(b[i:i + rows]).reshape(-1).view(np.uint8)
            if not np.array_equal(x, y):
                return False
        return True
    finally:
        release(a)
        release(b)


# ----------------------------------------------------------------------------- new weights


class _Scratch:
    """Where :func:`spill_to_disk` puts new weights past its budget: one unlinked file."""

    def __init__(self, budget: int, directory: Optional[str]) -> None:
        self.budget = budget
        self.directory = directory
        self.held = 0
        self.fd: Optional[int] = None
        self.end = 0
        self.spilled = 0

    def take(self, arr: np.ndarray, copy: bool) -> np.ndarray:
        if self.held + arr.nbytes <= self.budget:
            out = _frozen_copy(arr) if copy else _frozen(arr)
            self.held += out.nbytes
            weakref.finalize(out, self._dropped, out.nbytes)
            return out
        return self._spill(arr)

    def _dropped(self, nbytes: int) -> None:
        self.held -= nbytes

    def _spill(self, arr: np.ndarray) -> np.ndarray:
        if self.fd is None:
            f = tempfile.TemporaryFile(prefix="passhost-weights-", dir=self.directory)
            self.fd = os.dup(f.fileno())
            f.close()
        offset = self.end + (-self.end % mmap.ALLOCATIONGRANULARITY)
        _write_at(self.fd, arr, offset)
        self.end = offset + arr.nbytes
        self.spilled += arr.nbytes
        mm = mmap.mmap(self.fd, arr.nbytes, access=mmap.ACCESS_READ, offset=offset)
        st = os.fstat(self.fd)
        _register(mm, os.dup(self.fd), offset, arr.nbytes, (st.st_dev, st.st_ino))
        out = np.frombuffer(mm, dtype=arr.dtype, count=arr.size).reshape(arr.shape)
        release_all()  # whatever mapped pages computing ``arr`` read
        return out

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # the mappings hold their own descriptors: the file lives on
            self.fd = None


def _write_at(fd: int, arr: np.ndarray, offset: int) -> None:
    """Write ``arr``'s C-order bytes at ``offset`` of ``fd``, a block of rows at a time."""
    if arr.flags.c_contiguous:
        blocks: Iterator = iter([arr])
    else:
        rows = max(1, _BLOCK // max(1, arr[0].nbytes)) if arr.ndim else 1
        blocks = (np.ascontiguousarray(arr[i:i + rows]) for i in range(0, arr.shape[0], rows))
    if not hasattr(os, "pwrite"):  # (Windows) one position, written in order
        os.lseek(fd, offset, os.SEEK_SET)
    for block in blocks:
        view = memoryview(block.reshape(-1).view(np.uint8))
        while view:
            n = os.pwrite(fd, view[:1 << 30], offset) if hasattr(os, "pwrite") else os.write(fd, view[:1 << 30])
            if n <= 0:
                raise OSError(errno.EIO, "the scratch file accepted no more bytes")
            offset += n
            view = view[n:]


def _frozen_copy(arr: np.ndarray) -> np.ndarray:
    out = np.array(arr, copy=True, order="C")
    out.flags.writeable = False
    return out


def _frozen(arr: np.ndarray) -> np.ndarray:
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
        return _frozen_copy(arr)
    arr.flags.writeable = False
    return arr


_SCRATCH: list = []  # the active spill_to_disk stores, innermost last


def keep(arr: np.ndarray) -> np.ndarray:
    """A read-only C-order copy of the new weight ``arr`` (which its caller may go on
    changing): in memory, or, inside :func:`spill_to_disk` once its budget is used, in the
    scratch file and mapped back. A large one is counted against the open
    :mod:`passhost.progress` step."""
    if arr.nbytes < LARGE or arr.ndim == 0:
        return _frozen_copy(arr)
    progress.advance(arr.nbytes)
    return _SCRATCH[-1].take(arr, copy=True) if _SCRATCH else _frozen_copy(arr)


def adopt(arr: np.ndarray) -> np.ndarray:
    """The fresh array ``arr`` -- a kernel's result that nothing else holds -- made a
    constant's data without a copy: ``arr`` itself, read-only (copied only if it is not
    contiguous), or, inside :func:`spill_to_disk` once its budget is used, written to the
    scratch file and mapped back, so ``arr`` can go. FoldConstant adopts what it computes::

        Constant(weights.adopt(w * s))    # w * s: no second copy, and on disk past the budget
    """
    if arr.nbytes < LARGE or arr.ndim == 0:
        return _frozen(arr)
    progress.advance(arr.nbytes)
    return _SCRATCH[-1].take(arr, copy=False) if _SCRATCH else _frozen(arr)


@contextlib.contextmanager
def spill_to_disk(budget: int = DEFAULT_BUDGET, directory: Optional[str] = None) -> Iterator[None]:
    """In the ``with`` body, new large weights (``passhost.ir.Constant`` of a computed
    array of :data:`LARGE` bytes or more) are kept in memory until they add up to
    ``budget`` bytes; each further one goes to an unlinked scratch file in ``directory``
    (the system's temporary directory by default) and is mapped back. The file is gone
    once the last weight in it is."""
    store = _Scratch(budget, directory)
    _SCRATCH.append(store)
    try:
        yield
    finally:
        _SCRATCH.remove(store)
        store.close()
