"""No function of the host or of a first-party plugin is longer than 80 lines (its
docstring not counted), except the hot loops named below (issue 33).

A hot loop runs once per node of every graph a pass or the printer sees; there a helper
call per node costs as much as the work (docs/performance.md measures it), so the cases
are handled in line. Each is named here with the reason, and carries a ``# hot loop:``
comment at its ``def`` saying what it does per node. Anything else that grows past 80
lines is split into functions named for their steps.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 80

#: "path::function" -> why it stays one function
HOT_LOOPS = {
    "passhost/ir/type_infer.py::_infer_expr": "type inference: one step per node of every typed graph",
    "passhost/ir/structural.py::exprs": "structural equality: one step per pair of nodes compared",
    "passhost/ir/interpreter.py::run": "the interpreter: one step per node evaluated",
    "passhost/ir/pattern/match.py::_visit": "the pattern matcher: one dispatch per pattern node tried",
    "passhost/ir/parser.py::fast_expr": "the parser's fast path: one step per token of the common forms",
    "passhost/ir/printer.py::scope": "the printer: one step per node printed",
    "passhost/ir/rewrite/walk.py::_rebuild": "the rewrite engine's walk: one step per node of every rewrite",
    "passhost/ir/rewrite/binding_uses.py::binding_uses": "the use analysis of lets: one step per node and use",
    "plugins/passhost-eliminate-common-subexpr/passhost_eliminate_common_subexpr/eliminate_common_subexpr.py::_cse":
        "CSE's fast loop: one step per node (rules.py is its reference semantics)",
    "plugins/passhost-fold-constant/passhost_fold_constant/_walk.py::_fold":
        "FoldConstant's fast loop: one step per node (rules.py is its reference semantics)",
    "plugins/passhost-fuse-ops/passhost_fuse_ops/fuse_ops.py::_rewrite":
        "FuseOps' rebuild: one step per node of the fused function",
    "plugins/passhost-fuse-ops/passhost_fuse_ops/graph.py::_label":
        "FuseOps' dataflow labels: one step per node and use",
}


def _sources():
    yield from (ROOT / "passhost").rglob("*.py")
    for path in (ROOT / "plugins").glob("*/passhost_*/**/*.py"):
        if "build" not in path.relative_to(ROOT).parts:
            yield path


def _lengths(path: Path):
    """``(name, lines without the docstring, line of the def)`` of each function in ``path``."""
    text = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = node.lineno
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                start = first.end_lineno
            yield node.name, node.end_lineno - start, node.lineno


def test_no_function_is_longer_than_the_limit_outside_the_named_hot_loops():
    long = {}
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for name, lines, _ in _lengths(path):
            if lines > LIMIT:
                long[f"{rel}::{name}"] = lines
    unnamed = {k: v for k, v in long.items() if k not in HOT_LOOPS}
    assert unnamed == {}, f"functions over {LIMIT} lines: split them into named steps ({unnamed})"
    gone = set(HOT_LOOPS) - set(long)
    assert not gone, f"no longer over {LIMIT} lines (or renamed): remove from HOT_LOOPS: {sorted(gone)}"


def test_each_hot_loop_says_why_at_its_def():
    missing = []
    for key in HOT_LOOPS:
        rel, name = key.split("::")
        path = ROOT / rel
        lines = path.read_text(encoding="utf-8").splitlines()
        for fn, _, lineno in _lengths(path):
            if fn == name:
                above = lines[max(0, lineno - 5):lineno]
                if not any("# hot loop:" in line for line in above):
                    missing.append(key)
    assert missing == [], f"add a '# hot loop: ...' comment above the def of {missing}"


def test_the_measure_counts_a_function_without_its_docstring(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT + 1))
    path = tmp_path / "m.py"
    path.write_text(f'def long():\n    """doc\n\n    more"""\n{body}\n\n\ndef short():\n    return 1\n')
    assert [(n, k) for n, k, _ in _lengths(path)] == [("long", LIMIT + 1), ("short", 1)]
