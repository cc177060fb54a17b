"""The print-ir instrument: before/after dumps, pass filter, change detection, diffs, dump files."""
from __future__ import annotations

import io
import os
import threading

import pytest

import passhost
from passhost import ir
from passhost.cli import main
from passhost.errors import PipelineError
from passhost.testing import chain
from passhost.transform import PassContext, Sequential, module_pass
from passhost_print_ir import PrintIRError, PrintIRInstrument
from passhost_print_ir import print_ir as print_ir_mod
from passhost_print_ir.print_ir import ir_text, module_changed, unified_diff


def _mod():
    x = ir.var("x", shape=(2,))
    return ir.IRModule.from_expr(ir.Function([x], ir.multiply(x, ir.add(ir.const(2.0), ir.const(3.0)))))


def _identity(name):
    return module_pass(lambda mod, ctx: mod, opt_level=0, name=name)


def _headers(text):
    return [line for line in text.splitlines() if line.startswith("Print IR")]


def _run(inst, passes, mod=None, opt_level=2):
    with PassContext(opt_level=opt_level, instruments=[inst]):
        return Sequential(passes)(mod or _mod())


def test_default_prints_start_and_each_change():
    out = io.StringIO()
    mod = _mod()
    start = ir_text(mod)
    res = _run(PrintIRInstrument(file=out), [_identity("Nothing"), passhost.passes.FoldConstant()], mod)
    text = out.getvalue()
    # the nested InferType only adds types: unchanged; "Nothing" returns its input
    assert _headers(text) == ["Print IR at start:", "Print IR after: FoldConstant", "Print IR after: sequential"]
    assert text.startswith("Print IR at start:\n" + start + "\n")
    assert "Print IR after: FoldConstant\n" + ir_text(res) + "\n" in text
    assert "multiply(%x, 5f" in text


def test_stderr_is_the_default_stream(capsys):
    _run(PrintIRInstrument(), [passhost.passes.FoldConstant()])
    err = capsys.readouterr().err
    assert err.startswith("Print IR at start:\n#[version = \"0.0.5\"]\n")


def test_before_and_after_of_every_pass_when_not_only_changed():
    out = io.StringIO()
    _run(PrintIRInstrument(before=True, only_changed=False, file=out),
         [_identity("A"), passhost.passes.FoldConstant()])
    assert _headers(out.getvalue()) == [
        "Print IR before: sequential", "Print IR before: A", "Print IR after: A",
        "Print IR before: FoldConstant", "Print IR before: InferType", "Print IR after: InferType",
        "Print IR after: FoldConstant", "Print IR after: sequential"]


def test_before_only():
    out = io.StringIO()
    _run(PrintIRInstrument(before=True, after=False, file=out), [_identity("A")])
    assert _headers(out.getvalue()) == ["Print IR before: sequential", "Print IR before: A"]


def test_pass_filter():
    out = io.StringIO()
    _run(PrintIRInstrument(before=True, only_changed=False, passes=["InferType"], file=out),
         [_identity("A"), passhost.passes.FoldConstant()])
    assert _headers(out.getvalue()) == ["Print IR before: InferType", "Print IR after: InferType"]


def test_diff_is_a_unified_diff_of_the_pass_input_and_output():
    out = io.StringIO()
    mod = _mod()
    before = ir_text(mod)
    res = _run(PrintIRInstrument(diff=True, passes=["FoldConstant"], file=out), [passhost.passes.FoldConstant()], mod)
    text = out.getvalue()
    head, _, body = text.partition("Print IR after: FoldConstant (diff)\n")
    assert head.startswith("Print IR at start:")
    lines = body.rstrip("\n").splitlines()
    assert lines[0] == "--- before FoldConstant" and lines[1] == "+++ after FoldConstant"
    assert lines[2].startswith("@@ ")
    after = ir_text(res).splitlines()
    for line in lines[3:]:
        if line.startswith("-"):
            assert line[1:] in before.splitlines()
        elif line.startswith("+"):
            assert line[1:] in after
    assert "-  %0 = add(2f, 3f);" in lines
    assert body == unified_diff(before, ir_text(res), "FoldConstant") + "\n"


def test_diff_shows_the_input_as_it_was_before_the_pass():
    # FoldConstant's InferType types the shared parameter %x in place; the diff of the
    # enclosing Sequential must still show the untyped input it started from
    out = io.StringIO()
    _run(PrintIRInstrument(diff=True, passes=["sequential"], file=out), [passhost.passes.FoldConstant()])
    lines = out.getvalue().splitlines()
    assert "-def @main(%x: Tensor[(2), float32]) {" in lines
    assert "-  %0 = add(2f, 3f);" in lines
    assert any(line.startswith("+def @main(%x: Tensor[(2), float32] /* ty=") for line in lines)


def test_change_detection_uses_identity_before_hashing(monkeypatch):
    mod = _mod()
    snap = tuple(mod.items())

    def no_hash(_):
        raise AssertionError("structural_hash called for identical functions")

    monkeypatch.setattr(print_ir_mod, "structural_hash", no_hash)
    assert not module_changed(snap, tuple(mod.copy().items()))


def test_change_detection_by_structure():
    mod = _mod()
    rebuilt = _mod()  # new objects, same program
    assert not module_changed(tuple(mod.items()), tuple(rebuilt.items()))
    other = _mod()
    other["helper"] = other["main"]
    assert module_changed(tuple(mod.items()), tuple(other.items()))
    x = ir.var("x", shape=(2,))
    changed = ir.IRModule.from_expr(ir.Function([x], ir.multiply(x, ir.const(5.0))))
    assert module_changed(tuple(mod.items()), tuple(changed.items()))


