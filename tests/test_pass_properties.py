"""Every installed pass, and the default pipelines, on seeded random graphs (issue 16).

The graphs (:func:`passhost.testing.random_graph`) hold lets, ifs, tuples, 5-D tensors
beside convolutions, pools, batch norms, dense layers and broadcasting. For each pass and
graph the output must be:

* well formed (:func:`passhost.ir.well_formed`);
* printable and re-parsable to a structurally equal module, whose printed text is the
  same again;
* numerically the same program: ``main`` evaluated on the same seeded inputs before and
  after agrees within ``rtol=1e-4, atol=1e-5``.

The tolerance is sound for float32: the passes reassociate (FoldScaleAxis folds a scale
into a convolution's weights, SimplifyInference rewrites batch norm as ``x * s + b``,
FoldConstant evaluates in numpy), which changes results by a few units in the last place
per operation; the graphs are shallow (at most 12 steps) and their values are clamped to
magnitudes of about 10, so a few float32 ulps (1.2e-7 relative each) stay far below 1e-4,
and ``atol`` covers results that cancel to near zero.

``GRAPHS_PER_PASS`` graphs per pass run in CI (in ``GRAPH_CHUNKS`` test cases per pass, so
a failure names a small seed range). ``SYMBOLIC_GRAPHS_PER_PASS`` more have symbolic batch,
height and width (``random_graph(symbolic=True)``): each pass must keep them symbolic-typed
and give the same outputs at every one of ``BINDINGS``.
"""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir, transform
from passhost.testing import evaluate_main
from passhost.testing.random_graph import random_graph, random_inputs

GRAPHS_PER_PASS = 500
GRAPH_CHUNKS = 5
SYMBOLIC_GRAPHS_PER_PASS = 60
#: the bindings each symbolic graph runs at (every size at least random_graph.MIN_SIZE but n)
BINDINGS = ({"n": 1, "h": 4, "w": 5}, {"n": 3, "h": 7, "w": 6}, {"n": 2, "h": 9, "w": 11})
RTOL, ATOL = 1e-4, 1e-5

#: passes that need options to run, and extra variants worth their own run
OPTIONS = {
    "ConvertLayout": [{"desired_layouts": {"nn.conv2d": ["NHWC", "default"]}}],
    "DeadCodeElimination": [{}, {"inline_once": True}],
}
PIPELINES = ["ToANormalForm,ToGraphNormalForm", "ToANormalForm,DeadCodeElimination(inline_once=True)"]
SKIP = {"PrintIR"}  # prints the module to stderr: nothing to check beyond the identity


def _cases() -> list:
    cases = []
    for name in passhost.passes.names():
        if name in SKIP:
            continue
        for opts in OPTIONS.get(name, [{}]):
            label = name + ("" if not opts else "(" + ",".join(f"{k}={v!r}" for k, v in opts.items()) + ")")
            cases.append(pytest.param(("pass", name, opts), id=label))
    for text in PIPELINES:
        cases.append(pytest.param(("pipeline", text, None), id=text))
    for level in (2, 3):
        cases.append(pytest.param(("default", level, None), id=f"default_pipeline-O{level}"))
    return cases


def _graph(seed: int, symbolic: bool = False) -> ir.IRModule:
    shape = seed % 4  # every flavour in every chunk
    return random_graph(seed, 8 + seed % 5, lets=shape in (1, 3), tuples=shape in (2, 3), ifs=shape != 0,
                        rank5=shape in (0, 3), symbolic=symbolic)


def _build(case):
    kind, what, opts = case
    if kind == "pass":
        return passhost.passes.get(what, **opts)
    if kind == "pipeline":
        return passhost.pipeline(what)
    return passhost.default_pipeline(what)


def _close(got, want, where):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _close(g, w, f"{where}[{i}]")
        return
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=RTOL, atol=ATOL, err_msg=where)


def test_the_graphs_hold_every_construct():
    seen = set()
    for seed in range(40):
        text = ir.astext(_graph(seed))
        seen |= {k for k, word in (("let", "let %"), ("if", "if ("), ("tuple", ".0"), ("5-D", "expand_dims"),
                                   ("conv", "nn.conv2d")) if word in text}
    assert seen == {"let", "if", "tuple", "5-D", "conv"}


@pytest.mark.parametrize("chunk", range(GRAPH_CHUNKS))
@pytest.mark.parametrize("case", _cases())
def test_pass_output_is_well_formed_reparsable_and_equivalent(case, chunk):
    per = GRAPHS_PER_PASS // GRAPH_CHUNKS
    p = _build(case)
    for seed in range(chunk * per, (chunk + 1) * per):
        mod = ir.infer_type(_graph(seed))  # typed: a pass that declares preserves_types is held to it
        inputs = random_inputs(mod, seed)
        want = evaluate_main(mod, inputs)
        where = f"seed {seed}"
        try:
            with transform.PassContext(opt_level=3, config={"passhost.verify_each": True}):
                out = p(mod)
            ir.well_formed(out)
            text = ir.astext(out)
            again = ir.parse(text)
            assert ir.structural_equal(again, out, map_free_vars=True), "re-parsed module differs"
            assert ir.astext(again) == text, "printing the re-parsed module gives other text"
            _close(evaluate_main(out, inputs), want, "main")
        except Exception as err:
            raise AssertionError(f"{where}: {type(err).__name__}: {err}\n--- before ---\n{ir.astext(mod)}") from err


@pytest.mark.parametrize("case", _cases())
def test_pass_output_on_symbolic_shapes_is_equivalent_at_every_binding(case):
    p = _build(case)
    for seed in range(SYMBOLIC_GRAPHS_PER_PASS):
        mod = ir.infer_type(_graph(seed, symbolic=True))
        assert not mod["main"].params[0].checked_type.is_static
        inputs = [random_inputs(mod, seed, sizes=b) for b in BINDINGS]
        wants = [evaluate_main(mod, i) for i in inputs]
        try:
            with transform.PassContext(opt_level=3, config={"passhost.verify_each": True}):
                out = p(mod)
            ir.well_formed(out)
            again = ir.parse(ir.astext(out))
            assert ir.structural_equal(again, out, map_free_vars=True), "re-parsed module differs"
            assert out["main"].params[0].checked_type == mod["main"].params[0].checked_type, "signature changed"
            for binding, i, want in zip(BINDINGS, inputs, wants):
                _close(evaluate_main(out, i), want, f"main at {binding}")
        except Exception as err:
            raise AssertionError(f"seed {seed}: {type(err).__name__}: {err}\n--- before ---\n{ir.astext(mod)}") from err
