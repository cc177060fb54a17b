"""The plugin boundary (issue 13 §5): first-party plugins are written the way a third party
can write them -- the host's public API only. No private host module is imported, no
private node state is read or written, nothing goes through ``__dict__[...]``. ruff's
banned-api (pyproject.toml) catches the imports as they are typed; this test checks all
three on the source and keeps ruff's list equal to the private modules that exist."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import passhost
from passhost import instrument, ir, transform

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for pattern in ("plugins/*/passhost_*/**/*.py", "examples/*/passhost_*/**/*.py")
                 for p in ROOT.glob(pattern) if "build" not in p.parts)


def _private_modules() -> set:
    out = set()
    for path in (ROOT / "passhost").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] in ("__init__", "__main__"):
            parts = parts[:-1]
        if any(p.startswith("_") and not p.startswith("__") for p in parts):
            out.add(".".join(parts))
    return out


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


@pytest.mark.skipif(tomllib is None, reason="tomllib needs Python >= 3.11")
def test_rufs_banned_list_is_every_private_host_module():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    banned = set(config["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"])
    assert banned == _private_modules()


def test_no_plugin_imports_a_private_host_module_or_touches_private_state():
    private_attrs = _private_attributes()
    assert {"_checked_type", "_set_checked_type", "_def", "_funcs"} <= private_attrs
    found = []
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                names = []
            for name in names:
                parts = name.split(".")
                if parts[0] == "passhost" and any(p.startswith("_") and not p.startswith("__") for p in parts):
                    found.append(f"{where}:{node.lineno}: imports {name}")
            if isinstance(node, ast.Attribute) and node.attr in private_attrs:
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    found.append(f"{where}:{node.lineno}: touches .{node.attr}")
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "__dict__":
                found.append(f"{where}:{node.lineno}: reaches into __dict__[...]")
    assert found == []


def test_the_public_replacements_exist():
    """What the plugins used private state for, the host offers publicly."""
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
