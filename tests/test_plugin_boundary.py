"""The plugin boundary (issue 13 §5, issue 33 item 4): first-party plugins are written the
way a third party can write them -- with the names the host lists as public and nothing
else. ``passhost.plugin_api.PUBLIC_MODULES`` lists the public modules; a public module
offers the names its ``__all__`` lists. No other host module is imported, no name outside
an ``__all__`` is taken (``from M import x``, ``M.x``), no private node state is read or
written, nothing goes through ``__dict__[...]``. ruff's banned-api (pyproject.toml) bans
every other host module as you type; this test keeps that list equal to them."""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import passhost
from passhost import instrument, ir, transform
from passhost.plugin_api import PUBLIC_MODULES

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for pattern in ("plugins/*/passhost_*/**/*.py", "examples/*/passhost_*/**/*.py")
                 for p in ROOT.glob(pattern) if "build" not in p.parts)
#: modules whose attributes are what plugins registered (``passhost.passes.FoldConstant``)
DYNAMIC = {"passhost.passes", "passhost.instruments"}
#: what a plugin still takes from outside the list, until the host has a public form for it:
#: (file, what it takes) -> why. Only shrinks: an entry nothing matches fails the test.
PENDING: dict = {}


def _public_names(module: str) -> set:
    return set(importlib.import_module(module).__all__)


def _host_modules() -> set:
    out = set()
    for path in (ROOT / "passhost").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__main__":
            continue
        out.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


def _parent(module: str) -> str:
    return module.rpartition(".")[0]


def _bannable() -> set:
    """The host modules ruff must ban: every module that is not public and whose parent is,
    except one its parent's ``__all__`` shadows with a public name (``passhost.pipeline``
    is also the function ``passhost.pipeline``), which this test alone checks."""
    return {m for m in _host_modules() - set(PUBLIC_MODULES)
            if _parent(m) in PUBLIC_MODULES and m.rpartition(".")[2] not in _public_names(_parent(m))}


