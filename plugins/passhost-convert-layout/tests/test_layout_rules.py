"""ConvertLayout's operator rules beyond TVM's own test cases (issue 37): which operators
follow a converted layout and which get their input transformed back, as TVM's
``FInferCorrectLayout`` functions decide, and the two known defects in
``../shared/repro`` (``expand_dims`` and ``mean`` after a converted conv)."""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir
from passhost.testing import check_pass
from passhost.transform import PassContext, Sequential

NHWC = {"nn.conv2d": ["NHWC", "default"]}
X = ir.TensorType((1, 4, 6, 6), "float32")
W = ir.TensorType((4, 4, 3, 3), "float32")


def _lt(e, src, dst):
    return ir.layout_transform(e, src, dst)


def _conv_nhwc(x, w, **kw):
    return ir.nn.conv2d(_lt(x, "NCHW", "NHWC"), _lt(w, "OIHW", "HWIO"), data_layout="NHWC", kernel_layout="HWIO",
                        **kw)


def _pass(desired=NHWC):
    return passhost.passes.ConvertLayout(desired_layouts=desired)


def _xw():
    return ir.var("x", X), ir.var("w", W)


def _values_kept(func, desired=NHWC, seed=0):
    mod = ir.infer_type(ir.IRModule.from_expr(func))
    rng = np.random.default_rng(seed)
    args = [rng.uniform(-1, 1, [int(d) for d in p.checked_type.shape]).astype("float32") for p in mod["main"].params]
    with PassContext(opt_level=3):
        out = Sequential([_pass(desired)])(mod)
    want, got = ir.evaluate(mod, *args), ir.evaluate(out, *args)
    for a, b in zip(want if isinstance(want, tuple) else [want], got if isinstance(got, tuple) else [got]):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
    return out


REPRO = {
    "convert_layout_expand_dims": (
        '#[version = "0.0.5"]\n'
        "def @main(%x: Tensor[(1, 4, 5, 6), float32], %w: Tensor[(4, 4, 1, 1), float32]) {\n"
        "  %0 = nn.conv2d(%x, %w, padding=[0, 0, 0, 0], channels=4, kernel_size=[1, 1]);\n"
        "  expand_dims(%0, axis=0)\n}\n"),
    "convert_layout_expand_mean": (
        '#[version = "0.0.5"]\n'
        "def @main(%x: Tensor[(1, 4, 5, 6), float32], %w: Tensor[(4, 4, 1, 1), float32]) {\n"
        "  %0 = nn.conv2d(%x, %w, padding=[0, 0, 0, 0], channels=4, kernel_size=[1, 1]);\n"
        "  %1 = expand_dims(%0, axis=4);\n"
        "  mean(%1, axis=[1, 2, 4], keepdims=True)\n}\n"),
}


@pytest.mark.parametrize("name", sorted(REPRO))
def test_shared_repro_rank_changing_consumers_read_the_original_layout(name):
    """``../shared/repro``: expand_dims (no layout rule in TVM) after a converted conv reads
    it transformed back, and the 5-D mean after it is left alone; the values are kept."""
    before = ir.parse(REPRO[name])["main"]
    x, w = before.params
    conv = ir.nn.conv2d(_lt(x, "NCHW", "NHWC"), _lt(w, "OIHW", "HWIO"), channels=4, kernel_size=(1, 1),
                        data_layout="NHWC", kernel_layout="HWIO")
    back = _lt(conv, "NHWC", "NCHW")
    if name.endswith("dims"):
        body = ir.expand_dims(back, axis=0)
    else:
        body = ir.mean(ir.expand_dims(back, axis=4), axis=[1, 2, 4], keepdims=True)
    check_pass(_pass(), before, ir.Function([x, w], body))
    _values_kept(before)


def test_a_tuple_get_item_of_a_literal_tuple_is_its_field_with_its_layout():
    """TVM's ForwardRewrite folds ``(y,).0`` into ``y``, so the layout flows through."""
    x, w = _xw()
    before = ir.Function([x, w], ir.nn.relu(ir.TupleGetItem(ir.Tuple([ir.nn.conv2d(x, w, padding=(1, 1))]), 0)))
    expected = ir.Function([x, w], _lt(ir.nn.relu(_conv_nhwc(x, w, padding=(1, 1))), "NHWC", "NCHW"))
    check_pass(_pass(), before, expected)


EXTRA = {"b": (4,), "a": (4,), "w2": (4, 4, 1, 1), "r": (3, 5)}


