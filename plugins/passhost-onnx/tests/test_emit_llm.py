"""The fused operators of language models in ONNX: ``nn.rms_norm``, ``nn.rotary_embedding`` and
``nn.attention`` are ``RMSNormalization``, ``RotaryEmbedding`` and ``Attention`` from opset 23
(the KV cache's Concat taken into the Attention), their decomposed forms below it, and with
``target="onnxruntime"`` SiLU is onnxruntime's ``QuickGelu``; onnxruntime gives passhost's
numbers in every form."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from passhost import ir
from passhost.errors import FormatError

RNG = np.random.default_rng(0)
B, H, KV, L, P, D = 2, 4, 2, 3, 5, 16


def _f32(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _block():
    """One decoder layer's fused operators over a cache: (attention, present k, present v, silu(norm), sum)."""
    x, r = ir.var("x", shape=("b", "s", 64)), ir.var("r", shape=("b", "s", 64))
    q, kn, vn = (ir.var(n, shape=("b", h, "s", D)) for n, h in (("q", H), ("kn", KV), ("vn", KV)))
    pk, pv = ir.var("pk", shape=("b", KV, "p", D)), ir.var("pv", shape=("b", KV, "p", D))
    m = ir.var("m", shape=("b", 1, "s", "p + s"))
    c, sn = ir.var("c", shape=("b", "s", D // 2)), ir.var("sn", shape=("b", "s", D // 2))
    k = ir.concatenate([pk, ir.nn.rotary_embedding(kn, c, sn)], axis=2)
    v = ir.concatenate([pv, vn], axis=2)
    att = ir.nn.attention(ir.nn.rotary_embedding(q, c, sn), k, v, m, scale=0.25)
    total = ir.add(x, r)
    norm = ir.nn.rms_norm(total, ir.const(_f32(64)), epsilon=1e-6)
    silu = ir.multiply(norm, ir.sigmoid(norm))  # onnxruntime's QuickGelu(alpha=1) with its target
    mod = ir.IRModule.from_expr(ir.Function([x, r, q, kn, vn, pk, pv, m, c, sn],
                                            ir.Tuple([att, k, v, silu, total])))
    mask = np.where(RNG.random((B, 1, L, P + L)) < 0.3, -np.inf, 0).astype("float32")
    mask[0, 0, 1] = -np.inf  # a row masked whole: zeros, in every form
    feeds = dict(x=_f32(B, L, 64), r=_f32(B, L, 64), q=_f32(B, H, L, D), kn=_f32(B, KV, L, D), vn=_f32(B, KV, L, D),
                 pk=_f32(B, KV, P, D), pv=_f32(B, KV, P, D), m=mask, c=_f32(B, L, D // 2), sn=_f32(B, L, D // 2))
    return ir.infer_type(mod), feeds


@pytest.mark.parametrize("opset,target,ops", [
    (23, "", {"RMSNormalization", "RotaryEmbedding", "Attention", "Add"}),
    (23, "onnxruntime", {"RMSNormalization", "RotaryEmbedding", "Attention", "QuickGelu"}),
    (18, "", {"Pow", "ReduceMean", "Softmax", "IsNaN", "MatMul", "Sigmoid"}),
    (18, "onnxruntime", {"Pow", "Softmax", "MatMul", "QuickGelu"}),
])
def test_the_fused_operators_give_passhosts_numbers_in_onnxruntime(tmp_path, ort_run, opset, target, ops):
    mod, feeds = _block()
    path = tmp_path / "m.onnx"
    ir.save(mod, str(path), opset=opset, target=target)
    model = onnx.load(str(path))
    kinds = {n.op_type for n in model.graph.node}
    assert ops <= kinds, kinds
    assert model.opset_import[0].version == opset
    if opset >= 23:  # the cache's Concat is the Attention's past_key / past_value, present out
        assert "Concat" not in kinds and "Attention" in kinds
    want = ir.evaluate(mod, *feeds.values())
    got = ort_run(str(path), feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    assert np.all(got[0][0, :, 1] == 0)


def test_the_model_keeps_its_opset_and_onnxruntimes_target_raises_it_to_23(tmp_path):
    mod, _ = _block()
    mod.attrs["onnx.opset"] = 18  # (as if imported from an opset-18 model)
    ir.save(mod, str(tmp_path / "a.onnx"))
    model = onnx.load(str(tmp_path / "a.onnx"))
    assert model.opset_import[0].version == 18 and "Attention" not in {n.op_type for n in model.graph.node}
    ir.save(mod, str(tmp_path / "b.onnx"), target="onnxruntime")
    assert onnx.load(str(tmp_path / "b.onnx")).opset_import[0].version == 23
    ir.save(mod, str(tmp_path / "c.onnx"), opset=21, target="onnxruntime")
    assert onnx.load(str(tmp_path / "c.onnx")).opset_import[0].version == 21
    x = ir.var("x", shape=(2, 3))
    plain = ir.IRModule.from_expr(ir.Function([x], ir.exp(x)))
    ir.save(plain, str(tmp_path / "d.onnx"), target="onnxruntime")
    assert onnx.load(str(tmp_path / "d.onnx")).opset_import[0].version == 17
    with pytest.raises(FormatError, match="target 'tvm'"):
        ir.save(plain, str(tmp_path / "e.onnx"), target="tvm")


@pytest.mark.parametrize("opset", [18, 23])
@pytest.mark.parametrize("case", ["bool_mask", "no_mask", "head_mask", "half"])
def test_attention_and_rotary_variants_export_exactly(tmp_path, ort_run, opset, case):
    q, k, v = ir.var("q", shape=(1, 6, 3, 8)), ir.var("k", shape=(1, 2, 5, 8)), ir.var("v", shape=(1, 2, 5, 4))
    feeds = {"q": _f32(1, 6, 3, 8), "k": _f32(1, 2, 5, 8), "v": _f32(1, 2, 5, 4)}
    params = [q, k, v]
    if case == "bool_mask":
        m = ir.var("m", shape=(3, 5), dtype="bool")
        params.append(m)
        feeds["m"] = RNG.random((3, 5)) < 0.6
        body = ir.nn.attention(q, k, v, m, scale=0.3)
    elif case == "head_mask":
        m = ir.var("m", shape=(1, 6, 3, 5))
        params.append(m)
        feeds["m"] = _f32(1, 6, 3, 5)
        body = ir.nn.attention(q, k, v, m)
    elif case == "half":  # a partial rotary over 4 of 8 values, interleaved, cos/sin of one batch row
        c, s = ir.var("c", shape=(1, 3, 2)), ir.var("s", shape=(1, 3, 2))
        params = [q, c, s]
        feeds = {"q": feeds["q"], "c": _f32(1, 3, 2), "s": _f32(1, 3, 2)}
        body = ir.nn.rotary_embedding(q, c, s, interleaved=True, rotary_dim=4)
    else:
        body = ir.nn.attention(q, k, v)
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function(params, body)))
    path = tmp_path / "m.onnx"
    ir.save(mod, str(path), opset=opset)
    np.testing.assert_allclose(ort_run(str(path), feeds)[0], ir.evaluate(mod, *feeds.values()), rtol=1e-5, atol=1e-5)


def test_a_half_precision_rms_norm_below_opset_23_normalises_in_float32(tmp_path, ort_run):
    x = ir.var("x", shape=(2, 64), dtype="float16")
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.nn.rms_norm(x, ir.const(np.ones(64, "float16"))))))
    a = (RNG.standard_normal((2, 64)) * 300).astype("float16")  # its squares overflow float16
    for opset in (18, 23):
        ir.save(mod, str(tmp_path / "m.onnx"), opset=opset)
        got = ort_run(str(tmp_path / "m.onnx"), {"x": a})[0]
        np.testing.assert_allclose(got.astype("float32"), ir.evaluate(mod, a).astype("float32"), rtol=2e-3, atol=2e-3)


