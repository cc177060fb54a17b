"""``passhost run``'s side of models larger than memory (issue 35): the sizes and layouts
its options take, progress with bytes and tensors, and the summary's bytes written and
peak memory."""
from __future__ import annotations

import io
import time

import numpy as np
import pytest

from passhost import ir, progress, transform
from passhost.cli import main
from passhost.cli.common import byte_size
from passhost.cli.progress import Progress, describe, human_bytes


@pytest.fixture(autouse=True)
def in_tmp_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("text, size", [("4096", 4096), ("1K", 1024), ("1KB", 1024), ("64KiB", 65536),
                                        ("256M", 256 << 20), ("1.5G", 3 << 29), ("0", 0)])
def test_sizes_are_bytes_or_a_number_with_a_binary_unit(text, size):
    assert byte_size(text) == size


def test_a_bad_size_or_layout_is_a_usage_error(capsys):
    assert main(["run", "--example", "tutorial", "--weights-in-memory", "lots"]) == 2
    assert "'lots' is not a size" in capsys.readouterr().err
    assert main(["run", "--example", "tutorial", "--external-data", "model.onnx", "-o", "o.onnx"]) == 2
    err = capsys.readouterr().err
    assert "'model.onnx' is not a layout" in err and "INPUT before --external-data" in err
    assert main(["run", "--example", "tutorial", "--inline-below", "2K", "-o", "out.txt"]) == 2
    assert "--inline-below apply to ONNX output" in capsys.readouterr().err


def test_the_summary_says_what_was_written_and_the_peak_memory(capsys, tmp_path):
    assert main(["run", "--example", "tutorial", "-O3", "-o", "out.txt", "--summary"]) == 0
    err = capsys.readouterr().err
    line = [x for x in err.splitlines() if x.startswith("passhost: wrote")][0]
    size = (tmp_path / "out.txt").stat().st_size
    assert f"wrote {human_bytes(size)} to out.txt in " in line and "; peak memory " in line and " MB" in line


def test_a_step_shows_tensors_bytes_percent_and_the_time_left_once_it_is_long():
    s = progress.Step("export", total_bytes=3_000_000_000, total_items=40)
    s.done_bytes, s.done_items = 1_200_000_000, 12
    assert describe(s) == "export  12/40 tensors  1.2 GB/3.0 GB  40 %"
    s.started -= 4.0
    assert describe(s).startswith("export  12/40 tensors  1.2 GB/3.0 GB  40 %  ") and describe(s).endswith(" s left")
    assert describe(progress.Step("import")) == "import"
    assert [human_bytes(n) for n in (512, 12_345, 340e6, 1.23e9, 123e9)] == ["512 B", "12.3 kB", "340 MB",
                                                                            "1.2 GB", "123 GB"]


def test_a_pass_line_shows_the_weights_the_pass_makes_and_steps_are_drawn():
    from passhost.transform import function_pass

    @function_pass(opt_level=0, name="MakeWeights")
    def make(func, mod, ctx):
        for _ in range(3):
            ir.Constant(np.ones((512, 1024), np.float32) * 2)  # a computed 2 MB weight each
            time.sleep(0.11)  # (the line is redrawn at most every 0.1 s)
        return func

    stream = io.StringIO()
    shown = Progress(stream, ["MakeWeights"])
    mod = ir.IRModule.from_expr(ir.Function([], ir.const(1.0)))
    with progress.watch(shown.on_step):
        with transform.PassContext(instruments=[shown]):
            transform.Sequential([make])(mod)
        with progress.step("export", total_bytes=10, total_items=1) as s:
            s.advance(10)
    text = stream.getvalue()
    assert "[1/1] MakeWeights  (" in text and "3 weights 6.3 MB" in text
    assert "export  0/1 tensors  0 B/10 B  0 %" in text and text.endswith("\r")