class _Checker(ast.NodeVisitor):
    """Where a plugin's source takes a host name that is not public."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.modules: dict = {}  # local name -> the public host module it is bound to
        self.found: dict = {}

    def _bad(self, node: ast.AST, what: str) -> None:
        self.found.setdefault(f"{self.where}:{node.lineno}: {what}", (node.lineno, node.col_offset))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] != "passhost":
                continue
            if alias.name not in PUBLIC_MODULES:
                self._bad(node, f"imports {alias.name}, which is not a public module")
            elif alias.asname:
                self.modules[alias.asname] = alias.name
            else:
                self.modules["passhost"] = "passhost"

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module or node.module.split(".")[0] != "passhost":
            return
        if node.module not in PUBLIC_MODULES:
            self._bad(node, f"imports from {node.module}, which is not a public module")
            return
        for alias in node.names:
            full = f"{node.module}.{alias.name}"
            if full in PUBLIC_MODULES:
                self.modules[alias.asname or alias.name] = full
            elif alias.name not in _public_names(node.module):
                self._bad(node, f"imports {full}, which {node.module}.__all__ does not list")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain, value = [], node
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in self.modules:
            module = self.modules[value.id]
            for attr in reversed(chain):
                if module in DYNAMIC or attr.startswith("__") or attr in _public_names(module):
                    break
                if f"{module}.{attr}" not in PUBLIC_MODULES:
                    self._bad(node, f"uses {module}.{attr}, which {module}.__all__ does not list")
                    break
                module = f"{module}.{attr}"
        self.generic_visit(node)


def _check_source(text: str, where: str = "<source>") -> list:
    checker = _Checker(where)
    checker.visit(ast.parse(text))
    return sorted(checker.found, key=checker.found.get)


def _private_attributes() -> set:
    """Underscore names the host's public classes define: the private state of nodes,
    types, operators, modules, passes and contexts."""
    classes = [c for m in (ir, transform, instrument) for c in vars(m).values()
               if inspect.isclass(c) and c.__module__.startswith("passhost")]
    names = set()
    for cls in classes:
        for klass in cls.__mro__:
            if klass.__module__.startswith("passhost"):
                for name in list(vars(klass)) + list(getattr(klass, "__slots__", ())):
                    if name.startswith("_") and not name.startswith("__"):
                        names.add(name)
    return names


def test_the_sources_are_found():
    assert len(SOURCES) > 40
    assert any("passhost_fold_constant" in str(p) for p in SOURCES)


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_module_lists_names_that_exist(module):
    loaded = importlib.import_module(module)
    assert isinstance(loaded.__all__, (list, tuple)) and loaded.__all__, f"{module} has no __all__"
    missing = [name for name in loaded.__all__ if not hasattr(loaded, name)]
    assert missing == [], f"{module}.__all__ lists names it does not define: {missing}"
    assert not any(part.startswith("_") for part in module.split(".")), "a private module cannot be public"


def test_the_checker_refuses_what_slipped_through_the_underscore_rule():
    """The four imports issue 33 names, and the same taken through attributes."""
    source = ("import passhost.registry\n"
              "from passhost.ir.ops.volume import pad6\n"
              "from passhost.ir.ops.layout import parse_layout\n"
              "from passhost.ir.types import DTYPES\n"
              "from passhost.ir import printer\n"
              "from passhost import ir\n"
              "ir.ops.layout.parse_layout('NCHW')\n"
              "ir.types.DTYPES\n"
              "import passhost as p\n"
              "p.registry.get_registry()\n"
              "from passhost._context import PassContext\n")
    assert [line.split(": ", 1)[1] for line in _check_source(source)] == [
        "imports passhost.registry, which is not a public module",
        "imports from passhost.ir.ops.volume, which is not a public module",
        "imports from passhost.ir.ops.layout, which is not a public module",
        "imports from passhost.ir.types, which is not a public module",
        "imports passhost.ir.printer, which passhost.ir.__all__ does not list",
        "uses passhost.ir.ops, which passhost.ir.__all__ does not list",
        "uses passhost.ir.types, which passhost.ir.__all__ does not list",
        "uses passhost.registry, which passhost.__all__ does not list",
        "imports from passhost._context, which is not a public module",
    ]
    fine = ("import passhost\nfrom passhost import ir, plugin\nfrom passhost.ir import parse_layout, pad6, DTYPES\n"
            "from passhost.ir.pattern import rule\nfrom passhost.formats import converters\n"
            "ir.dims.dmax(1, 2)\nir.pattern.is_op('add')\npasshost.passes.FoldConstant()\n"
            "passhost.testing.example()\npasshost.errors.PasshostError\nir.nn.conv2d.__name__\n")
    assert _check_source(fine) == []


def test_plugins_use_only_the_public_modules_and_names():
    found, used = [], set()
    for path in SOURCES:
        where = str(path.relative_to(ROOT))
        for problem in _check_source(path.read_text(encoding="utf-8"), where):
            pending = [key for key in PENDING if key[0] == where and f" {key[1]}," in problem]
            used.update(pending)
            if not pending:
                found.append(problem)
    assert found == []
    assert set(PENDING) <= used, f"remove from PENDING what no plugin takes any more: {set(PENDING) - used}"


def test_no_plugin_touches_private_state():
    private_attrs = _private_attributes()
    assert {"_checked_type", "_set_checked_type", "_def", "_funcs"} <= private_attrs
    found = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in private_attrs:
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    found.append(f"{where}:{node.lineno}: touches .{node.attr}")
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "__dict__":
                found.append(f"{where}:{node.lineno}: reaches into __dict__[...]")
    assert found == []


@pytest.mark.skipif(tomllib is None, reason="tomllib needs Python >= 3.11")
def test_rufs_banned_list_is_every_host_module_that_is_not_public():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    banned = set(config["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"])
    assert banned == _bannable()
    # ruff bans a module's submodules with it: together with the shadowed ones this test
    # checks itself, that is every host module outside PUBLIC_MODULES
    for module in _host_modules() - set(PUBLIC_MODULES):
        covered = {module, *(module.rsplit(".", n)[0] for n in range(1, module.count(".") + 1))}
        assert covered & banned or module.rpartition(".")[2] in _public_names(_parent(module)), module


def test_the_public_replacements_exist():
    """What the plugins used private state or private modules for, the host offers publicly."""
    x = ir.var("x", shape=(2,))
    call = ir.negative(x)
    assert ir.type_of(call) is None
    ir.set_checked_type(call, ir.TensorType((2,)))
    assert ir.type_of(call) == ir.TensorType((2,)) and call.checked_type == ir.TensorType((2,))
    with pytest.raises(passhost.errors.IRError, match="already typed"):
        ir.set_checked_type(call, ir.TensorType((3,)))
    with ir.paused_gc():
        pass
    rebuilt = ir.keep_checked_type(call, call.with_args((ir.var("y", shape=(2,)),), keep_type=False))
    assert not rebuilt.has_type  # its argument is untyped
    assert ir.parse_layout("NCHW") == ("N", "C", "H", "W") and ir.layout_axes("NCHW", "NHWC") == (0, 2, 3, 1)
    assert ir.pad6((1, 2, 3)) == (1, 2, 3, 1, 2, 3) and "float32" in ir.DTYPES
    assert passhost.formats.converters("no-such-format") == []
