"""docs/architecture.md stays true (issue 33 item 5): every module, file and name it cites
exists where it says, and every signature it writes out has those parameters.

What counts as a citation, inside backticks:

* a path (``passhost/ir/driver.py``, ``plugins/``): it exists; a bare ``driver.py`` exists
  in the directory of the section it is in (``## The IR (`passhost/ir/`)``) or in the host;
* a dotted name rooted at the host (``passhost.ir.paused_gc``), a plugin package
  (``passhost_onnx.reader``) or a host module as the docs abbreviate it (``ir.type_of``,
  ``transform.module_pass``): it imports and resolves attribute by attribute;
* ``Class.attr`` for a public class of ``passhost.ir``/``transform``/``instrument``
  (``Call.with_args``), and ``node.x``/``call.x``/``var.x``/``op.x``/``mod.x`` for the
  instances the text speaks of: the class has the attribute;
* in a table whose first column is a module file, each name of the second column that
  starts a backticked span: the module defines it (or a class in it does);
* a call written out, ``name(a, b=None, ...)``, of a callable resolved above: each
  parameter it shows is a parameter of the callable.
"""
from __future__ import annotations

import builtins
import importlib
import inspect
import re
from pathlib import Path

import passhost
from passhost import instrument, ir, transform

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
SPAN = re.compile(r"`([^`\n]+)`")
ABBREVIATIONS = {name: f"passhost.{name}" for name in (
    "ir", "transform", "instrument", "hookspecs", "errors", "registry", "formats", "compat", "options", "io",
    "numerics", "passes", "instruments", "pipeline", "testing", "plugin_api")}
INSTANCES = {"node": ir.Expr, "expr": ir.Expr, "call": ir.Call, "var": ir.Var, "op": ir.Op, "mod": ir.IRModule,
             "func": ir.Function, "attrs": ir.Attrs, "ctx": transform.PassContext, "info": transform.PassInfo}
NAME = r"[A-Za-z_][A-Za-z0-9_]*"
DOTTED = re.compile(rf"({NAME}(?:\.{NAME})+)(\(.*\))?$")
CALL = re.compile(rf"({NAME})(\(.*\))$")


def _public_classes() -> dict:
    return {name: obj for module in (ir, transform, instrument) for name, obj in vars(module).items()
            if inspect.isclass(obj) and not name.startswith("_")}


def _resolve(dotted: str):
    """The object ``dotted`` names, or raise ``LookupError`` saying which part is missing."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for i, attr in enumerate(parts[cut:], start=cut):
            if not hasattr(obj, attr):
                raise LookupError(f"{'.'.join(parts[:i])} has no attribute {attr!r}")
            obj = getattr(obj, attr)
        return obj
    raise LookupError(f"no module {parts[0]!r}")


def _has(cls: type, attr: str) -> bool:
    return hasattr(cls, attr) or any(attr in getattr(k, "__slots__", ()) for k in cls.__mro__)


def _parameters(text: str) -> list:
    inside = text[1:-1]
    names = []
    for part in re.split(r",\s*", inside):
        m = re.match(rf"\*{{0,2}}({NAME})\s*(=|$)", part.strip())
        if m:
            names.append(m.group(1))
    return names


def _check_signature(obj, shown: str, where: str) -> list:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    params = sig.parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return []
    return [f"{where}: {shown} -- {name!r} is not a parameter (it takes {', '.join(params)})"
            for name in _parameters(shown[shown.index("("):]) if name not in params and name != "self"]


def _sections(text: str):
    """``(line number, the directory the current section is about, line)``; a sub-section
    without a directory of its own is about its parent's."""
    directories: dict = {}
    directory = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            m = re.search(r"`((?:passhost|plugins)/[\w/]*)`", line)
            directories = {k: v for k, v in directories.items() if k < level}
            directories[level] = m.group(1) if m else directories.get(level - 1)
            directory = directories[level]
        yield number, directory, line


def _path_exists(path: str, directory) -> bool:
    bases = ([ROOT / directory] if directory else []) + [ROOT]
    if "/" not in path.rstrip("/"):
        bases.append(ROOT / "passhost")
    return any((base / path).exists() or any(base.glob(path.rstrip("/"))) for base in bases)


def _diagram_paths(text: str) -> list:
    """Problems with the paths of the page's code blocks (the layer diagram): a line that
    starts with a path names a file or directory, and a bare ``x.py`` after it (on its line
    or the lines continuing it) is in that path's directory."""
    problems, inside, base = [], False, None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        first = re.match(r"((?:passhost|plugins)/[\w/.*-]*)", line)
        if first:
            path = first.group(1)
            base = path if path.endswith("/") else path.rpartition("/")[0] + "/"
            if not _path_exists(path, None):
                problems.append(f"architecture.md:{number}: path {path} does not exist")
        for bare in re.findall(r"(?<![\w/])(\w+\.py)\b", line[first.end():] if first else line):
            if base and not _path_exists(bare, base):
                problems.append(f"architecture.md:{number}: path {base}{bare} does not exist")
    return problems