def test_merging_equal_subexpressions_is_a_change():
    x = ir.var("x", shape=(2,))
    twice = ir.IRModule.from_expr(ir.Function([x], ir.add(ir.exp(x), ir.exp(x))))
    shared_exp = ir.exp(x)
    shared = ir.IRModule.from_expr(ir.Function([x], ir.add(shared_exp, shared_exp)))
    assert ir.structural_hash(twice) == ir.structural_hash(shared)
    assert module_changed(tuple(twice.items()), tuple(shared.items()))
    out = io.StringIO()
    _run(PrintIRInstrument(file=out), [passhost.passes.EliminateCommonSubexpr()], twice, opt_level=3)
    assert "Print IR after: EliminateCommonSubexpr" in _headers(out.getvalue())


def test_dump_dir_writes_numbered_files_atomically(tmp_path):
    target = tmp_path / "dumps" / "run1"
    inst = PrintIRInstrument(before=True, passes=["FoldConstant"], dump_dir=str(target))
    res = _run(inst, [passhost.passes.FoldConstant()])
    names = sorted(os.listdir(target))
    assert names == ["000-start.txt", "001-FoldConstant-before.txt", "002-FoldConstant-after.txt"]
    assert [os.path.basename(p) for p in inst.files] == names
    assert (target / "002-FoldConstant-after.txt").read_text() == "Print IR after: FoldConstant\n" + ir_text(res)
    assert (target / "000-start.txt").read_text().startswith("Print IR at start:\n#[version")


def test_dump_dir_numbering_restarts_per_context(tmp_path):
    inst = PrintIRInstrument(dump_dir=tmp_path)
    _run(inst, [passhost.passes.FoldConstant()])
    first = sorted(os.listdir(tmp_path))
    _run(inst, [passhost.passes.FoldConstant()])
    assert sorted(os.listdir(tmp_path)) == first == ["000-start.txt", "001-FoldConstant-after.txt",
                                                     "002-sequential-after.txt"]


def test_unwritable_dump_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    inst = PrintIRInstrument(dump_dir=str(blocker / "sub"))
    with pytest.raises(PrintIRError, match="cannot create dump_dir"):  # when the context is entered
        _run(inst, [passhost.passes.FoldConstant()])
    target = tmp_path / "gone"
    inst = PrintIRInstrument(dump_dir=str(target))
    with pytest.raises(PrintIRError, match="cannot write .*dump_dir"):
        with PassContext(instruments=[inst]):
            target.rmdir()  # replaced by a file while the passes ran
            target.write_text("x")
            passhost.passes.FoldConstant()(_mod())


def test_pass_names_become_safe_file_names(tmp_path):
    inst = PrintIRInstrument(only_changed=False, dump_dir=tmp_path)
    with PassContext(instruments=[inst]):
        _identity("a/b c")(_mod())
    assert sorted(os.listdir(tmp_path)) == ["000-a_b_c-after.txt"]


def test_options_are_validated():
    with pytest.raises(PrintIRError, match="before must be True or False"):
        PrintIRInstrument(before="yes")
    with pytest.raises(PrintIRError, match="passes must be a list"):
        PrintIRInstrument(passes="FoldConstant")
    with pytest.raises(PrintIRError, match="pass names"):
        PrintIRInstrument(passes=[1])
    with pytest.raises(PrintIRError, match="dump_dir"):
        PrintIRInstrument(dump_dir=3)
    with pytest.raises(PipelineError, match="print-ir"):
        passhost.instruments.get("print-ir", colour=True)


def test_failed_pass_does_not_confuse_later_dumps():
    out = io.StringIO()
    inst = PrintIRInstrument(only_changed=False, file=out)

    def boom(mod, ctx):
        raise ValueError("boom")

    def outer(mod, ctx):
        with pytest.raises(ValueError):
            module_pass(boom, opt_level=0, name="Boom")(mod)
        return mod

    with PassContext(instruments=[inst]):
        module_pass(outer, opt_level=0, name="Outer")(_mod())
    assert _headers(out.getvalue()) == ["Print IR after: Outer"]


def test_deep_chain_at_default_recursion_limit():
    out = io.StringIO()
    mod = chain(20_000)
    _run(PrintIRInstrument(diff=True, file=out), [passhost.passes.FoldConstant()], mod)
    assert "Print IR at start:" in out.getvalue()


def test_cli(capsys, tmp_path):
    code = main(["run", "--example", "tutorial", "-p", "FoldConstant", "--instrument",
                 'print-ir(diff=True, passes=["FoldConstant"])', "-o", str(tmp_path / "out.txt")])
    out, err = capsys.readouterr()
    assert code == 0 and out == ""
    assert _headers(err) == ["Print IR at start:", "Print IR after: FoldConstant (diff)"]
    assert "--- before FoldConstant\n+++ after FoldConstant\n@@ " in err


def test_registered():
    assert isinstance(passhost.instruments.get("print-ir"), PrintIRInstrument)
    assert passhost.instruments.info("print-ir").distribution == "passhost-print-ir"


def test_threads_keep_separate_stacks_and_unique_dump_numbers(tmp_path):
    inst = PrintIRInstrument(only_changed=False, dump_dir=tmp_path)
    barrier = threading.Barrier(2)

    def worker(name):
        def body(mod, ctx):
            barrier.wait(timeout=30)  # both threads are inside their pass at once
            return mod

        with PassContext(instruments=[inst]):
            Sequential([module_pass(body, opt_level=0, name=name)])(_mod())

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("Left", "Right")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    names = sorted(os.listdir(tmp_path))
    assert len({n[:3] for n in names}) == len(names)
    assert sorted(n[4:] for n in names) == sorted(["Left-after.txt", "Right-after.txt",
                                                   "sequential-after.txt", "sequential-after.txt"])
