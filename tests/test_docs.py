"""The documentation says what the code does: hooks, CLI options, README commands, the
example plugin of docs/plugins.md (extracted from the page and run)."""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import inspect
import re
import shlex
from pathlib import Path

import pytest

import passhost
from passhost import hookspecs, ir
from passhost.cli import build_parser
from passhost.registry import Registry, use_registry

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FILE_BLOCK = re.compile(r"^```\w+ file=(\S+)\n(.*?)^```", re.S | re.M)


def _hookspec_names() -> list:
    return [name for name, fn in vars(hookspecs).items()
            if name.startswith("passhost_register_") and callable(fn)]


def test_there_are_seven_zero_argument_hookspecs():
    names = _hookspec_names()
    assert sorted(names) == ["passhost_register_configs", "passhost_register_converters",
                             "passhost_register_executors", "passhost_register_formats",
                             "passhost_register_instruments", "passhost_register_ops",
                             "passhost_register_passes"]
    for name in names:
        fn = getattr(hookspecs, name)
        assert inspect.signature(fn).parameters == {}, name
        assert hasattr(fn, "passhost_spec"), f"{name} is not marked with @hookspec"
        assert "Example:" in fn.__doc__ and ".. code-block:: python" in fn.__doc__, name


@pytest.mark.parametrize("name", _hookspec_names())
def test_every_hookspec_is_documented_with_its_signature(name):
    text = (DOCS / "hooks.md").read_text()
    assert f"## `{name}()`" in text


@pytest.mark.parametrize("record", [hookspecs.PassEntry, hookspecs.InstrumentEntry, hookspecs.ConfigEntry,
                                    hookspecs.OpEntry, hookspecs.FormatEntry, hookspecs.ConverterEntry,
                                    hookspecs.ExecutorEntry])
def test_every_record_field_is_documented(record):
    text = (DOCS / "hooks.md").read_text()
    for field in dataclasses.fields(record):
        assert f"{field.name}" in text, f"{record.__name__}.{field.name} is not in docs/hooks.md"
    signature = ", ".join(f.name if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                          else f.name + "=" for f in dataclasses.fields(record))
    shown = "OpEntry" if record is hookspecs.OpEntry else record.__name__
    documented = re.search(rf"^{shown}\((.*?)\)$", text, re.S | re.M)
    assert documented, f"docs/hooks.md shows no {record.__name__}(...) signature"
    names = [part.strip().split("=")[0] + ("=" if "=" in part else "")
             for part in " ".join(documented.group(1).split()).split(", ")]
    assert ", ".join(names) == signature


@pytest.mark.parametrize("name", _hookspec_names())
def test_hookspec_examples_run(name, tmp_path):
    """The runnable example in each hookspec docstring is a plugin module that loads cleanly."""
    doc = inspect.cleandoc(getattr(hookspecs, name).__doc__)
    path = tmp_path / f"{name}_example.py"
    path.write_text(inspect.cleandoc(doc.split(".. code-block:: python", 1)[1]) + "\n")
    reg = Registry(load_entrypoints=False)
    assert reg.register_plugin(_import_file(path), name), reg.broken


