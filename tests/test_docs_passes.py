"""docs/passes.md stays true: every installed pass has a section, and the examples run.

Convention (described at the top of ``docs/passes.md``): an HTML comment
``<!-- check: SPEC -->`` (``SPEC`` is one pipeline element such as ``FoldConstant`` or
``FuseOps(fuse_opt_level=0)``) is followed by a fenced ``before`` block and a fenced
``after`` block, both in the text format with the ``#[version = "0.0.5"]`` header, and
optionally a fenced ``stderr`` block. The test parses ``before``, runs the pass built
from ``SPEC`` directly (no Sequential, so the pass's opt_level does not gate it), and
requires the result to be structurally equal to the parsed ``after`` block and to print
as exactly that text (``astext(show_meta_data=True)``); a ``stderr`` block must be
exactly what the pass wrote to stderr.

``<!-- check-pipeline: N -->`` before a fenced ``text`` block says that block is
``str(passhost.default_pipeline(N).spec)``.
"""
from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

import passhost
from passhost import ir
from passhost.pipeline import parse_element

DOC = Path(__file__).resolve().parent.parent / "docs" / "passes.md"

#: the passes whose sections carry at least one checked example (docs for the core passes)
CORE_PASSES = ("InferType", "FoldConstant", "EliminateCommonSubexpr", "DeadCodeElimination",
               "FuseOps", "PrintIR")

_FENCE = r"```{tag}\n(?P<{tag}>.*?)\n```"
_CHECK = re.compile(
    r"^<!-- check: (?P<spec>.+?) -->[ \t]*\n\s*"
    + _FENCE.format(tag="before") + r"[ \t]*\n\s*"
    + _FENCE.format(tag="after")
    + r"(?:[ \t]*\n\s*" + _FENCE.format(tag="stderr") + r")?",
    re.DOTALL | re.MULTILINE,
)
_CHECK_PIPELINE = re.compile(
    r"^<!-- check-pipeline: (?P<level>-?\d+) -->[ \t]*\n\s*```text\n(?P<text>.*?)\n```", re.DOTALL | re.MULTILINE)


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _examples() -> list:
    text = _doc()
    found = []
    for m in _CHECK.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        found.append(pytest.param(m.group("spec"), m.group("before"), m.group("after"), m.group("stderr"),
                                  id=f"line{line}-{m.group('spec')}"))
    return found


def _section_titles() -> set:
    return {m.group(1) for m in re.finditer(r"^## +(\S+?)[ \t]*(?:\(.*)?$", _doc(), re.MULTILINE)}


@pytest.mark.parametrize("name", passhost.passes.names())
def test_every_registered_pass_has_a_section(name):
    assert name in _section_titles(), f"docs/passes.md has no '## {name}' section"


def test_the_pass_table_lists_every_registered_pass():
    table = _doc().split("\n## ", 1)[0]
    rows = {m.group(1) for m in re.finditer(r"^\| *\[?`?(\w+)`?\]?", table, re.MULTILINE)}
    missing = sorted(set(passhost.passes.names()) - rows)
    assert not missing, f"the table at the top of docs/passes.md lacks rows for {missing}"


def test_every_check_marker_is_well_formed():
    # a marker (at the start of a line) the pattern does not match would silently check nothing
    text = _doc()
    assert len(re.findall(r"^<!-- check: ", text, re.MULTILINE)) == len(list(_CHECK.finditer(text)))
    assert len(re.findall(r"^<!-- check-pipeline: ", text, re.MULTILINE)) == len(list(_CHECK_PIPELINE.finditer(text)))


def test_each_core_pass_has_a_checked_example():
    checked = {parse_element(m.group("spec")).name for m in _CHECK.finditer(_doc())}
    missing = [name for name in CORE_PASSES if name not in checked]
    assert not missing, f"no <!-- check: ... --> example for {missing}"


@pytest.mark.parametrize(("spec", "before", "after", "stderr"), _examples())
def test_example_is_reproduced_by_running_the_pass(spec, before, after, stderr):
    element = parse_element(spec)
    the_pass = passhost.passes.get(element.name, **element.kwargs)
    mod = ir.parse(before, source_name=f"docs/passes.md before block of {spec}")
    expected = ir.parse(after, source_name=f"docs/passes.md after block of {spec}")
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        out = the_pass(mod)
    assert ir.structural_equal(out, expected), (
        f"{spec} gives\n{out.astext(show_meta_data=True)}\nnot the documented after block")
    assert out.astext(show_meta_data=True).rstrip("\n") == after.rstrip("\n")
    if stderr is not None:
        assert err.getvalue().rstrip("\n") == stderr.rstrip("\n")


@pytest.mark.parametrize("level,text", [
    pytest.param(m.group("level"), m.group("text"), id=f"O{m.group('level')}")
    for m in _CHECK_PIPELINE.finditer(_doc())
])
def test_documented_default_pipeline_order(level, text):
    assert str(passhost.default_pipeline(int(level)).spec) == text.strip()
