"""passhost.testing helpers: random_graph, random_inputs, check_pass, assert_semantics_preserved."""
from __future__ import annotations

import numpy as np
import pytest

from passhost import ir, testing, transform
from passhost.errors import IRError
from passhost.ir import rewrite_post_order

# --------------------------------------------------------------------------- random_graph


@pytest.mark.parametrize("options", [{}, {"lets": True, "tuples": True}])
def test_random_graph_is_deterministic_and_well_typed_over_200_seeds(options):
    kinds_seen = set()
    for seed in range(200):
        a = testing.random_graph(seed, **options)
        b = testing.random_graph(seed, **options)
        assert ir.structural_equal(a, b), seed
        assert ir.structural_hash(a) == ir.structural_hash(b)
        assert str(a) == str(b)
        typed = ir.infer_type(a)
        ir.well_formed(typed)
        main = typed["main"]
        assert 1 <= len(main.params) <= 3
        for p in main.params:
            assert isinstance(p.checked_type, ir.TensorType)
        kinds_seen.update(ir.count_ops(main))
        for node in ir.post_order(main):
            kinds_seen.add(type(node).__name__)
    expected = {"add", "multiply", "nn.conv2d", "nn.dense", "nn.batch_norm", "nn.bias_add",
                "nn.max_pool2d", "nn.avg_pool2d", "nn.global_avg_pool2d", "exp", "divide",
                "TupleGetItem", "Constant"}
    if options:
        expected |= {"Let", "Tuple"}
    assert expected <= kinds_seen


def test_random_graph_has_sharing_scalars_and_tensor_constants():
    shared = scalars = tensors = duplicates = 0
    for seed in range(50):
        main = testing.random_graph(seed)["main"]
        uses: dict = {}
        calls = []
        for node in ir.post_order(main):
            if type(node) is ir.Call:
                calls.append(node)
                for a in node.args:
                    uses[a] = uses.get(a, 0) + 1
            if type(node) is ir.Constant:
                scalars += node.is_scalar
                tensors += not node.is_scalar
        shared += any(n > 1 and type(e) is ir.Call for e, n in uses.items())
        hashes = [ir.structural_hash(c) for c in calls]
        duplicates += len(hashes) != len(set(hashes))
    assert shared >= 10 and scalars >= 10 and tensors >= 10 and duplicates >= 5


def test_random_graph_seeds_differ_and_options_apply():
    texts = {str(testing.random_graph(seed)) for seed in range(30)}
    assert len(texts) == 30
    mod = testing.random_graph(7, num_nodes=40, kinds=["binary", "unary"], num_params=2)
    ops = ir.count_ops(mod["main"])
    assert set(ops) <= {"add", "subtract", "multiply", "maximum", "minimum", "negative", "nn.relu"}
    assert len(mod["main"].params) == 2
    with pytest.raises(IRError, match="unknown kind 'nope'"):
        testing.random_graph(0, kinds=["nope"])
    with pytest.raises(IRError, match="num_params"):
        testing.random_graph(0, num_params=4)


def test_random_graphs_evaluate_to_finite_values():
    for seed in range(0, 200, 4):
        mod = testing.random_graph(seed, lets=seed % 8 == 0, tuples=seed % 8 == 0)
        inputs = testing.random_inputs(mod, seed)
        out = ir.evaluate(mod, *inputs)
        for o in out if isinstance(out, tuple) else (out,):
            assert np.all(np.isfinite(o)), seed


def test_random_inputs_match_the_parameters():
    mod = testing.random_graph(3, num_params=3)
    inputs = testing.random_inputs(mod, seed=5)
    assert [a.shape for a in inputs] == [p.type_annotation.shape for p in mod["main"].params]
    assert all(a.dtype == np.float32 and np.all(np.abs(a) <= 1.0) for a in inputs)
    again = testing.random_inputs(mod, seed=5)
    assert all(np.array_equal(a, b) for a, b in zip(inputs, again))
    other = testing.random_inputs(mod, seed=6)
    assert not np.array_equal(inputs[0], other[0])
    x = ir.var("x")
    with pytest.raises(IRError, match="%x has no tensor type"):
        testing.random_inputs(ir.Function([x], x))


# --------------------------------------------------------------------------- check_pass