def _hf_half_rms_graph(dtype="float16"):
    """Hugging Face's half-precision RMSNorm as PyTorch exports it (Cast, Pow, ReduceMean, Add,
    Sqrt, Div(1, .), Mul, Cast back, Mul by the weight), as ONNX nodes."""
    from onnx import TensorProto, helper, numpy_helper

    t = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}[dtype]
    f = TensorProto.FLOAT
    inits = [numpy_helper.from_array(np.array(v, "float32"), n) for n, v in (("two", 2.0), ("eps", 1e-6), ("one", 1.0))]
    inits.append(numpy_helper.from_array(RNG.uniform(-2, 2, 64).astype(dtype), "w"))
    nodes = [helper.make_node("Cast", ["x"], ["xw"], to=f), helper.make_node("Pow", ["xw", "two"], ["sq"]),
             helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["se"]), helper.make_node("Sqrt", ["se"], ["rt"]),
             helper.make_node("Div", ["one", "rt"], ["inv"]), helper.make_node("Mul", ["xw", "inv"], ["n"]),
             helper.make_node("Cast", ["n"], ["nh"], to=t), helper.make_node("Mul", ["w", "nh"], ["y"])]
    graph = helper.make_graph(nodes, "hf_rms", [helper.make_tensor_value_info("x", t, ["b", 64])],
                              [helper.make_tensor_value_info("y", t, ["b", 64])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_half_rms_norm_as_hugging_face_writes_it_is_one_operator_with_the_same_bits(tmp_path, ort_run):
    """FuseRMSNorm takes the casts and the weight in; the interpreter gives the graph's bits.
    onnxruntime gives the original's bits from RMSNormalization (its CPU provider rounds once after
    the weight in both: it runs the float16 Mul in float32 and drops the Cast pair around it), and
    from the decomposed form within one float16 step on a few elements (it divides by the root
    where the original multiplies by its reciprocal: float32 rounding)."""
    import passhost
    from passhost import transform

    src = tmp_path / "hf.onnx"
    onnx.save(_hf_half_rms_graph(), str(src))
    mod = ir.load(str(src))
    with transform.PassContext(opt_level=3):
        fused = passhost.passes.get("FuseRMSNorm")(mod)
    body = fused["main"].body
    assert isinstance(body, ir.Call) and body.op.name == "nn.rms_norm" and body.args[0] is fused["main"].params[0]
    a = RNG.uniform(-3, 3, (1024, 64)).astype("float16")
    np.testing.assert_array_equal(ir.evaluate(fused, a), ir.evaluate(mod, a))
    want = ort_run(str(src), {"x": a})[0]
    for opset, kinds in ((18, ["Cast", "Pow", "ReduceMean", "Add", "Sqrt", "Div", "Cast", "Mul"]),
                         (23, ["RMSNormalization"])):
        ir.save(fused, str(tmp_path / "out.onnx"), opset=opset)
        assert [n.op_type for n in onnx.load(str(tmp_path / "out.onnx")).graph.node] == kinds
        got = ort_run(str(tmp_path / "out.onnx"), {"x": a})[0]
        if opset >= 23:
            np.testing.assert_array_equal(got, want)
        else:
            off = got != want  # (one float16 step of the normalised value, times the weight: |w| < 2)
            assert off.mean() < 1e-3 and (np.abs(got - want)[off] <= 2 * np.spacing(np.abs(want[off]))).all()


def _function_body(node, model) -> onnx.ModelProto:
    """``model`` with its one ``node`` replaced by a call of the operator's function body from
    its ONNX schema (the definition), as a local function of a domain of its own."""
    from onnx import defs, helper

    g = model.graph
    types = [next(v for v in list(g.input) + [helper.make_tensor_value_info(i.name, i.data_type, i.dims)
                                               for i in g.initializer] if v.name == name).type.SerializeToString()
             for name in node.input]
    fn = onnx.FunctionProto()
    fn.ParseFromString(defs.get_schema(node.op_type, 23).get_context_dependent_function(node.SerializeToString(), types))
    fn.domain = "body"
    call = helper.make_node(node.op_type, node.input, node.output, domain="body")
    graph = helper.make_graph([call], "body", g.input, g.output, g.initializer)
    return helper.make_model(graph, functions=[fn], opset_imports=[helper.make_opsetid("", 23),
                                                                   helper.make_opsetid("body", 1)])


def test_rms_normalization_imports_as_the_operator_with_the_function_bodys_numbers(tmp_path, ort_run):
    """ONNX's RMSNormalization (opset 23) of float32 and float16 data is one nn.rms_norm, which
    computes its schema's function body (in float16: the normalised value rounded before the
    scale), run by onnx's reference evaluator."""
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator

    for dtype, t in (("float32", TensorProto.FLOAT), ("float16", TensorProto.FLOAT16)):
        w = numpy_helper.from_array(RNG.uniform(-2, 2, 64).astype(dtype), "w")
        node = helper.make_node("RMSNormalization", ["x", "w"], ["y"], axis=-1, epsilon=1e-6)
        graph = helper.make_graph([node], "rms", [helper.make_tensor_value_info("x", t, ["b", 64])],
                                  [helper.make_tensor_value_info("y", t, ["b", 64])], [w])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
        path = tmp_path / f"rms_{dtype}.onnx"
        onnx.save(model, str(path))
        mod = ir.load(str(path))
        assert mod["main"].body.op.name == "nn.rms_norm" and mod["main"].body.checked_type.dtype == dtype
        a = RNG.uniform(-3, 3, (256, 64)).astype(dtype)
        got = ir.evaluate(mod, a)
        want = ReferenceEvaluator(_function_body(node, model)).run(None, {"x": a})[0]
        # (the body divides where nn.rms_norm multiplies by the reciprocal: float32 rounding, which
        # shows in float16 on a few elements only, one step of the normalised value, times |w| < 2)
        if dtype == "float32":
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        else:
            off = got != want
            assert off.mean() < 1e-3 and (np.abs(got - want)[off] <= 2 * np.spacing(np.abs(want[off]))).all()
        if dtype == "float16":  # onnxruntime's kernel rounds once after the scale: one step from it
            ort = ort_run(str(path), {"x": a})[0]
            assert (np.abs(got - ort) <= 2 * np.spacing(np.abs(ort))).all() and (got != ort).mean() > 0.1


def test_heads_stay_in_3d_around_rotary_and_attention(tmp_path, ort_run):
    """The exporters' Reshape/Transpose to (batch, heads, seq, head) and back go: RotaryEmbedding
    and Attention take (batch, seq, heads * head) with num_heads / q_num_heads, kv_num_heads."""
    x = ir.var("x", shape=("b", "s", 64))
    pk, pv = ir.var("pk", shape=("b", KV, "p", D)), ir.var("pv", shape=("b", KV, "p", D))
    c, sn = ir.var("c", shape=("b", "s", D // 2)), ir.var("sn", shape=("b", "s", D // 2))
    m = ir.var("m", shape=("b", 1, "s", "p + s"))

    def heads(w, h):
        y = ir.nn.dense(x, ir.const(_f32(h * D, 64)))
        return ir.transpose(ir.reshape(y, ("b", "s", h, D)), (0, 2, 1, 3))

    q = ir.nn.rotary_embedding(heads("q", H), c, sn)
    k = ir.concatenate([pk, ir.nn.rotary_embedding(heads("k", KV), c, sn)], axis=2)
    v = ir.concatenate([pv, heads("v", KV)], axis=2)
    att = ir.nn.attention(q, k, v, m, scale=0.25)
    out = ir.reshape(ir.transpose(att, (0, 2, 1, 3)), ("b", "s", H * D))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x, pk, pv, c, sn, m], ir.Tuple([out, k, v]))))
    path = tmp_path / "m.onnx"
    ir.save(mod, str(path), opset=23)
    model = onnx.load(str(path))
    kinds = [n.op_type for n in model.graph.node]
    assert "Transpose" not in kinds and "Concat" not in kinds and kinds.count("Reshape") <= 1, kinds  # (the output's)
    [att_node] = [n for n in model.graph.node if n.op_type == "Attention"]
    assert {a.name: a.i for a in att_node.attribute if a.name.endswith("heads")} == {"q_num_heads": H, "kv_num_heads": KV}
    feeds = dict(x=_f32(B, L, 64), pk=_f32(B, KV, P, D), pv=_f32(B, KV, P, D), c=_f32(B, L, D // 2),
                 sn=_f32(B, L, D // 2), m=np.zeros((B, 1, L, P + L), "float32"))
    for g, w in zip(ort_run(str(path), feeds), ir.evaluate(mod, *feeds.values())):  # (64-long sums)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("opset", [18, 23])
def test_attention_without_the_guard_writes_no_guard_below_23(tmp_path, ort_run, opset):
    q, k, v, m = (ir.var("q", shape=(1, 2, 3, 8)), ir.var("k", shape=(1, 2, 5, 8)), ir.var("v", shape=(1, 2, 5, 8)),
                  ir.var("m", shape=(1, 1, 3, 5)))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function(
        [q, k, v, m], ir.nn.attention(q, k, v, m, scale=1.0, zero_masked_rows=False))))
    path = tmp_path / "m.onnx"
    ir.save(mod, str(path), opset=opset)
    kinds = [n.op_type for n in onnx.load(str(path)).graph.node]
    assert "IsNaN" not in kinds and "Mul" not in kinds, kinds  # (no guard; a scale of 1 multiplies nothing)
    feeds = {"q": _f32(1, 2, 3, 8), "k": _f32(1, 2, 5, 8), "v": _f32(1, 2, 5, 8), "m": _f32(1, 1, 3, 5)}
    np.testing.assert_allclose(ort_run(str(path), feeds)[0], ir.evaluate(mod, *feeds.values()), rtol=1e-5, atol=1e-5)


def _half_attention(dt="float16", d=16, scale=None, mask="bool", vdt=None):
    """One half-precision nn.attention (6 query heads over 2 key-value heads; a row masked
    whole) and random feeds; ``vdt`` float32: float32 values, as PyTorch exports float16 SDPA."""
    vdt = vdt or dt
    q, k = ir.var("q", shape=(2, 6, 3, d), dtype=dt), ir.var("k", shape=(2, 2, 5, d), dtype=dt)
    v = ir.var("v", shape=(2, 2, 5, d), dtype=vdt)
    feeds = {"q": RNG.uniform(-3, 3, (2, 6, 3, d)).astype(dt), "k": RNG.uniform(-3, 3, (2, 2, 5, d)).astype(dt),
             "v": RNG.uniform(-3, 3, (2, 2, 5, d)).astype(vdt)}
    if mask == "bool":
        m = ir.var("m", shape=(2, 1, 3, 5), dtype="bool")
        feeds["m"] = RNG.random((2, 1, 3, 5)) < 0.6
        feeds["m"][0, 0, 1] = False
    else:
        m = ir.var("m", shape=(2, 1, 3, 5), dtype=dt)
        feeds["m"] = np.where(RNG.random((2, 1, 3, 5)) < 0.3, -np.inf, RNG.uniform(-1, 1, (2, 1, 3, 5))).astype(dt)
    fn = ir.Function([q, k, v, m], ir.nn.attention(q, k, v, m, scale=scale))
    return ir.infer_type(ir.IRModule.from_expr(fn)), feeds


@pytest.mark.parametrize("opset", [18, 23])
@pytest.mark.parametrize("case", ["bool", "float_mask", "scale", "head8", "float32_values"])
def test_half_attention_gives_onnxs_definition_bit_for_bit(tmp_path, ort_run, opset, case):
    """A float16 nn.attention is written as Attention(softmax_precision=1) from opset 23 and as
    Mul, MatMul, Add, Cast, Softmax, Cast, MatMul below it (float32 values under float16 query
    and key: below and from 23, Attention's output having the query's type); onnx's reference
    evaluator gives passhost's bits from every form, and from ONNX's function body of the
    Attention. onnxruntime's CPU provider rounds elsewhere: it applies the scale as its product's
    alpha (not sqrt(scale) on the query and the key, each rounded) and, with its optimisations
    off too, runs float16 nodes it has no kernel for in float32 and drops the Cast pairs between
    them: within a few float16 steps of the output's scale."""
    from onnx.reference import ReferenceEvaluator

    kw = {"bool": {}, "float_mask": dict(mask="float"), "scale": dict(scale=0.3), "head8": dict(d=8),
          "float32_values": dict(vdt="float32")}[case]
    mod, feeds = _half_attention(**kw)
    want = ir.evaluate(mod, *feeds.values())
    assert want.dtype == np.dtype(kw.get("vdt", "float16")) and np.isfinite(want).all()
    path = tmp_path / "m.onnx"
    ir.save(mod, str(path), opset=opset)
    model = onnx.load(str(path))
    kinds = [n.op_type for n in model.graph.node]
    if opset >= 23 and case != "float32_values":
        [node] = model.graph.node
        assert kinds == ["Attention"] and {a.name: a.i for a in node.attribute}["softmax_precision"] == 1
        body = _function_body(node, model)
        call = body.graph.node[0]
        call.input.extend([""] * (len(body.functions[0].input) - len(call.input)))
        del body.functions[0].output[1:]  # (Y alone: the body writes no present_key without a past)
        with np.errstate(invalid="ignore"):  # (the row masked whole: the body's softmax makes NaN, then zeroes it)
            np.testing.assert_array_equal(ReferenceEvaluator(body).run(None, feeds)[0], want)
    else:
        assert "Attention" not in kinds and kinds.count("Cast") == (1 if case == "float32_values" else 2), kinds
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(ReferenceEvaluator(model).run(None, feeds)[0], want)
    got = ort_run(str(path), feeds)[0]
    np.testing.assert_allclose(got.astype("float32"), want.astype("float32"), rtol=0, atol=4 * 2.0 ** -10 * 3)


# -- the fused forms imported: onnxruntime's contrib operators and ONNX's RotaryEmbedding --------
def _one_node_model(node, inputs: dict, inits: dict, opset: int):
    """A model of ``node`` alone: ``inputs`` name -> (elem type, shape), ``inits`` name -> array."""
    from onnx import helper, numpy_helper

    graph = helper.make_graph([node], "one", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
                              [helper.make_empty_tensor_value_info(o) for o in node.output if o],
                              [numpy_helper.from_array(v, n) for n, v in inits.items()])
    imports = [helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=imports)


def _imported(tmp_path, model, name):
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path, ir.load(str(path))


_ATTENTION_FORMS = {  # name -> (attributes, dtype, 3-D, mask, past, imports as nn.attention)
    "gqa_bool_mask": (dict(), "float32", False, "bool", False, True),
    "3d_causal_cache": (dict(is_causal=1, q_num_heads=6, kv_num_heads=2), "float32", True, None, True, True),
    "causal_float_mask_scaled": (dict(is_causal=1, scale=0.3), "float32", False, "float", False, True),
    "half_softmax_float32": (dict(softmax_precision=1), "float16", False, "float", True, True),
    "softcap": (dict(softcap=2.0), "float32", False, "bool", False, False),
    "half_softmax_in_half": (dict(), "float16", False, "bool", False, False),
}


@pytest.mark.parametrize("form", sorted(_ATTENTION_FORMS))
def test_onnx_attention_imports_as_nn_attention_where_it_maps(tmp_path, ort_run, form):
    """ONNX's Attention is nn.attention where that is its definition (GQA, a bool or float mask,
    is_causal with a cache, 3-D heads, a scale, float16 with the softmax in float32) and its
    function body otherwise (a softcap; float16 with the softmax in float16): onnx's reference
    evaluator gives passhost's numbers either way (float16 as nn.attention: bit for bit; the body's
    float16 Softmax, which passhost rounds once and numpy at each step: a step), and so does onnxruntime
    (float16: a few steps, see the test above); the export writes Attention again."""
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    attrs, dt, three, mask, past, direct = _ATTENTION_FORMS[form]
    t = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16}[dt]
    b, hq, hk, lq, lp, d = 2, 6, 2, 3, 4, 8
    total = lq + lp if past else lq
    shapes = {"Q": (b, lq, hq * d) if three else (b, hq, lq, d), "K": (b, lq, hk * d) if three else (b, hk, lq, d)}
    shapes["V"] = shapes["K"]
    feeds = {n: RNG.uniform(-2, 2, s).astype(dt) for n, s in shapes.items()}
    inputs = {n: (t, s) for n, s in shapes.items()}
    names = ["Q", "K", "V", ""]
    if mask:
        names[3] = "M"
        feeds["M"] = RNG.random((b, 1, lq, total)) < 0.7 if mask == "bool" else \
            np.where(RNG.random((b, 1, lq, total)) < 0.3, -np.inf, RNG.uniform(-1, 1, (b, 1, lq, total))).astype(dt)
        inputs["M"] = (TensorProto.BOOL if mask == "bool" else t, feeds["M"].shape)
    outputs = ["Y"]
    if past:
        names += ["PK", "PV"]
        for n in ("PK", "PV"):
            feeds[n] = RNG.uniform(-2, 2, (b, hk, lp, d)).astype(dt)
            inputs[n] = (t, (b, hk, lp, d))
        outputs += ["present_key", "present_value"]
    node = helper.make_node("Attention", names, outputs, **attrs)
    path, mod = _imported(tmp_path, _one_node_model(node, inputs, {}, 23), form)
    assert _has_op(mod, "nn.attention") == direct
    got = ir.evaluate(mod, *feeds.values())
    got = list(got) if isinstance(got, tuple) else [got]
    with np.errstate(invalid="ignore"):
        want = ReferenceEvaluator(str(path)).run(None, feeds)
    for g, w in zip(got, want):
        if dt == "float16" and direct:
            np.testing.assert_array_equal(g, w)
        elif dt == "float16":  # (a float16 Softmax in the body: passhost rounds it once, numpy at each step)
            np.testing.assert_allclose(g.astype("float32"), w.astype("float32"), rtol=0, atol=2 * 2.0 ** -10 * 2)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    for g, o in zip(got, ort_run(str(path), feeds)):
        tol = (4 * 2.0 ** -10 * 2, 0) if dt == "float16" else (1e-5, 1e-5)
        np.testing.assert_allclose(o.astype("float32"), g.astype("float32"), rtol=tol[1], atol=tol[0])
    if direct:
        ir.save(mod, str(tmp_path / "out.onnx"), opset=23)
        assert "Attention" in {n.op_type for n in onnx.load(str(tmp_path / "out.onnx")).graph.node}


