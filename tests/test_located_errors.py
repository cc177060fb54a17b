"""Every bad input gets one located error (issue 18 §3): nothing but a PasshostError
escapes ``ir.parse``, type errors in parsed text name ``file:line:col``, and the command
line turns write failures, huge inputs and control characters into one readable line."""
from __future__ import annotations

import errno
import io
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from passhost import ir
from passhost.cli import main
from passhost.errors import ParseError, PasshostError, SourceTypeError, TypeInferenceError

HEAD = '#[version = "0.0.5"]\n'
REPRO = Path(__file__).resolve().parent / "data" / "repro"


def _error(text: str, source_name: str = "m.txt") -> ParseError:
    with pytest.raises(ParseError) as info:
        ir.parse(HEAD + text, source_name=source_name)
    return info.value


def test_negative_nan_keeps_its_sign_through_print_and_parse():
    mod = ir.parse((REPRO / "negative_nan.txt").read_text())
    text = ir.astext(mod)
    assert "-nanf" in text
    value = ir.parse(text)["main"].body.args[1].data
    assert math.isnan(value) and np.signbit(value)


@pytest.mark.parametrize("shape,words", [("[-1]", "shape [-1] must hold integers from 0"),
                                         ("[9223372036854775808]", "to 2**63 - 1"),
                                         ('["2"]', "must hold integers")])
def test_metadata_shapes_must_be_non_negative_int64(shape, words):
    meta = '{"relay.Constant": [{"dtype": "float32", "shape": ' + shape + ', "data": ""}]}'
    err = _error("def @main() {\n  meta[relay.Constant][0]\n}\n\n#[metadata]\n" + meta + "\n")
    assert words in err.message and err.line == 6


def test_metadata_json_nested_100k_deep_is_a_parse_error():
    err = _error("def @main() {\n  meta[relay.Constant][0]\n}\n\n#[metadata]\n" + "[" * 100_000 + "]" * 100_000)
    assert "nests JSON too deeply" in err.message and err.line


@pytest.mark.parametrize("text,line,col,words", [
    ("def @(%x: float32) { %x }", 2, 5, "expected a global name like @main"),
    ("def @main(%x: float32) { @(%x) }", 2, 26, "expected a global function name after `@`"),
    ("def @main(%x: float32) { sum(%x, axis=" + "[" * 1000 + "]" * 1000 + ") }", 2, 71, "nested deeper than 32"),
    ("def @main(%x: float32) { %x." + "9" * 5000 + " }", 2, 29, "(5000 digits) is too large"),
    ("def @main(%x: (float32,)) { %x.0." + "9" * 5000 + " }", 2, 32, "(5000 digits) is too large"),
])
def test_malformed_input_is_one_located_parse_error(text, line, col, words):
    err = _error(text)
    assert (err.line, err.column) == (line, col) and words in err.message


@pytest.mark.parametrize("body,line,col,words", [
    ("  %0 = add(%x, %x);\n  maximum(%0, ones(shape=[5], dtype=\"float32\"))", 4, 3, "in call to maximum"),
    ("  if (%c) { %x } else { %i }", 3, 3, "the branches of an if have different types"),
    ("  let %y: int32 = %x;\n  %y", 3, 3, "let %y is annotated int32"),
    ("  %x + %x * (%x - ones(shape=[4], dtype=\"int32\"))", 3, 17, "in call to subtract"),
    ("  %0 = (%x, %x);\n  %0.5", 4, 3, "tuple index 5 is out of range"),
])
def test_type_errors_in_parsed_text_name_file_line_and_column(body, line, col, words):
    text = "def @main(%x: Tensor[(4,), float32], %c: bool, %i: int32) {\n" + body + "\n}\n"
    err = _error(text)
    assert isinstance(err, SourceTypeError) and isinstance(err, TypeInferenceError)
    assert (err.source_name, err.line, err.column) == ("m.txt", line, col), str(err)
    assert words in err.message


def test_a_recursive_global_without_annotations_is_located_at_its_call():
    err = _error("def @main(%x: float32) {\n  @f(%x)\n}\ndef @f(%y) {\n  @main(%y)\n}\n")
    assert "calls itself" in err.message and err.line in (3, 6)