def _readme_commands() -> list:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_readme_first_block_has_the_demo_and_the_test_command():
    demo, tests = _readme_commands()  # exactly two
    for command in (demo, tests):
        assert command.startswith("python3 -m venv .venv && . .venv/bin/activate && bash scripts/dev-install.sh && ")
    assert tests.split("&&")[-1].strip() == "python -m pytest -n auto"  # (the slow set: -m slow, below)
    run = shlex.split(demo.split("&&")[-1])
    assert run[:2] == ["passhost", "run"]
    args = build_parser().parse_args(run[1:])
    assert args.example or args.input
    assert "README" in (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest -n auto -m slow" in (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest -n auto -m slow" in (ROOT / "README.md").read_text()


def _parser_options(parser: argparse.ArgumentParser) -> set:
    found = set()
    for action in parser._actions:
        found.update(s for s in action.option_strings if s.startswith("--") and s != "--help")
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.add(name)
                found |= _parser_options(sub)
    return found


def test_cli_doc_mentions_every_command_and_option():
    text = (DOCS / "cli.md").read_text()
    missing = sorted(opt for opt in _parser_options(build_parser()) if opt not in text)
    assert not missing, f"docs/cli.md does not mention {missing}"


def test_pass_context_doc_covers_the_constructor_and_the_hooks():
    text = (DOCS / "pass-context.md").read_text()
    assert ("PassContext(opt_level=2, required_pass=None, disabled_pass=None, instruments=None, config=None)"
            in text)
    for word in ("enter_pass_ctx", "exit_pass_ctx", "should_run", "run_before_pass", "run_after_pass",
                 "disabled_pass", "required_pass", "Invalid config option"):
        assert word in text


def test_relative_links_resolve():
    for page in [ROOT / "README.md", *DOCS.glob("*.md")]:
        for target in re.findall(r"\]\(([^)#:]+\.md)\)", page.read_text()):
            assert (page.parent / target).is_file(), f"{page.name} links to missing {target}"


def _import_file(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the plugin of docs/plugins.md ------------------------------------------------------------
@pytest.fixture
def doc_plugin(tmp_path):
    files = {n: b for n, b in FILE_BLOCK.findall((DOCS / "plugins.md").read_text()) if "/" not in n}
    assert sorted(files) == ["neg.txt", "passhost_double_negation.py", "pyproject.toml"]
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    yield _import_file(tmp_path / "passhost_double_negation.py"), files


def test_docs_plugin_pyproject_declares_the_entry_point(doc_plugin):
    _, files = doc_plugin
    text = files["pyproject.toml"]
    assert '[project.entry-points.passhost]\ndouble-negation = "passhost_double_negation"' in text
    assert 'py-modules = ["passhost_double_negation"]' in text
    assert 'name = "passhost-double-negation"' in text


def test_docs_plugin_registers_and_prints_what_the_page_says(doc_plugin):
    module, files = doc_plugin
    reg = Registry(load_entrypoints=False)
    assert reg.register_plugin(module, "double-negation", distribution="passhost-double-negation",
                               version="0.1.0"), reg.broken
    rec = reg.pass_record("DoubleNegation")
    assert (rec.opt_level, rec.required, rec.summary) == (1, (), "Rewrite negative(negative(x)) to x.")
    text = (DOCS / "plugins.md").read_text()
    expected = re.search(r"^printing\n\n```text\n(.*?)^```", text, re.S | re.M).group(1)
    with use_registry(reg):
        out = passhost.pipeline("DoubleNegation")(ir.parse(files["neg.txt"]))
    assert ir.astext(out) == expected


def test_docs_rules_plugin_runs_and_prints_what_the_page_says(tmp_path):
    text = (DOCS / "plugins.md").read_text()
    files = {n.split("/", 1)[1]: b for n, b in FILE_BLOCK.findall(text) if n.startswith("rules/")}
    assert sorted(files) == ["passhost_expand_square.py", "pyproject.toml", "square.txt"]
    assert '[project.entry-points.passhost]\nexpand-square = "passhost_expand_square"' in files["pyproject.toml"]
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    module = _import_file(tmp_path / "passhost_expand_square.py")
    reg = Registry(load_entrypoints=False)
    assert reg.register_plugin(module, "expand-square", distribution="passhost-expand-square", version="0.1.0")
    section = text.split("## A plugin made of rules", 1)[1]
    expected = re.search(r"^prints\n\n```text\n(.*?)^```", section, re.S | re.M).group(1)
    with use_registry(reg):
        out = passhost.pipeline("ExpandSquare")(ir.parse(files["square.txt"]))
        rules = passhost.passes.get("ExpandSquare").pass_func.rules
    assert ir.astext(out) == expected
    assert [r.name for r in rules] == ["square"]
    assert len([line for line in files["passhost_expand_square.py"].splitlines() if line.strip()]) <= 22


def test_the_readme_links_every_docs_page_and_no_page_cites_outside_the_repository():
    readme = (ROOT / "README.md").read_text()
    for page in sorted(DOCS.glob("*.md")):
        assert f"](docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"
    for page in [ROOT / "README.md", *DOCS.glob("*.md")]:
        text = page.read_text()
        for outside in ("TVM-NOTES", "STYLE.md", "CONTRACT.md", "../shared", "/work/"):
            assert outside not in text, f"{page.name} cites {outside}, which is not in the repository"
