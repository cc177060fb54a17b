"""Tests for :mod:`passhost.io`."""
from __future__ import annotations

import os

import pytest

from passhost.io import write_text_atomic


def _leftovers(directory) -> list:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("fsync", [True, False])
def test_writes_new_file_with_umask_mode(tmp_path, fsync):
    path = tmp_path / "out.txt"
    old = os.umask(0o027)
    try:
        write_text_atomic(str(path), "héllo\n", fsync=fsync)
    finally:
        os.umask(old)
    assert path.read_text(encoding="utf-8") == "héllo\n"
    assert path.stat().st_mode & 0o777 == 0o640
    assert _leftovers(tmp_path) == []


def test_replaces_and_keeps_mode(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    path.chmod(0o600)
    write_text_atomic(str(path), "new")
    assert path.read_text() == "new"
    assert path.stat().st_mode & 0o777 == 0o600
    assert _leftovers(tmp_path) == []


def test_relative_path_in_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_text_atomic("rel.txt", "x")
    assert (tmp_path / "rel.txt").read_text() == "x"


def test_missing_directory_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        write_text_atomic(str(tmp_path / "nope" / "out.txt"), "x")


def test_failed_write_keeps_old_file_and_removes_temp(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        write_text_atomic(str(path), "bad \udc80 surrogate")
    assert path.read_text() == "old"
    assert _leftovers(tmp_path) == []


def test_target_is_a_directory(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(OSError):
        write_text_atomic(str(tmp_path / "d"), "x")
    assert _leftovers(tmp_path) == []


def test_atomic_writer_replaces_only_on_success(tmp_path):
    from passhost.io import atomic_writer

    path = tmp_path / "model.bin"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with atomic_writer(str(path)) as f:
            f.write(b"half of the new")
            raise RuntimeError("the exporter failed")
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["model.bin"]
    with atomic_writer(str(path)) as f:
        f.write(b"new ")
        f.write(memoryview(b"content"))
    assert path.read_bytes() == b"new content"


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    from passhost.io import write_text_atomic

    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_text_atomic(str(link), "new")
    assert link.is_symlink() and target.read_text() == "new"


def test_a_character_device_is_written_in_place_not_replaced():
    import stat

    from passhost.io import write_text_atomic

    before = os.stat(os.devnull)
    write_text_atomic(os.devnull, "discarded")
    after = os.stat(os.devnull)
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_a_fifo_gets_the_whole_content_once(tmp_path):
    import threading

    from passhost.io import write_text_atomic

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    def read():
        with open(fifo) as f:
            got.append(f.read())

    reader = threading.Thread(target=read)
    reader.start()
    write_text_atomic(str(fifo), "through the pipe")
    reader.join(10)
    assert got == ["through the pipe"] and not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_dash_is_stdout_and_nothing_is_written_on_an_error(capsysbinary, tmp_path, monkeypatch):
    from passhost.io import atomic_writer

    monkeypatch.chdir(tmp_path)
    with atomic_writer("-") as f:
        f.write(b"to stdout")
    assert capsysbinary.readouterr().out == b"to stdout"
    with pytest.raises(RuntimeError):
        with atomic_writer("-") as f:
            f.write(b"half")
            raise RuntimeError("stop")
    assert capsysbinary.readouterr().out == b""
    assert not (tmp_path / "-").exists()


def test_a_directory_is_refused(tmp_path):
    from passhost.io import write_text_atomic

    with pytest.raises(IsADirectoryError):
        write_text_atomic(str(tmp_path), "x")


def test_write_buffers_writes_every_buffer_in_order_on_a_file_and_on_a_stream(tmp_path):
    import io

    import numpy as np

    from passhost.io import atomic_writer, write_buffers

    rng = np.random.default_rng(0)
    # more buffers than one writev call takes, empty ones among them, numpy arrays as bytes
    buffers = [rng.integers(0, 256, size=int(n), dtype=np.uint8) for n in rng.integers(0, 40, size=2500)]
    buffers[7] = b""
    buffers[8] = memoryview(b"mid")
    buffers[9] = np.arange(6, dtype=np.float32)
    want = b"".join(bytes(memoryview(b).cast("B")) for b in buffers)
    path = tmp_path / "out.bin"
    with atomic_writer(str(path)) as f:
        f.write(b"head:")  # buffered bytes written before the gathered ones stay first
        assert write_buffers(f, buffers) == len(want)
        f.write(b":tail")
    assert path.read_bytes() == b"head:" + want + b":tail"
    stream = io.BytesIO()
    assert write_buffers(stream, buffers) == len(want) and stream.getvalue() == want


def test_write_buffers_goes_on_after_short_writes(tmp_path, monkeypatch):
    from passhost.io import write_buffers

    real = os.writev
    calls = []

    def short(fd, bufs):  # the kernel may take fewer bytes than offered
        calls.append(len(bufs))
        data = b"".join(bytes(b) for b in bufs)[:7]
        return real(fd, [data])

    monkeypatch.setattr(os, "writev", short)
    buffers = [b"abc", b"", b"defghijklmnop", bytes(range(50))]
    path = tmp_path / "short.bin"
    with open(path, "wb") as f:
        assert write_buffers(f, buffers) == 66
    assert path.read_bytes() == b"".join(buffers) and len(calls) > 5


def test_replacing_a_large_file_frees_the_old_one_off_the_callers_path(tmp_path, monkeypatch):
    import threading

    from passhost import io as pio

    started = []

    class Recording(threading.Thread):
        def start(self):
            started.append(self._target)
            super().start()

    monkeypatch.setattr(pio.threading, "Thread", Recording)

    path = tmp_path / "model.onnx"
    path.write_bytes(b"o" * (pio._RELEASE_LATER + 1))
    old_inode = path.stat().st_ino
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    with pio.atomic_writer(str(path)) as f:
        f.write(b"new")
    assert path.read_bytes() == b"new" and path.stat().st_ino != old_inode
    assert [p.name for p in tmp_path.iterdir()] == ["model.onnx"]
    if os.name == "posix":
        assert started == [os.close]  # the old file's last descriptor is closed by a thread
    for t in threading.enumerate():
        if t.name == "passhost-release":
            t.join(5)
    if fds is not None:  # the old file's descriptor is closed, not leaked
        assert len(os.listdir("/proc/self/fd")) == fds


# -- verify: a check of the written content, run while it is flushed to disk --------------


def test_verify_runs_while_the_fsync_waits_and_a_failure_replaces_nothing(tmp_path, monkeypatch):
    import threading

    from passhost.io import atomic_writer

    path = tmp_path / "model.bin"
    path.write_bytes(b"old")
    checking = threading.Event()
    seen = []
    real_fsync = os.fsync

    def slow_fsync(fd):
        seen.append(checking.wait(timeout=10))  # True only if verify ran meanwhile
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)

    def verify():
        checking.set()

    with atomic_writer(str(path), verify=verify) as f:
        f.write(b"new")
    assert seen == [True] and path.read_bytes() == b"new"

    class Rejected(Exception):
        pass

    def reject():
        checking.set()
        raise Rejected("the checker said no")

    seen.clear()
    checking.clear()
    with pytest.raises(Rejected):
        with atomic_writer(str(path), verify=reject) as f:
            f.write(b"newer")
    assert seen == [True]  # the fsync was waited for before the error went on
    assert path.read_bytes() == b"new" and _leftovers(tmp_path) == []


def test_an_fsync_error_beside_a_passing_verify_still_replaces_nothing(tmp_path, monkeypatch):
    from passhost.io import atomic_writer

    path = tmp_path / "model.bin"
    path.write_bytes(b"old")

    def failing_fsync(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    calls = []
    with pytest.raises(OSError, match="Input/output error"):
        with atomic_writer(str(path), verify=lambda: calls.append(1)) as f:
            f.write(b"new")
    assert calls == [1] and path.read_bytes() == b"old" and _leftovers(tmp_path) == []


@pytest.mark.parametrize("fsync", [True, False])
def test_verify_is_called_once_for_every_kind_of_target(tmp_path, capsysbinary, fsync):
    from passhost.io import atomic_writer

    calls = []
    for target in (str(tmp_path / "new.bin"), "-", os.devnull):
        with atomic_writer(target, fsync=fsync, verify=lambda t=target: calls.append(t)) as f:
            f.write(b"x")
    assert calls == [str(tmp_path / "new.bin"), "-", os.devnull]
    assert capsysbinary.readouterr().out == b"x"


def test_a_file_that_will_be_fsynced_is_handed_to_writeback_as_it_is_written(tmp_path, monkeypatch):
    """Inside an fsyncing atomic_writer, write_buffers asks the kernel to start writing back
    each megabyte or so as soon as it is written (the fsync then waits for less); the ranges
    asked for cover what was written, in order. Without fsync nothing is asked."""
    import numpy as np

    import passhost.io as pio
    from passhost.io import atomic_writer, write_buffers

    asked = []
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, off, n, advice: asked.append((off, n, advice)), raising=False)
    big = [np.full(3 << 19, i, np.uint8) for i in range(3)]  # three 1.5 MB buffers
    path = tmp_path / "w.bin"
    with atomic_writer(str(path)) as f:
        f.write(b"head")
        write_buffers(f, [b"x" * 10] + big)
    data = path.read_bytes()
    assert data == b"head" + b"x" * 10 + b"".join(b.tobytes() for b in big)
    if not pio._FADVISE:  # (not Linux: no hint, the same file)
        assert asked == []
        return
    assert asked and all(a == os.POSIX_FADV_DONTNEED for _, _, a in asked)
    assert asked[0][0] == 4 and all(o + n == asked[k + 1][0] for k, (o, n, _) in enumerate(asked[:-1]))
    assert asked[-1][0] + asked[-1][1] == len(data)
    asked.clear()
    with atomic_writer(str(path), fsync=False) as f:
        write_buffers(f, big)
    assert asked == [] and path.read_bytes() == b"".join(b.tobytes() for b in big)