def _double_negation(mod):
    """negative(negative(x)) -> x, as a plain ``mod -> mod`` callable."""
    def rewrite(node):
        if (type(node) is ir.Call and node.op is ir.Op.get("negative")
                and type(node.args[0]) is ir.Call and node.args[0].op is ir.Op.get("negative")):
            return node.args[0].args[0]
        return None

    out = ir.IRModule()
    for gv, func in mod.items():
        out[gv.name_hint] = rewrite_post_order(func, rewrite)
    return out


def _identity(mod):
    return mod


def test_check_pass_accepts_the_expected_program():
    def before():
        x = ir.var("x", shape=(2,))
        return ir.Function([x], ir.add(ir.negative(ir.negative(x)), ir.const(1.0)))

    def expected():
        x = ir.var("x", shape=(2,))
        return ir.Function([x], ir.add(x, ir.const(1.0)))

    out = testing.check_pass(_double_negation, before(), expected())
    assert out["main"].ret_type == ir.TensorType((2,), "float32")
    testing.check_pass(_double_negation, before, expected)  # builder callables work too
    testing.check_pass(_identity, expected())                # expected=None: unchanged


def test_check_pass_reports_both_texts_on_mismatch():
    x = ir.var("x", shape=(2,))
    before = ir.Function([x], ir.negative(ir.negative(x)))
    y = ir.var("y", shape=(2,))
    wrong = ir.Function([y], ir.negative(y))
    with pytest.raises(AssertionError, match="(?s)--- actual ---.*%x.*--- expected ---.*negative"):
        testing.check_pass(_double_negation, before, wrong)
    with pytest.raises(AssertionError, match="did not produce"):
        testing.check_pass(_double_negation, before)  # the pass did change it
    with pytest.raises(AssertionError, match="not an IRModule"):
        testing.check_pass(lambda mod: mod["main"], before, before)


def test_check_pass_with_modules_and_real_passes():
    @transform.function_pass(opt_level=1, name="DoubleNegation")
    def double_negation(func, mod, ctx):
        return _double_negation(ir.IRModule.from_expr(func))["main"]

    def build(neg):
        m = ir.IRModule()
        a = ir.var("a", shape=(3,))
        m["helper"] = ir.Function([a], ir.negative(ir.negative(a)) if neg else a)
        x = ir.var("x", shape=(3,))
        m["main"] = ir.Function([x], ir.Call(m.get_global_var("helper"), [x]))
        return m

    testing.check_pass(double_negation, build(True), build(False))
    with pytest.raises(AssertionError):
        testing.check_pass(double_negation, build(True), build(True))


def test_run_opt_pass_returns_typed_main():
    x = ir.var("x", shape=(2,))
    func = testing.run_opt_pass(ir.Function([x], ir.negative(ir.negative(x))), _double_negation)
    assert func.body is func.params[0]
    assert func.ret_type == ir.TensorType((2,), "float32")


# --------------------------------------------------------------------------- semantics


def test_assert_semantics_preserved_on_random_graphs():
    for seed in range(20):
        mod = testing.random_graph(seed)
        testing.assert_semantics_preserved(_double_negation, mod, testing.random_inputs(mod, seed))
        testing.assert_semantics_preserved(_identity, mod)  # inputs drawn from the seed


def test_assert_semantics_preserved_catches_a_wrong_pass():
    x = ir.var("x", shape=(2, 2))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.add(x, ir.const(1.0))))

    def wrong(m):
        y = ir.var("x", shape=(2, 2))
        return ir.IRModule.from_expr(ir.Function([y], ir.add(y, ir.const(1.5))))

    inputs = {"x": np.ones((2, 2), "float32")}
    with pytest.raises(AssertionError, match="(?s)changed the result of main.*--- before ---.*--- after ---"):
        testing.assert_semantics_preserved(wrong, mod, inputs)
    testing.assert_semantics_preserved(wrong, mod, inputs, atol=0.6)
    with pytest.raises(KeyError, match="%x"):
        testing.assert_semantics_preserved(_identity, mod, {"y": np.ones((2, 2), "float32")})


def test_assert_semantics_preserved_compares_tuples():
    x = ir.var("x", shape=(2,))
    mod = ir.IRModule.from_expr(ir.Function([x], ir.Tuple([x, ir.negative(x)])))

    def drop(m):
        y = ir.var("x", shape=(2,))
        return ir.IRModule.from_expr(ir.Function([y], ir.Tuple([y])))

    testing.assert_semantics_preserved(_identity, mod)
    with pytest.raises(AssertionError, match="tuple of 2"):
        testing.assert_semantics_preserved(drop, mod)
