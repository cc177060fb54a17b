"""Pipeline text parsing and the default pipeline's ordering."""
from __future__ import annotations

from collections import namedtuple

import pytest
from hypothesis import given, strategies as st

import passhost
from passhost import hookimpl, ir
from passhost.errors import PassNotFound, PipelineError
from passhost.hookspecs import PassEntry
from passhost.pipeline import Pipeline, PassSpec, PipelineSpec, order_passes, parse_element, parse_pipeline
from passhost.registry import Registry, use_registry
from passhost.transform import PassContext, Sequential, module_pass


# -- parsing -------------------------------------------------------------------------------
@pytest.mark.parametrize("text, canonical", [
    ("FoldConstant,EliminateCommonSubexpr,FuseOps(fuse_opt_level=2)",
     "FoldConstant,EliminateCommonSubexpr,FuseOps(fuse_opt_level=2)"),
    ("  A ,  B( k = 1 ,j='x' ) ", "A,B(k=1,j='x')"),
    ("A()", "A"),
    ("A(axes=(1, 2), tag='a,b)', d={'k': [1, (2, 3)]})", "A(axes=(1, 2),tag='a,b)',d={'k': [1, (2, 3)]})"),
    ('A(s="it\'s (", t="""x,y""")', "A(s=\"it's (\",t='x,y')"),
    ("A(flag=True, none=None, neg=-1.5)", "A(flag=True,none=None,neg=-1.5)"),
    ("my.pass-name(x=[])", "my.pass-name(x=[])"),
])
def test_parse_and_print_canonical_text(text, canonical):
    spec = parse_pipeline(text)
    assert str(spec) == canonical
    assert parse_pipeline(str(spec)) == spec


def test_parsed_values_are_python_literals():
    spec = parse_pipeline("A(axes=(1, 2), tag='a,b', d={'k': [1]}, s={1}, e=set())")
    assert spec.passes[0].kwargs == {"axes": (1, 2), "tag": "a,b", "d": {"k": [1]}, "s": {1}, "e": set()}
    assert spec.names == ["A"]


@pytest.mark.parametrize("text, message", [
    ("", "the pipeline is empty"),
    ("   ", "the pipeline is empty"),
    ("A,,B", "empty pipeline element at column 3"),
    ("A,", "empty pipeline element at column 3"),
    ("A(", "'(' is never closed at column 2"),
    ("A(x=(1,2)", "'(' is never closed at column 2"),
    ("A)", "unmatched ')' at column 2"),
    ("A(x=[1)]", "unmatched ')' at column 7"),
    ("A(x='abc)", "unterminated string at column 5"),
    ("1A", "expected a pass name, found '1' at column 1"),
    ("A B", "unexpected 'B' after 'A'; options go in parentheses"),
    ("A(x=1)(y=2)", "unmatched ')' at column 6"),
    ("A(x=1,)", "empty option in 'A'"),
    ("A(1)", "options are written key=value, found '1'"),
    ("A(x=1,,y=2)", "empty option in 'A'"),
    ("A(x=1, x=2)", "option 'x' given twice"),
    ("A(x=foo)", "option x=foo is not a Python literal (quote strings: x='...')"),
    ("A(x=__import__('os').system('echo pwned'))", "is not a Python literal"),
    ("A(x=1+)", "is not a Python literal"),
])
def test_malformed_pipelines_are_rejected_with_the_column(text, message):
    with pytest.raises(PipelineError, match="bad pipeline|the pipeline is empty") as err:
        parse_pipeline(text)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_non_text_is_rejected():
    with pytest.raises(PipelineError, match="a pipeline is a text"):
        parse_pipeline(["A"])


def test_parse_element_takes_exactly_one():
    assert parse_element("timing(unit='ms')") == PassSpec("timing", (("unit", "ms"),))
    with pytest.raises(PipelineError, match="expected one NAME"):
        parse_element("a,b")


_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
_leaf = st.one_of(st.integers(), st.booleans(), st.none(), st.text(max_size=6),
                  st.floats(allow_nan=False, allow_infinity=False))
_values = st.recursive(_leaf, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.tuples(inner, inner),
                                                     st.dictionaries(st.text(max_size=3), inner, max_size=2)),
                       max_leaves=6)
_specs = st.lists(st.builds(PassSpec, _names, st.dictionaries(_names, _values, max_size=3).map(
    lambda d: tuple(d.items()))), min_size=1, max_size=4).map(lambda ps: PipelineSpec(tuple(ps)))


@given(_specs)
def test_any_spec_round_trips_through_its_text(spec):
    assert parse_pipeline(str(spec)) == spec
    assert str(parse_pipeline(str(spec))) == str(spec)


# -- building --------------------------------------------------------------------------
def _factory(name, opt_level=1, log=None):
    def factory(**options):
        def body(mod, ctx):
            if log is not None:
                log.append((name, options))
            return mod

        return module_pass(body, opt_level=opt_level, name=name)

    return factory


class Plugin:
    def __init__(self, *entries):
        self.entries = entries

    @hookimpl
    def passhost_register_passes(self):
        return list(self.entries)