def _citations(text: str) -> list:
    """``(where, problem)`` for every citation of the page that does not hold."""
    problems = []
    classes = _public_classes()
    for number, directory, line in _sections(text):
        where = f"architecture.md:{number}"
        row_module = None
        cells = line.split("|")
        if line.startswith("|") and len(cells) > 3:
            m = re.fullmatch(r"\s*`([\w/]+)\.py`\s*", cells[1]) or re.fullmatch(r"\s*`([\w/]+)/`\s*", cells[1])
            if m and directory:
                row_module = (directory.rstrip("/") + "/" + m.group(1)).replace("/", ".")
        for span in SPAN.findall(line):
            span = span.strip()
            if re.fullmatch(r"[\w./-]+(\.py|\.md|\.toml|/)", span):
                if not _path_exists(span, directory):
                    problems.append(f"{where}: path {span} does not exist")
                continue
            m = DOTTED.match(span)
            if m:
                dotted, shown = m.group(1), m.group(2)
                root, _, rest = dotted.partition(".")
                obj = None
                try:
                    if root == "passhost" or root.startswith("passhost_"):
                        obj = _resolve(dotted)
                    elif root in ABBREVIATIONS:
                        obj = _resolve(f"{ABBREVIATIONS[root]}.{rest}")
                    elif root in classes or root in INSTANCES:
                        cls = classes.get(root) or INSTANCES[root]
                        first = rest.split(".")[0]
                        if not _has(cls, first):
                            problems.append(f"{where}: {root}.{first} -- {cls.__name__} has no {first!r}")
                        continue
                    else:
                        continue  # np.errstate, gc.freeze: not passhost's
                except LookupError as err:
                    problems.append(f"{where}: {span} -- {err}")
                    continue
                if shown and callable(obj):
                    problems += _check_signature(obj, span, where)
                continue
            if row_module and cells[2].find(f"`{span}`") >= 0:
                for name in re.findall(rf"(?:^|,\s*)({NAME})", span.split("(")[0]):
                    if hasattr(builtins, name):
                        continue  # `str()`: Python's
                    module = importlib.import_module(row_module)
                    found = name in vars(module) or any(
                        _has(c, name) for c in vars(module).values()
                        if inspect.isclass(c) and c.__module__ == module.__name__)
                    if not found:
                        problems.append(f"{where}: {name} is not in {row_module}")
                call = CALL.match(span)
                if call and hasattr(importlib.import_module(row_module), call.group(1)):
                    obj = getattr(importlib.import_module(row_module), call.group(1))
                    if callable(obj):
                        problems += _check_signature(obj, span, where)
    return problems


def test_every_citation_of_architecture_md_holds():
    text = PAGE.read_text(encoding="utf-8")
    assert _citations(text) + _diagram_paths(text) == []


def test_the_checker_finds_what_is_wrong():
    wrong = ("## The IR (`passhost/ir/`)\n\n"
             "| module | holds |\n|---|---|\n"
             "| `visitor.py` | `post_order`, `rewrite_post_order_twice` |\n"
             "| `rewrite/driver.py` | `rewrite_post_order(root, rewrite, memo=None, fast=True)` |\n\n"
             "`passhost/ir/nowhere.py`, `passhost.ir._gc.gc_paused`, `passhost.ir.no_such_name`, "
             "`ir.paused_gc`, `Call.with_args`, `Call.with_kids`, `node.has_type`, `nowhere.py`\n")
    assert [p.split(": ", 1)[1] for p in _citations(wrong)] == [
        "rewrite_post_order_twice is not in passhost.ir.visitor",
        "rewrite_post_order(root, rewrite, memo=None, fast=True) -- 'fast' is not a parameter (it takes root, "
        "rewrite, memo, skip, keep_types, with_original, type_like, order, only, bind, mod)",
        "path passhost/ir/nowhere.py does not exist",
        "passhost.ir.no_such_name -- passhost.ir has no attribute 'no_such_name'",
        "Call.with_kids -- Call has no 'with_kids'",
        "path nowhere.py does not exist",
    ]
    diagram = "```\npasshost/ir/             the IR\npasshost/nope.py, transform.py, nada.py\n```\n"
    assert [p.split(": ", 1)[1] for p in _diagram_paths(diagram)] == [
        "path passhost/nope.py does not exist", "path passhost/nada.py does not exist"]


def test_the_two_errors_the_issue_names_are_fixed():
    """``rewrite_post_order`` lives in the rewrite engine (``rewrite/driver.py``), and
    FoldScaleAxis is a rule over it."""
    text = PAGE.read_text(encoding="utf-8")
    assert passhost.ir.rewrite_post_order.__module__ == "passhost.ir.rewrite.driver"
    assert "`rewrite_post_order`" in text.split("| `rewrite/` |", 1)[1].split("\n", 1)[0]
    assert "`rewrite_post_order`" not in text.split("| `visitor.py` |", 1)[1].split("\n", 1)[0]
    rules = text.split("Passes written as rules over it", 1)[1].split("\n\n", 1)[0]
    assert "FoldScaleAxis" in rules.split("keep their own loops")[0]
