"""Declared, typed pass options (issue 15, "Options that explain themselves" and item 6):
read from the factory's signature or declared on the entry, validated before anything runs,
shown by ``passhost info`` and ``passhost list --json``."""
from __future__ import annotations

import json
import os
from typing import Callable, Iterable, Literal, Optional

import pytest

import passhost
from passhost import hookimpl
from passhost.errors import OptionError, PipelineError
from passhost.hookspecs import Option, PassEntry
from passhost.options import accepts, plain_doc, schema_of, type_name
from passhost.registry import Registry, use_registry
from passhost.transform import module_pass


@pytest.fixture(autouse=True)
def in_tmp_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a crash reproducer would land here
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()


class Scale:
    """A third-party pass factory written with nothing but a typed signature.

    :param factor: what to multiply by
    :param axes: which axes, ``None`` for all of them
    :param mode: ``"fast"`` or
        ``"exact"``
    """

    def __new__(cls, factor: float = 2.0, axes: Optional[tuple] = None, mode: Literal["fast", "exact"] = "fast",
                verbose=False):
        return module_pass(lambda mod, ctx: mod, opt_level=1, name="Scale")


class Plugin:
    def __init__(self, *entries):
        self.entries = entries

    @hookimpl
    def passhost_register_passes(self):
        return list(self.entries)


def registry_with(*entries):
    reg = Registry(load_entrypoints=False)
    reg.register_plugin(Plugin(*entries), "third", distribution="third-party", version="1.0")
    return reg


# -- the schema --------------------------------------------------------------------------
def test_a_typed_signature_is_the_schema_with_docs_from_param_fields():
    schema = schema_of(Scale)
    assert not schema.open
    assert [(o.name, o.type_name, o.default, o.required) for o in schema.options] == [
        ("factor", "float", 2.0, False), ("axes", "tuple | None", None, False),
        ("mode", "'fast' | 'exact'", "fast", False), ("verbose", "bool", False, False)]
    assert schema.get("factor").doc == "what to multiply by"
    assert schema.get("mode").doc == '"fast" or "exact"'  # continuation joined, markup gone


def test_a_factory_taking_any_keyword_has_an_open_schema():
    schema = schema_of(lambda **options: None)
    assert schema.open and schema.options == ()
    schema.validate("pass 'X'", {"anything": 1})  # passed on: the factory decides


def test_declared_options_win_and_must_be_taken_by_the_factory():
    declared = (Option("layouts", dict, required=True, doc="op -> layouts"),)
    schema = schema_of(lambda layouts=None: None, declared)
    assert schema.options == declared
    with pytest.raises(TypeError, match="declares option 'nope', which its factory does not take"):
        schema_of(lambda layouts=None: None, (Option("nope", int),))


@pytest.mark.parametrize("tp, good, bad", [
    (int, [0, -3], [True, 1.5, "1"]),
    (float, [1, 1.5], [True, "1.5"]),
    (bool, [True], [1, None]),
    (Optional[int], [None, 3], ["3"]),
    (tuple[int, ...], [(1, 2), [3]], [(1, "2"), 1]),
    (tuple[int, str], [(1, "a")], [(1,), ("a", 1)]),
    (Iterable[str], [["main"], ("a", "b")], ["main", [1]]),
    (dict[str, int], [{"a": 1}], [{"a": "1"}, [("a", 1)]]),
    (Literal["a", "b"], ["a"], ["c", 1]),
    (Callable[[int], bool], [len], [3]),
])
def test_accepts_reads_the_usual_typing_forms(tp, good, bad):
    assert all(accepts(tp, v) for v in good), (tp, good)
    assert not any(accepts(tp, v) for v in bad), (tp, bad)


def test_type_names_read_as_python_does():
    assert [type_name(t) for t in (int, Optional[Iterable[str]], tuple[int, ...], Callable[[int], bool], dict)] == [
        "int", "list[str] | None", "tuple[int, ...]", "callable", "dict"]


def test_plain_doc_removes_rest_markup():
    assert plain_doc("see :class:`~passhost.transform.PassContext` and ``x``; Before::") == \
        "see PassContext and x; Before:"


# -- validation through the registry -------------------------------------------------------
def test_a_third_party_pass_gets_validation_for_free():
    with use_registry(registry_with(PassEntry("Scale", Scale))):
        assert passhost.passes.Scale(factor=3, mode="exact").info.name == "Scale"
        with pytest.raises(OptionError) as err:
            passhost.passes.Scale(facter=3)
        assert str(err.value) == (
            "pass 'Scale' (third-party==1.0) has no option 'facter' (did you mean 'factor'?); its options: "
            "factor: float = 2.0; axes: tuple | None = None; mode: 'fast' | 'exact' = 'fast'; verbose: bool = False")
        with pytest.raises(OptionError, match=r"option 'mode' must be 'fast' \| 'exact', got 'slow' \(str\)"):
            passhost.pipeline("Scale(mode='slow')")
    # an OptionError is a PipelineError (exit 2) and a TypeError (what Python raises for a bad keyword)
    assert issubclass(OptionError, PipelineError) and issubclass(OptionError, TypeError)