def _registry(*entries, conflicting=()):
    reg = Registry(load_entrypoints=False)
    reg.register_plugin(Plugin(*entries), "main-plugin", distribution="main-dist", version="1.0")
    if conflicting:
        reg.register_plugin(Plugin(*conflicting), "fork", distribution="fork-dist", version="2.0")
    return reg


def test_pipeline_builds_a_sequential_that_remembers_its_text():
    log = []
    reg = _registry(PassEntry("A", _factory("A", log=log)), PassEntry("B", _factory("B", log=log)))
    with use_registry(reg):
        seq = passhost.pipeline("B(k=[1, 2]), A")
        assert isinstance(seq, Sequential) and isinstance(seq, Pipeline)
        assert str(seq.spec) == "B(k=[1, 2]),A"
        assert [p.info.name for p in seq.passes] == ["B", "A"]
        with PassContext(opt_level=2):
            seq(ir.IRModule())
    assert log == [("B", {"k": [1, 2]}), ("A", {})]


def test_pipeline_with_an_unknown_pass_fails_before_running():
    with use_registry(_registry(PassEntry("A", _factory("A")))), pytest.raises(PassNotFound, match="'FuseOps'"):
        passhost.pipeline("A,FuseOps")


# -- ordering -----------------------------------------------------------------------------
E = namedtuple("E", "name after before")


def _order(*entries):
    return [e.name for e in order_passes(entries)]


def test_order_ties_by_name_and_respects_after_and_before():
    assert _order(E("C", (), ()), E("A", (), ()), E("B", (), ())) == ["A", "B", "C"]
    assert _order(E("A", ("C",), ()), E("B", (), ()), E("C", (), ())) == ["B", "C", "A"]
    assert _order(E("Z", (), ("A",)), E("A", (), ()), E("M", (), ())) == ["M", "Z", "A"]
    assert _order(E("FuseOps", ("FoldConstant", "Nope"), ()), E("FoldConstant", (), ()),
                  E("InferType", (), ("FoldConstant",))) == ["InferType", "FoldConstant", "FuseOps"]


def test_unknown_names_in_constraints_are_ignored():
    assert _order(E("A", ("Missing",), ("Gone",))) == ["A"]


def test_a_cycle_is_reported_with_its_passes():
    with pytest.raises(PipelineError) as err:
        order_passes([E("A", ("C",), ()), E("B", ("A",), ()), E("C", ("B",), ()), E("D", ("C",), ())])
    assert "ordering cycle: A -> B -> C -> A" in str(err.value)
    with pytest.raises(PipelineError, match="ordering cycle: A -> A"):
        order_passes([E("A", ("A",), ())])


def test_default_pipeline_orders_filters_and_requires():
    log = []
    reg = _registry(
        PassEntry("Fold", _factory("Fold", 2, log), default=True, after=("Infer",)),
        PassEntry("Infer", _factory("Infer", 0, log), default=True),
        PassEntry("Fuse", _factory("Fuse", 3, log), default=True, after=("Fold", "NotInstalled")),
        PassEntry("Simplify", _factory("Simplify", 1, log), default=True, before=("Fold",)),
        PassEntry("Extra", _factory("Extra", 0, log)),
    )
    with use_registry(reg):
        seq = passhost.default_pipeline()
        assert str(seq.spec) == "Infer,Simplify,Fold"
        assert (seq.info.name, seq.info.opt_level) == ("default_pipeline", 2)
        assert str(passhost.default_pipeline(3).spec) == "Infer,Simplify,Fold,Fuse"
        assert str(passhost.default_pipeline(0).spec) == "Infer"
        assert str(passhost.default_pipeline(0, required=["Fuse"]).spec) == "Infer,Fuse"
        with PassContext(opt_level=3):
            passhost.default_pipeline(3)(ir.IRModule())
    assert [name for name, _ in log] == ["Infer", "Simplify", "Fold", "Fuse"]


def test_default_pipeline_argument_validation():
    with use_registry(_registry()):
        with pytest.raises(PipelineError, match="opt_level must be an integer"):
            passhost.default_pipeline("3")
        with pytest.raises(PipelineError, match="required must be a collection of pass names"):
            passhost.default_pipeline(2, required="Fuse")


def test_default_pipeline_leaves_out_a_clashing_default_pass_with_a_warning():
    reg = _registry(PassEntry("Fold", _factory("Fold"), default=True), PassEntry("Keep", _factory("Keep"), default=True),
                    conflicting=[PassEntry("Fold", _factory("Fold"))])
    with use_registry(reg), pytest.warns(UserWarning, match="pass 'Fold' is left out of the default pipeline: "
                                                            "pass 'Fold' is registered 2 times"):
        assert str(passhost.default_pipeline().spec) == "Keep"
    reg = _registry(PassEntry("Fold", _factory("Fold")), PassEntry("Keep", _factory("Keep"), default=True),
                    conflicting=[PassEntry("Fold", _factory("Fold"))])
    with use_registry(reg):
        assert str(passhost.default_pipeline().spec) == "Keep"