@pytest.mark.parametrize("build", [
    lambda y, v: ir.nn.softmax(y, axis=1),
    lambda y, v: ir.nn.bias_add(y, v["b"]),
    lambda y, v: ir.nn.prelu(y, v["a"]),
    lambda y, v: ir.nn.conv2d_transpose(y, v["w2"]),  # a convolution not in desired_layouts keeps its layouts
    lambda y, v: ir.vision.roi_pool(y, v["r"], 2, 1.0),
    lambda y, v: ir.nn.upsampling(y, 2, 2),  # NCHW to NHWC moves H and W
], ids=["softmax", "bias_add", "prelu", "conv2d_transpose", "roi_pool", "upsampling"])
def test_operators_without_a_tvm_rule_for_this_conversion_read_the_original_layout(build):
    x, w = _xw()
    v = {k: ir.var(k, shape=s) for k, s in EXTRA.items()}
    body = build(ir.nn.conv2d(x, w, padding=(1, 1)), v)
    params = [x, w] + [p for p in ir.free_vars(body) if p not in (x, w)]
    expected = build(_lt(_conv_nhwc(x, w, padding=(1, 1)), "NHWC", "NCHW"), v)
    check_pass(_pass(), ir.Function(params, body), ir.Function(params, expected))
    if "roi" not in ir.astext(body):
        _values_kept(ir.Function(params, body))


def test_upsampling_follows_a_layout_that_keeps_h_and_w_in_place():
    """TVM's UpsamplingInferCorrectLayout: NCHW to CNHW keeps H and W at 2 and 3."""
    x, w = _xw()
    before = ir.Function([x, w], ir.nn.upsampling(ir.nn.conv2d(x, w, padding=(1, 1)), 2, 2))
    conv = ir.nn.conv2d(_lt(x, "NCHW", "CNHW"), w, padding=(1, 1), data_layout="CNHW")
    expected = ir.Function([x, w], _lt(ir.nn.upsampling(conv, 2, 2, layout="CNHW"), "CNHW", "NCHW"))
    check_pass(_pass({"nn.conv2d": ["CNHW", "OIHW"]}), before, expected)
    _values_kept(before, {"nn.conv2d": ["CNHW", "OIHW"]})


def test_single_output_topk_and_strided_slice_with_a_symbolic_open_end():
    x, w = _xw()
    c = ir.nn.conv2d(x, w, padding=(1, 1))
    before = ir.Function([x, w], ir.topk(c, k=2, axis=1, ret_type="values"))
    expected = ir.Function([x, w], _lt(ir.topk(_conv_nhwc(x, w, padding=(1, 1)), k=2, axis=3, ret_type="values"),
                                       "NHWC", "NCHW"))
    check_pass(_pass(), before, expected)
    _values_kept(before)
    h = ir.size_var("h")
    xs = ir.var("x", shape=(1, 4, h, 6))
    before = ir.Function([xs, w], ir.strided_slice(ir.nn.conv2d(xs, w, padding=(1, 1)), begin=[0, 1], end=[2, 3]))
    expected = ir.Function([xs, w], ir.strided_slice(_lt(_conv_nhwc(xs, w, padding=(1, 1)), "NHWC", "NCHW"),
                                                     begin=[0, 1], end=[2, 3]))
    check_pass(_pass(), before, expected)  # H's open end is symbolic: TVM's rule needs a size, so back


def test_spans_survive_the_rewrite():
    x, w = _xw()
    c = ir.set_span(ir.nn.conv2d(x, w, padding=(1, 1)), ir.Span("model.onnx", name="Conv_0"))
    r = ir.set_span(ir.nn.relu(c), ir.Span("model.onnx", name="Relu_1"))
    out = _pass()(ir.infer_type(ir.IRModule.from_expr(ir.Function([x, w], r))))
    names = set()
    ir.post_order_visit(out["main"], lambda e: names.add(e.span.name) if e.span is not None else None)
    assert {"Conv_0", "Relu_1"} <= names


def test_the_rules_keep_the_numbers_of_every_new_operator():
    x, w = _xw()
    c = ir.nn.conv2d(x, w, padding=(1, 1))
    rois = ir.var("rois", shape=(3, 5))
    for body in [ir.slice_like(c, c, axes=[2, 3]), ir.nn.l2_normalize(c, 1e-3, axis=[1, 3]),
                 ir.strided_slice(c, begin=[0, 1], end=[1, -1, 5], strides=[1, 1, 2, 1]),
                 ir.strided_slice(c, begin=[1], end=[3], axes=[1]),
                 ir.TupleGetItem(ir.topk(c, k=2, axis=2), 1),
                 ir.nn.max_pool2d(ir.nn.relu(c), pool_size=(2, 2)),
                 ir.argmax(c, axis=[1], keepdims=False)]:
        _values_kept(ir.Function(list(ir.free_vars(body)), body))
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function([x, w, rois], ir.vision.roi_align(c, rois, 2, 1.0))))
    args = [np.random.default_rng(1).uniform(0, 5, [int(d) for d in p.checked_type.shape]).astype("float32")
            for p in mod["main"].params]
    args[2][:, 0] = 0
    with PassContext(opt_level=3):
        out = Sequential([_pass({"nn.conv2d": ["NHWC", "HWIO"], "vision.roi_align": ["NHWC", "default"]})])(mod)
    assert 'layout="NHWC"' in out.astext()
    np.testing.assert_allclose(ir.evaluate(out, *args), ir.evaluate(mod, *args), rtol=1e-5, atol=1e-5)