def test_undecodable_bytes_are_a_located_parse_error(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes((HEAD + "def @main(%x: float32) {\n  %x\n}\n").encode() + b"ab\xff\xfe\n")
    with pytest.raises(ParseError) as info:
        ir.load(str(path))
    err = info.value
    assert (err.line, err.column) == (5, 3) and "byte 0xff is not UTF-8" in err.message
    assert str(path) in str(err)


def test_only_passhost_errors_escape_parse_on_odd_inputs():
    odd = ["def @main() { meta[relay.Constant][" + "9" * 5000 + "] }\n#[metadata]\n{\"relay.Constant\": []}",
           "def @main(%x: Tensor[(" + "9" * 4400 + ",), float32]) { %x }",
           "def @main(%x: float32) { %x." + "1" * 30 + " }"]
    for text in odd:
        with pytest.raises(PasshostError):
            ir.parse(HEAD + text)


# -- the command line ------------------------------------------------------------------


class _FullDevice(io.StringIO):
    """A standard output on a full disk, as ``> /dev/full`` gives."""

    def write(self, s):
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self):
        raise OSError(errno.ENOSPC, "No space left on device")


def test_stdout_on_a_full_device_is_a_clean_write_error(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _FullDevice())
    code = main(["run", "--example", "tutorial", "-p", "InferType"])
    err = capsys.readouterr().err
    assert code == 1
    assert err == "passhost: error: cannot write output: No space left on device\n"


def test_a_huge_pipeline_text_is_cut_in_the_error(capsys):
    text = "FoldConstant(" + "x=1," * 30_000 + ")"
    code = main(["run", "--example", "tutorial", "-p", text])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert len(err) < 1000 and "characters cut]" in err


def test_control_characters_in_messages_are_escaped(capsys):
    code = main(["run", "--example", "tutorial", "-p", "Fold\x1b[31mConstant"])
    err = capsys.readouterr().err
    assert code == 2 and "\x1b" not in err and "\\x1b" in err


def test_a_bad_config_value_is_a_usage_error_before_anything_runs(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a crash reproducer would land here
    code = main(["run", "--example", "tutorial", "--config", "relay.FuseOps.max_depth=-5"])
    err = capsys.readouterr().err
    assert code == 2 and err == ("passhost: error: PassContext config relay.FuseOps.max_depth must be a "
                                 "non-negative int, got -5\n")
    assert list(tmp_path.iterdir()) == []


def test_config_entries_can_declare_a_check():
    from passhost import transform
    from passhost.errors import ConfigError

    transform.register_config("testing.even", int, 2, "an even number",
                              check=lambda v: None if v % 2 == 0 else "must be even")
    try:
        assert transform.PassContext(config={"testing.even": 4}).config["testing.even"] == 4
        with pytest.raises(ConfigError, match="testing.even must be even, got 3"):
            transform.PassContext(config={"testing.even": 3})
    finally:
        transform.unregister_config("testing.even")


# -- contract details (issue 16) -----------------------------------------------------------

def test_testing_is_reachable_after_a_bare_import():
    import subprocess

    code = "import passhost; print(type(passhost.testing.example()).__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "Function"


def test_a_missing_pass_attribute_is_an_attribute_error_and_a_pass_not_found():
    import passhost
    from passhost.errors import PassNotFound

    assert not hasattr(passhost.passes, "NoSuchPass")
    assert getattr(passhost.passes, "NoSuchPass", 7) == 7
    with pytest.raises(PassNotFound, match="unknown pass 'NoSuchPass'"):
        _ = passhost.passes.NoSuchPass
    with pytest.raises(AttributeError):
        _ = passhost.passes.NoSuchPass


def test_text_written_without_metadata_says_why_it_cannot_be_read_back(tmp_path, capsys):
    out = tmp_path / "nometa.txt"
    assert main(["run", "--example", "tutorial", "--no-meta-data", "-o", str(out), "--no-crash-dir"]) == 0
    capsys.readouterr()
    assert main(["run", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out}:" in err and "left out when this text was written (passhost run --no-meta-data" in err
