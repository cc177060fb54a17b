"""Model formats: ir.load / ir.save, the passhost_register_formats hook, and `passhost run`
reading and writing by suffix, over several inputs, with --from/--to."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from passhost import hookimpl, ir
from passhost.cli import ExitCode, main
from passhost.errors import FormatError, PluginConflict, UsageError
from passhost.hookspecs import FormatEntry, PassEntry
from passhost.io import write_text_atomic
from passhost.registry import Registry, use_registry
from passhost.transform import module_pass

TEXT = """#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32]) {
  %0 = multiply(2f, 3f);
  add(%x, %0)
}
"""


def _module() -> ir.IRModule:
    return ir.parse(TEXT)


def test_text_round_trip_by_suffix(tmp_path):
    for name in ("m.txt", "m.relay", "m"):
        path = str(tmp_path / name)
        ir.save(_module(), path)
        ir.assert_structural_equal(ir.load(path), _module())


def test_keep_params_returns_a_pair_for_text(tmp_path):
    path = str(tmp_path / "m.txt")
    ir.save(_module(), path)
    mod, params = ir.load(path, keep_params=True)
    assert params == {} and isinstance(mod, ir.IRModule)


def test_text_rejects_input_shapes(tmp_path):
    path = str(tmp_path / "m.txt")
    ir.save(_module(), path)
    with pytest.raises(UsageError, match="input shapes apply to model formats"):
        ir.load(path, input_shapes={"x": (1,)})


def test_binary_file_with_an_unclaimed_suffix_names_the_installed_formats(tmp_path):
    path = tmp_path / "model.pb"
    path.write_bytes(b"\x08\xb2\x00\x01")
    with use_registry(Registry(load_entrypoints=False)):
        with pytest.raises(FormatError) as info:
            ir.load(str(path))
    msg = str(info.value)
    assert "model.pb" in msg and "installed formats: text (.txt, .relay)" in msg
    assert "decode" not in msg


def test_onnx_without_its_plugin_names_the_distribution(tmp_path):
    path = tmp_path / "model.onnx"
    path.write_bytes(b"\x08\xb2\x00\x01")
    with use_registry(Registry(load_entrypoints=False)):
        for call in (lambda: ir.load(str(path)), lambda: ir.save(_module(), str(tmp_path / "o.onnx"))):
            with pytest.raises(FormatError, match=r"pip install passhost-onnx"):
                call()
        with pytest.raises(FormatError, match=r"format 'onnx' is not installed.*passhost-onnx"):
            ir.load(str(path), format="onnx")
    assert not (tmp_path / "o.onnx").exists()


class _JsonFormat:
    """An in-process format: text wrapped in JSON, suffix .rjson."""

    @staticmethod
    def load(path, *, input_shapes=None, keep_params=False):
        with open(path, encoding="utf-8") as f:
            mod = ir.parse(json.load(f)["text"])
        return (mod, {}) if keep_params else mod

    @staticmethod
    def save(mod, path, *, indent=None):
        write_text_atomic(path, json.dumps({"text": ir.astext(mod)}, indent=indent))

    @hookimpl
    def passhost_register_formats(self):
        yield FormatEntry("relay-json", (".rjson",), load=self.load, save=self.save, summary="text in JSON")


def _json_registry(*extra) -> Registry:
    reg = Registry()  # the installed plugins, and the JSON format beside them
    reg.register_plugin(_JsonFormat(), "relay-json")
    for i, plugin in enumerate(extra):
        reg.register_plugin(plugin, f"extra-{i}")
    return reg


def test_a_plugin_format_is_chosen_by_suffix_and_by_name(tmp_path):
    with use_registry(_json_registry()):
        path = str(tmp_path / "m.rjson")
        ir.save(_module(), path, indent=1)
        with open(path, encoding="utf-8") as f:
            assert json.load(f)["text"].startswith("#[version")
        ir.assert_structural_equal(ir.load(path), _module())
        other = str(tmp_path / "m.data")
        ir.save(_module(), other, format="relay-json")
        ir.assert_structural_equal(ir.load(other, format="relay-json"), _module())
        with pytest.raises(FormatError, match="takes no option"):
            ir.save(_module(), path, opset=17)


def test_two_formats_claiming_one_suffix_is_an_error_naming_both(tmp_path):
    class Other:
        @hookimpl
        def passhost_register_formats(self):
            yield FormatEntry("other", (".rjson",), save=lambda mod, path: None)

    with use_registry(_json_registry(Other())):
        with pytest.raises(PluginConflict, match="claimed by 2 formats: 'other'.* and 'relay-json'"):
            ir.save(_module(), str(tmp_path / "m.rjson"))


def test_a_format_that_crashes_is_reported_with_its_name(tmp_path):
    class Crashing:
        @hookimpl
        def passhost_register_formats(self):
            def load(path, **kw):
                raise KeyError("weights")
            yield FormatEntry("crash", (".crash",), load=load)

    (tmp_path / "m.crash").write_bytes(b"\0")
    with use_registry(_json_registry(Crashing())):
        with pytest.raises(FormatError, match=r"format 'crash' .* failed to read .*KeyError"):
            ir.load(str(tmp_path / "m.crash"))
        with pytest.raises(FormatError, match="cannot write files"):
            ir.save(_module(), str(tmp_path / "o.crash"))


@pytest.mark.parametrize("bad", [dict(name="Bad Name", suffixes=(".x",)), dict(name="x", suffixes=".x"),
                                 dict(name="x", suffixes=("x",)), dict(name="x", suffixes=(".x",))])
def test_bad_format_entries_break_their_plugin(bad):
    from passhost.errors import PluginLoadError

    with pytest.raises(PluginLoadError):
        FormatEntry(**bad, load=None) if "load" not in bad else FormatEntry(**bad)


def test_a_plugin_cannot_take_the_text_name():
    class Text:
        @hookimpl
        def passhost_register_formats(self):
            yield FormatEntry("text", (".t2",), save=lambda mod, path: None)

    reg = Registry(load_entrypoints=False)
    assert not reg.register_plugin(Text(), "text-thief")
    assert "built-in text format" in reg.broken[0].error


def test_list_shows_formats(capsys):
    with use_registry(_json_registry()):
        assert main(["list"]) == ExitCode.OK
        out = capsys.readouterr().out
        assert any(line.split()[:3] == ["relay-json", "format", "read/write"] for line in out.splitlines())
        assert any(line.split()[:2] == ["text", "format"] for line in out.splitlines())
        assert main(["list", "--json"]) == ExitCode.OK
        doc = json.loads(capsys.readouterr().out)
        names = {f["name"]: f for f in doc["formats"]}
        assert names["relay-json"]["suffixes"] == [".rjson"] and names["text"]["distribution"] == "passhost"


@module_pass(opt_level=0, name="Explode")
def _explode(mod, ctx):
    """Fail on modules whose @main has a parameter named %boom."""
    if any(p.name_hint == "boom" for p in mod["main"].params):
        raise RuntimeError("boom")
    return mod


class _ExplodePlugin:
    @hookimpl
    def passhost_register_passes(self):
        yield PassEntry("Explode", lambda: _explode)


def _batch_inputs(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text(TEXT)
    boom = tmp_path / "boom.txt"
    boom.write_text(TEXT.replace("%x", "%boom"))
    junk = tmp_path / "junk.pb"
    junk.write_bytes(b"\xb2\0")
    return [str(good), str(boom), str(junk)]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_batch_writes_one_output_per_input_and_reports_failures(tmp_path, capsys, jobs):
    inputs = _batch_inputs(tmp_path)
    out = tmp_path / "out"
    reg = Registry()
    reg.register_plugin(_ExplodePlugin(), "explode")
    with use_registry(reg):
        if jobs == "2":  # worker processes load their own registry: use installed passes only
            code = main(["run", *inputs[:1], inputs[2], "-p", "FoldConstant", "-o", f"{out}/", "-j", jobs,
                         "--check"])
        else:
            code = main(["run", *inputs, "-p", "FoldConstant,Explode", "-o", f"{out}/", "--check"])
    table = capsys.readouterr().out
    assert code == (ExitCode.PASS_FAILED if jobs == "1" else ExitCode.USAGE_ERROR)
    lines = table.splitlines()
    good_row = next(line for line in lines if line.startswith("good.txt"))
    assert good_row.split()[1:3] == ["2", "1"] and good_row.rstrip().endswith("ok")
    assert float(good_row.split()[4]) == 0.0
    assert any(line.startswith("junk.pb") and "FAILED" in line and "installed formats" in line for line in lines)
    if jobs == "1":
        assert any(line.startswith("boom.txt") and "pass 'Explode' failed" in line for line in lines)
    ir.assert_structural_equal(ir.load(str(out / "good.txt")),
                               ir.parse(TEXT.replace("multiply(2f, 3f)", "6f")))
    assert not (out / "junk.pb").exists()


def test_batch_refuses_two_inputs_with_one_output_name(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in "ab":
        (tmp_path / d / "m.txt").write_text(TEXT)
    code = main(["run", str(tmp_path / "a" / "m.txt"), str(tmp_path / "b" / "m.txt"), "-o", str(tmp_path / "o/")])
    assert code == ExitCode.USAGE_ERROR


def test_run_to_a_plugin_format_and_back(tmp_path):
    src = tmp_path / "m.txt"
    src.write_text(TEXT)
    with use_registry(_json_registry()):
        assert main(["run", str(src), "-p", "FoldConstant", "-o", str(tmp_path / "o.rjson")]) == ExitCode.OK
        assert main(["run", str(tmp_path / "o.rjson"), "-p", "InferType", "--to", "relay-json",
                     "-o", str(tmp_path / "o2.data")]) == ExitCode.OK
        ir.assert_structural_equal(ir.load(str(tmp_path / "o2.data"), format="relay-json"),
                                   ir.parse(TEXT.replace("multiply(2f, 3f)", "6f")))


def test_run_rejects_onnx_options_for_text_output(tmp_path, capsys):
    src = tmp_path / "m.txt"
    src.write_text(TEXT)
    assert main(["run", str(src), "-p", "InferType", "--opset", "13", "-o", str(tmp_path / "o.txt")]) == 2
    assert "--opset apply to ONNX output" in capsys.readouterr().err
    assert not (tmp_path / "o.txt").exists()


def test_check_on_a_single_text_model(tmp_path, capsys):
    src = tmp_path / "m.txt"
    src.write_text(TEXT)
    assert main(["run", str(src), "-p", "FoldConstant", "--check", "-o", str(tmp_path / "o.txt")]) == 0
    err = capsys.readouterr().err
    row = next(line for line in err.splitlines() if line.startswith("m.txt"))
    assert row.split()[1:3] == ["2", "1"] and float(row.split()[4]) == 0.0


def test_input_shape_syntax_errors_name_the_option(tmp_path, capsys):
    src = tmp_path / "m.txt"
    src.write_text(TEXT)
    for bad in ("x", "x=1,a", "=1,2", "x=-1"):
        assert main(["run", str(src), "--input-shape", bad]) == ExitCode.USAGE_ERROR
        assert "--input-shape" in capsys.readouterr().err


def test_max_difference_sees_a_changed_result():
    from passhost.cli.check import max_difference

    before = _module()
    after = ir.parse(TEXT.replace("3f", "4f"))
    assert max_difference("", before, None, after) == pytest.approx(2.0)
    assert np.isfinite(max_difference("", before, None, before))
    assert os.path.basename("x") == "x"


def test_progress_names_each_top_level_pass_and_clears_its_line():
    import io

    import passhost
    from passhost import transform
    from passhost.cli.progress import Progress

    stream = io.StringIO()
    seq = passhost.pipeline("FoldConstant,EliminateCommonSubexpr")
    with transform.PassContext(opt_level=3, instruments=[Progress(stream, len(seq.passes))]):
        seq(_module())
    text = stream.getvalue()
    assert "[1/2] FoldConstant" in text and "[2/2] EliminateCommonSubexpr" in text
    assert text.endswith("\r")


def test_on_a_terminal_run_shows_the_file_being_read_and_the_running_pass(tmp_path):
    import pty
    import subprocess
    import sys

    src = tmp_path / "m.txt"
    src.write_text(TEXT)
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "passhost", "run", str(src), "-p", "FoldConstant,InferType",
                               "-o", str(tmp_path / "o.txt")], stderr=slave, stdout=subprocess.PIPE, timeout=120)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    assert proc.returncode == 0
    text = seen.decode()
    assert f"reading {src} ..." in text and "[1/2] FoldConstant" in text and "[2/2] InferType" in text