def test_a_required_option_is_checked_before_the_factory_runs():
    calls = []

    def factory(layouts=None):
        calls.append(layouts)
        return module_pass(lambda mod, ctx: mod, opt_level=1, name="Needy")

    entry = PassEntry("Needy", factory, options=(Option("layouts", dict, required=True, doc="op -> layouts"),))
    with use_registry(registry_with(entry)):
        calls.clear()
        with pytest.raises(OptionError, match=r"pass 'Needy' \(third-party==1.0\) needs the option layouts "
                                              r"\(dict\): op -> layouts"):
            passhost.passes.Needy()
        assert calls == []
        passhost.passes.Needy(layouts={"nn.conv2d": ["NHWC"]})
        assert calls == [{"nn.conv2d": ["NHWC"]}]


def test_a_declaration_the_factory_contradicts_breaks_the_plugin():
    entry = PassEntry("Scale", Scale, options=(Option("gain", float),))
    reg = registry_with(entry)
    assert "Scale" not in reg.pass_names()
    assert "declares option 'gain', which its factory does not take" in reg.broken[0].error


def test_option_records_are_checked_on_the_entry():
    from passhost.errors import PluginLoadError

    with pytest.raises(PluginLoadError, match="options holds 'x', not a passhost.hookspecs.Option"):
        PassEntry("Scale", Scale, options=("x",))
    with pytest.raises(PluginLoadError, match="option 'x' is declared twice"):
        PassEntry("Scale", Scale, options=(Option("x"), Option("x")))


# -- the command line ----------------------------------------------------------------------
def run(capsys, *argv):
    from passhost.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("spec, message", [
    ("FuseOps(level=1)", "pass 'FuseOps' (passhost-fuse-ops==0.1.0) has no option 'level'; its options: "
                         "fuse_opt_level: int = -1"),
    ('FuseOps(fuse_opt_level="2")', "option 'fuse_opt_level' must be int, got '2' (str)"),
    ("DeadCodeElimination(inline_once=1)", "option 'inline_once' must be bool, got 1 (int); its options: "
                                           "inline_once: bool = False; ignore_impurity: bool = False"),
    ("ConvertLayout", "pass 'ConvertLayout' (passhost-convert-layout==0.1.0) needs the option desired_layouts "
                      "(dict): {op name: [data_layout, kernel_layout or 'default']}"),
])
def test_a_bad_option_is_a_usage_error_before_anything_runs(capsys, tmp_path, spec, message):
    out = tmp_path / "out.txt"
    code, stdout, err = run(capsys, "run", "--example", "tutorial", "-O3", "-p", spec, "-o", str(out))
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert "TypeError" not in err and "Traceback" not in err and "reproducer" not in err
    assert not out.exists()
    assert os.listdir(tmp_path / "tmp") == [] and sorted(os.listdir(tmp_path)) == ["tmp"]  # no reproducer


def test_info_shows_an_options_table_and_plain_text(capsys):
    code, out, _ = run(capsys, "info", "FuseOps")
    assert code == 0
    lines = out.splitlines()
    at = lines.index("options:          1")
    assert lines[at + 1].split() == ["NAME", "TYPE", "DEFAULT", "DOC"]
    assert lines[at + 2].split()[:4] == ["fuse_opt_level", "int", "-1", "-1"]
    for markup in ("``", ":param", ":class:", "::"):
        assert markup not in out, markup
    code, out, _ = run(capsys, "info", "ConvertLayout")
    assert "desired_layouts" in out and "(required)" in out
    code, out, _ = run(capsys, "info", "InferType")
    assert "options:          -" in out


def test_list_json_includes_the_option_schema(capsys):
    code, out, _ = run(capsys, "list", "--json")
    assert code == 0
    passes = {p["name"]: p for p in json.loads(out)["passes"]}
    assert passes["FuseOps"]["options"] == [{
        "name": "fuse_opt_level", "type": "int", "required": False, "default": -1,
        "doc": passes["FuseOps"]["options"][0]["doc"]}]
    assert passes["FuseOps"]["options"][0]["doc"].startswith("-1 (default) uses the opt_level")
    assert passes["ConvertLayout"]["options"][0]["required"] is True
    assert passes["InferType"]["options"] == [] and passes["InferType"]["options_open"] is False


def test_a_factory_whose_signature_cannot_be_read_has_an_open_schema_and_still_builds():
    """Schemas read from signatures are read lazily, on first use: plugin code that raises
    there must not surface as a traceback then."""

    class Opaque:
        @property
        def __signature__(self):
            raise RuntimeError("no signature here")

        def __call__(self, **options):
            return module_pass(lambda mod, ctx: mod, opt_level=1, name="Opaque")

    with use_registry(registry_with(PassEntry("Opaque", Opaque()))):
        assert passhost.passes.info("Opaque").options.open
        assert passhost.passes.Opaque(anything=1).info.name == "Opaque"