def _has_op(mod, name: str) -> bool:
    found = []
    ir.post_order_visit(mod["main"], lambda e: found.append(e) if isinstance(e, ir.Call) and isinstance(e.op, ir.Op)
                        and e.op.name == name else None)
    return bool(found)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_onnxruntimes_rms_norms_import_as_nn_rms_norm_with_its_numbers(tmp_path, ort_run, dtype):
    """SimplifiedLayerNormalization and com.microsoft.SkipSimplifiedLayerNormalization (its sum
    output too): one rounding in a half type, as onnxruntime's kernels."""
    from onnx import helper

    t = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    rng = np.random.default_rng(3)
    g = rng.uniform(-2, 2, 64).astype(dtype)
    a, r = (rng.uniform(-3, 3, (2, 9, 64)).astype(dtype) for _ in range(2))
    cases = [(helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], epsilon=1e-6, axis=-1), {"x": a}),
             (helper.make_node("SkipSimplifiedLayerNormalization", ["x", "r", "g"], ["y", "", "", "s"],
                               domain="com.microsoft", epsilon=1e-6), {"x": a, "r": r})]
    for node, feeds in cases:
        model = _one_node_model(node, {k: (t, ["b", "s", 64]) for k in feeds}, {"g": g}, 18)
        path, mod = _imported(tmp_path, model, node.op_type)
        assert "nn.rms_norm" in mod.astext()
        got, want = ir.evaluate(mod, *feeds.values()), ort_run(str(path), feeds)
        for gv, wv in zip(got if isinstance(got, tuple) else (got,), want):
            assert gv.dtype == wv.dtype
            if dtype == "float32":  # (onnxruntime sums the squares in another order)
                np.testing.assert_allclose(gv, wv, rtol=1e-6, atol=1e-6)
                continue
            off = gv != wv
            assert off.mean() < 1e-3 and (np.abs(gv - wv)[off] <= np.spacing(np.abs(wv[off]))).all()


