"""InferType: the pass is a shell over passhost.ir.infer_type with TVM's PassInfo."""
from __future__ import annotations

import pytest

import passhost
from passhost import ir, transform
from passhost.errors import TypeInferenceError
from passhost.testing import assert_semantics_preserved, chain, example, random_graph
from passhost_infer_type import InferType


def test_registered_with_tvm_info():
    p = passhost.passes.InferType()
    assert isinstance(p, transform.ModulePass)
    assert p.info.name == "InferType" and p.info.opt_level == 0 and tuple(p.info.required) == ()
    info = passhost.passes.info("InferType")
    assert info.distribution == "passhost-infer-type"


def test_types_every_expression_and_fills_annotations():
    x = ir.var("x", shape=(10, 20))
    w = ir.var("w")
    body = ir.add(ir.nn.dense(x, w, units=5), ir.const(1.0))
    mod = ir.IRModule.from_expr(ir.Function([x, w], body))
    out = InferType()(mod)
    main = out["main"]
    assert main.body.checked_type == ir.TensorType((10, 5), "float32")
    assert main.params[1].type_annotation == ir.TensorType((5, 20), "float32")
    assert main.ret_type == ir.TensorType((10, 5), "float32")
    assert "/* ty=Tensor[(10, 5), float32] */" in str(out)
    assert str(out).startswith("def @main(%x: Tensor[(10, 20), float32] /* ty=Tensor[(10, 20), float32] */")


def test_tutorial_program_types_like_tvm():
    out = InferType()(ir.IRModule.from_expr(example()))
    assert out["main"].ret_type == ir.TensorType((1, 64, 54, 54), "float32")


def test_type_error_names_the_operator():
    x = ir.var("x", shape=(2, 3))
    y = ir.var("y", shape=(4, 5))
    mod = ir.IRModule.from_expr(ir.Function([x, y], ir.add(x, y)))
    with pytest.raises(TypeInferenceError, match="add"):
        InferType()(mod)


def test_re_inference_keeps_the_same_function_objects():
    mod = InferType()(ir.IRModule.from_expr(example()))
    again = InferType()(mod)
    assert again["main"] is mod["main"]


def test_required_by_name_from_a_sequential():
    # EliminateCommonSubexpr requires InferType: the registry resolves it by name
    seen = []

    class Recorder(passhost.instrument.PassInstrument):
        def run_before_pass(self, mod, info):
            seen.append(info.name)

    seq = transform.Sequential([passhost.passes.EliminateCommonSubexpr()])
    with transform.PassContext(opt_level=3, instruments=[Recorder()]):
        out = seq(ir.IRModule.from_expr(example()))
    assert seen[:3] == ["sequential", "InferType", "EliminateCommonSubexpr"]
    assert out["main"].body.has_type


def test_semantics_preserved_on_random_graphs():
    p = InferType()
    for seed in range(200):
        mod = random_graph(seed, 20, lets=seed % 2 == 0, tuples=seed % 3 == 0)
        out = assert_semantics_preserved(p, mod, seed=seed)
        assert out["main"].body.has_type


def test_deep_chain_at_default_recursion_limit():
    out = InferType()(chain(100_000))
    assert out["main"].ret_type == ir.TensorType((2,), "float32")
