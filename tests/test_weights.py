"""Weights larger than memory (issue 35): arrays mapped from files, their identity without
reading them, new weights past a budget in a scratch file, and writing them file to file."""
from __future__ import annotations

import errno
import gc
import io
import os

import numpy as np
import pytest

from passhost import ir, progress, weights
from passhost import io as pio


def _weights_file(tmp_path, arrays, name="w.bin", align=4096):
    """``arrays`` written one after the other (each at a multiple of ``align``); their offsets."""
    path = tmp_path / name
    offsets = []
    with open(path, "wb") as f:
        for a in arrays:
            f.write(b"\0" * (-f.tell() % align))
            offsets.append(f.tell())
            f.write(a.tobytes())
    return str(path), offsets


def _view(mm, offset, like):
    return np.frombuffer(mm, dtype=like.dtype, count=like.size, offset=offset).reshape(like.shape)


@pytest.fixture
def mapped(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((512, 1024)).astype(np.float32)   # 2 MB: large
    b = rng.standard_normal((64, 32)).astype(np.float32)      # small
    path, (oa, ob) = _weights_file(tmp_path, [a, b])
    mm = weights.map_file(path)
    return {"path": path, "mm": mm, "a": a, "b": b, "va": _view(mm, oa, a), "vb": _view(mm, ob, b), "oa": oa, "ob": ob}


def test_a_mapped_array_is_read_only_and_knows_its_span_in_the_file(mapped):
    va = mapped["va"]
    assert not va.flags.writeable and weights.is_mapped(va)
    np.testing.assert_array_equal(va, mapped["a"])
    span = weights.file_span(va)
    assert span.offset == mapped["oa"] and span.length == mapped["a"].nbytes
    assert os.pread(span.fd, 16, span.offset) == mapped["a"].tobytes()[:16]
    sub = weights.file_span(va[2:])
    assert sub.offset == mapped["oa"] + 2 * 1024 * 4 and sub.length == 510 * 1024 * 4
    assert weights.file_span(va.T) is None                  # its C order is not the file's
    assert weights.file_span(mapped["a"]) is None and not weights.is_mapped(mapped["a"])


def test_releasing_pages_keeps_the_values(mapped):
    va = mapped["va"]
    total = float(va.sum())
    weights.release(va)
    weights.release_all()
    weights.release(mapped["a"])  # an array in memory: nothing to do
    assert float(va.sum()) == total


def test_a_constant_over_a_mapped_weight_stays_mapped_and_hashes_like_its_copy(mapped):
    va = mapped["va"]
    c, copy = ir.Constant(va), ir.Constant(mapped["a"].copy())
    assert c.data is va and weights.is_mapped(c.data)
    assert ir.structural_hash(c) == ir.structural_hash(copy)
    assert ir.structural_equal(c, copy)
    assert ir.structural_equal(ir.Constant(va.T), ir.Constant(mapped["a"].T.copy()))
    changed = mapped["a"].copy()
    changed[100, 7] += 1  # between the sampled elements: same hash, not equal
    assert weights.digest(changed) == weights.digest(va)
    assert not ir.structural_equal(c, ir.Constant(changed))


def test_two_mappings_of_the_same_bytes_are_equal_without_reading(mapped, monkeypatch):
    other = _view(weights.map_file(mapped["path"]), mapped["oa"], mapped["a"])
    monkeypatch.setattr(np, "array_equal", lambda *a, **k: pytest.fail("the weight was read"))
    assert weights.equal(mapped["va"], other)
    assert weights.equal(mapped["va"].T, mapped["va"].T)


def test_equal_compares_large_arrays_a_block_at_a_time(mapped):
    a = mapped["a"]
    assert weights.equal(mapped["va"], a.copy())
    flipped = a.copy()
    flipped[-1, -1] = -flipped[-1, -1]
    assert not weights.equal(mapped["va"], flipped)
    nan = np.full((600, 600), np.nan, np.float32)
    assert weights.equal(nan, nan.copy())  # NaNs compare by their bits
    assert not weights.equal(a, a.astype(np.float64)) and not weights.equal(a, a.reshape(1024, 512))


def test_new_weights_past_the_budget_go_to_a_scratch_file(tmp_path):
    big = np.arange(1 << 19, dtype=np.float32).reshape(512, 1024)  # 2 MB
    assert not weights.is_mapped(ir.Constant(big).data)          # no store: in memory
    with weights.spill_to_disk(budget=3 << 20, directory=str(tmp_path)):
        first = ir.Constant(big)
        second = ir.Constant(big * 2)
        third = ir.Constant((big + 1)[:, ::-1])                  # not contiguous: written in C order
        assert not weights.is_mapped(first.data)                 # within the budget
        assert weights.is_mapped(second.data) and weights.is_mapped(third.data)
        assert not second.data.flags.writeable and second.data.flags.c_contiguous
        np.testing.assert_array_equal(second.data, big * 2)
        np.testing.assert_array_equal(third.data, (big + 1)[:, ::-1])
        del first
        gc.collect()
        fourth = ir.Constant(big * 3)                           # the budget freed by first
        assert not weights.is_mapped(fourth.data)
        assert os.listdir(tmp_path) == []                        # the scratch file is unlinked
    np.testing.assert_array_equal(second.data, big * 2)          # and lives as long as its weights
    small = ir.Constant(np.ones(4, np.float32))
    assert small.data.flags.writeable is False


def test_write_buffers_copies_a_mapped_weight_in_the_kernel(mapped, tmp_path, monkeypatch):
    copied = []
    real = pio._COPY[0]

    def counting(src, offset, length, dst):
        n = real(src, offset, length, dst)
        copied.append(n)
        return n

    monkeypatch.setattr(pio, "_COPY", [counting])
    va = mapped["va"]
    out = tmp_path / "out.bin"
    with pio.atomic_writer(str(out)) as f:
        f.write(b"head")
        n = pio.write_buffers(f, [b"x", va, mapped["vb"], va.T, va[::2]])
    want = b"head" + b"x" + va.tobytes() + mapped["b"].tobytes() + va.T.tobytes() + va[::2].tobytes()
    assert out.read_bytes() == want and n == len(want) - 4
    assert sum(copied) == va.nbytes                     # only the whole mapped weight went file to file
    stream = io.BytesIO()
    pio.write_buffers(stream, [va, va.T])
    assert stream.getvalue() == va.tobytes() + va.T.tobytes()


@pytest.mark.parametrize("failing", ["copy_file_range", "sendfile"])
def test_copying_falls_back_when_the_kernel_cannot_copy_between_the_files(mapped, tmp_path, monkeypatch, failing):
    def refuse(*args):
        raise OSError(errno.EXDEV, "cross-device")

    monkeypatch.setattr(os, failing, refuse, raising=False)
    if failing == "sendfile":
        monkeypatch.setattr(os, "copy_file_range", refuse, raising=False)
    monkeypatch.setattr(pio, "_COPY", [pio._copy_file_range])
    span = weights.file_span(mapped["va"])
    out = tmp_path / "out.bin"
    with open(out, "wb") as f:
        pio.copy_range(span.fd, span.offset, span.length, f.fileno())
    assert out.read_bytes() == mapped["a"].tobytes()
    assert pio._COPY[0] is (pio._sendfile if failing == "copy_file_range" else pio._read_write)


def test_a_source_that_ends_early_is_an_error_not_a_short_file(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"abc")
    with open(src, "rb") as s, open(tmp_path / "dst.bin", "wb") as d:
        with pytest.raises(OSError, match="changed while it was read"):
            pio.copy_range(s.fileno(), 0, 10, d.fileno())


def test_progress_steps_advance_and_are_watched():
    events = []
    with progress.watch(lambda event, s: events.append((event, s.label, s.done_items, s.done_bytes))):
        with progress.step("export", total_bytes=10, total_items=2) as s:
            s.advance(4)
            progress.advance(6)  # the innermost open step
            assert progress.current() is s and s.eta() is not None
    assert events == [("start", "export", 0, 0), ("advance", "export", 1, 4), ("advance", "export", 2, 10),
                      ("end", "export", 2, 10)]
    assert progress.current() is None
    progress.advance(1)  # no step: nothing happens


def test_a_pass_counts_the_weights_it_makes():
    big = np.ones((512, 1024), np.float32)
    with progress.step("[1/1] Fold") as s:
        ir.Constant(big + 1)
        ir.Constant(np.ones(3, np.float32))  # small: not a weight worth showing
    assert (s.done_items, s.done_bytes) == (1, big.nbytes)


def test_a_layout_conversion_makes_each_new_weight_in_the_scratch_file(tmp_path):
    import passhost
    from passhost.transform import PassContext, Sequential

    w = np.random.default_rng(0).standard_normal((256, 128, 3, 3)).astype(np.float32)  # 1.2 MB
    x = ir.var("x", shape=(1, 128, 8, 8))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.nn.conv2d(x, ir.const(w), padding=(1, 1), channels=256,
                                                                kernel_size=(3, 3))))
    seq = Sequential([passhost.passes.ConvertLayout(desired_layouts={"nn.conv2d": ["NHWC", "default"]}),
                      passhost.passes.FoldConstant()])
    with weights.spill_to_disk(budget=0, directory=str(tmp_path)), PassContext(opt_level=3):
        out = seq(mod)
    big = [n for n in ir.post_order(out["main"]) if isinstance(n, ir.Constant) and n.data.nbytes >= weights.LARGE]
    assert len(big) == 1 and big[0].data.shape == (3, 3, 128, 256) and weights.is_mapped(big[0].data)
    data = np.random.default_rng(1).standard_normal((1, 128, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(ir.evaluate(out, data), ir.evaluate(mod, data), rtol=1e-5, atol=1e-5)


def test_replace_file_frees_a_large_replaced_file_off_the_callers_path(tmp_path, monkeypatch):
    import threading

    started = []

    class Recording(threading.Thread):
        def start(self):
            started.append(self._target)
            super().start()

    monkeypatch.setattr(pio.threading, "Thread", Recording)
    old, new = tmp_path / "m.onnx.data", tmp_path / "new.data"
    old.write_bytes(b"o" * (2 << 20))
    new.write_bytes(b"n")
    pio.replace_file(str(new), str(old))
    assert old.read_bytes() == b"n" and not new.exists()
    if os.name == "posix":
        assert started == [os.close]
    (tmp_path / "other").write_bytes(b"x")
    pio.replace_file(str(tmp_path / "other"), str(tmp_path / "fresh"))  # nothing replaced: a plain rename
    assert (tmp_path / "fresh").read_bytes() == b"x"