@pytest.mark.parametrize("form", ["ms_4d", "ms_4d_interleaved_partial", "onnx_4d_positions", "onnx_3d_tables"])
def test_rotary_embeddings_import_as_nn_rotary_embedding_with_onnxruntimes_numbers(tmp_path, ort_run, form):
    from onnx import TensorProto, helper

    rng = np.random.default_rng(4)
    b, h, s, d, r = 2, 4, 5, 16, (8 if "partial" in form else 16)
    pos = rng.integers(0, 32, (b, s)).astype(np.int64)
    kw = dict(interleaved=int("interleaved" in form))
    if "partial" in form:
        kw.update(rotary_embedding_dim=r, num_heads=h)
    f = TensorProto.FLOAT
    if form.startswith("ms"):
        node = helper.make_node("RotaryEmbedding", ["x", "pos", "c", "sn"], ["y"], domain="com.microsoft", **kw)
        inits = {"c": rng.standard_normal((32, r // 2)).astype("float32"),
                 "sn": rng.standard_normal((32, r // 2)).astype("float32")}
        inputs, feeds = {"x": (f, [b, h, s, d]), "pos": (TensorProto.INT64, [b, s])}, {"x": _f32(b, h, s, d), "pos": pos}
    elif form == "onnx_4d_positions":
        node = helper.make_node("RotaryEmbedding", ["x", "c", "sn", "pos"], ["y"], **kw)
        inits = {"c": rng.standard_normal((32, d // 2)).astype("float32"),
                 "sn": rng.standard_normal((32, d // 2)).astype("float32")}
        inputs, feeds = {"x": (f, [b, h, s, d]), "pos": (TensorProto.INT64, [b, s])}, {"x": _f32(b, h, s, d), "pos": pos}
    else:
        node = helper.make_node("RotaryEmbedding", ["x", "c", "sn"], ["y"], num_heads=h, **kw)
        inits = {}
        inputs = {"x": (f, [b, s, h * d]), "c": (f, [b, s, d // 2]), "sn": (f, [b, s, d // 2])}
        feeds = {"x": _f32(b, s, h * d), "c": _f32(b, s, d // 2), "sn": _f32(b, s, d // 2)}
    model = _one_node_model(node, inputs, inits, 23)
    path, mod = _imported(tmp_path, model, form)
    assert "nn.rotary_embedding" in mod.astext()
    np.testing.assert_allclose(ir.evaluate(mod, *feeds.values()), ort_run(str(path), feeds)[0], rtol=1e-6, atol=1e-6)


def test_onnxruntimes_optimized_llama_imports_and_generates_its_tokens(tmp_path):
    """The output of onnxruntime's transformer optimizer (SimplifiedLayerNormalization,
    SkipSimplifiedLayerNormalization, com.microsoft.RotaryEmbedding) through -O3: the tokens."""
    import importlib.util
    import json
    from pathlib import Path

    import passhost
    from passhost import transform

    pytest.importorskip("onnxruntime")
    from onnxruntime.transformers.optimizer import optimize_model

    here = Path(__file__).parent
    spec = importlib.util.spec_from_file_location("llm_generate", here / "llm_generate.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    llama = here / "data" / "llm" / "llama"
    src, dst = tmp_path / "ort.onnx", tmp_path / "out.onnx"
    optimize_model(str(llama / "model.onnx"), model_type="gpt2", num_heads=4, hidden_size=64,
                   opt_level=0).save_model_to_file(str(src))
    kinds = {n.op_type for n in onnx.load(str(src)).graph.node}
    assert {"SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization", "RotaryEmbedding"} <= kinds
    mod = ir.load(str(src))
    with transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(mod)
    ir.save(mod, str(dst), opset=23)
    ids = np.asarray(json.loads((llama.parent / "expected.json").read_text())["llama"]["prompts_batch2"], np.int64)
    want, want_logits = gen.greedy_generate(src, ids, 8)
    got, logits = gen.greedy_generate(dst, ids, 8)
    np.testing.assert_array_equal(got, want)
    for g, w in zip(logits, want_logits):
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-4)
