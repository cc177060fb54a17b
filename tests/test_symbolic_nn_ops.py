"""Symbolic dimensions through the relations of the neural-network operators: convolutions,
dense and matrix products, pooling, padding, normalisations, quantized operators, resize and
grid sampling. Each case is a realistic one (a dynamic batch, image size or sequence
length); a mismatch that holds for every binding of the size variables is still an error
naming both dimensions, anything that may agree is accepted (see ``passhost.ir.dims``).
"""
from __future__ import annotations

import pytest

from passhost import ir
from passhost.errors import IRError, TypeInferenceError


def typed(params: str, body: str) -> ir.Type:
    """The type of ``body`` in ``fn (params) { body }``."""
    fn = ir.infer_type(ir.parse_expr(f"fn ({params}) {{ {body} }}"))
    return fn.body.checked_type


def T(shape, dtype: str = "float32") -> ir.TensorType:
    return ir.TensorType(shape, dtype)


IMG = "%x: Tensor[(batch, 3, h, w), float32]"


# -- convolutions --------------------------------------------------------------------------
def test_conv2d_strided_on_a_symbolic_image():
    t = typed(IMG + ", %w: Tensor[(64, 3, 3, 3), float32]",
              "nn.conv2d(%x, %w, strides=[2, 2], padding=[1, 1, 1, 1], channels=64, kernel_size=[3, 3])")
    # (h + 1 + 1 - 2 - 1) // 2 + 1, in canonical form
    assert t == T(("batch", 64, "floordiv(h - 1, 2) + 1", "floordiv(w - 1, 2) + 1"))
    assert str(t) == "Tensor[(batch, 64, floordiv(h + 1, 2), floordiv(w + 1, 2)), float32]"


def test_conv2d_takes_the_static_channels_and_nhwc():
    t = typed("%x: Tensor[(batch, h, w, c), float32], %w: Tensor[(3, 3, c, o), float32]",
              "nn.conv2d(%x, %w, padding=[1, 1, 1, 1], channels=16, kernel_size=[3, 3], "
              "data_layout=\"NHWC\", kernel_layout=\"HWIO\")")
    assert t == T(("batch", "h", "w", 16))  # channels=16 may be o: it is, and it is static


def test_conv2d_provable_channel_mismatch_names_both():
    with pytest.raises(TypeInferenceError, match=r"data has c input channels but the weight expects c \+ 1"):
        typed("%x: Tensor[(batch, c, h, w), float32], %w: Tensor[(8, c + 1, 3, 3), float32]", "nn.conv2d(%x, %w)")
    with pytest.raises(TypeInferenceError, match=r"channels=8 but the weight .* has 16 output channels"):
        typed(IMG + ", %w: Tensor[(16, 3, 3, 3), float32]", "nn.conv2d(%x, %w, channels=8)")


def test_conv2d_transpose_doubles_a_symbolic_size():
    t = typed("%x: Tensor[(batch, 8, h, w), float32], %w: Tensor[(8, 3, 3, 3), float32]",
              "nn.conv2d_transpose(%x, %w, strides=[2, 2], padding=[1, 1, 1, 1], output_padding=[1, 1])")
    assert t == T(("batch", 3, "2*h", "2*w"))
    with pytest.raises(TypeInferenceError, match=r"data has c input channels but the weight .* has c \+ 2"):
        typed("%x: Tensor[(batch, c, h, w), float32], %w: Tensor[(c + 2, 3, 3, 3), float32]",
              "nn.conv2d_transpose(%x, %w)")


def test_conv3d_transpose_on_a_symbolic_volume():
    t = typed("%x: Tensor[(batch, 8, d, h, w), float32], %w: Tensor[(8, 4, 2, 2, 2), float32]",
              "nn.conv3d_transpose(%x, %w, strides=[2, 2, 2], padding=[0, 0, 0])")
    assert t == T(("batch", 4, "2*d", "2*h", "2*w"))
    # two groups of c channels each; the weight's channels are provably not 2*c
    with pytest.raises(TypeInferenceError, match="does not fit the data"):
        typed("%x: Tensor[(batch, 2*c, d, h, w), float32], %w: Tensor[(2*c + 1, 4, 2, 2, 2), float32]",
              "nn.conv3d_transpose(%x, %w, groups=2)")


def test_deformable_conv2d_with_a_symbolic_batch_and_image():
    offset = "%o: Tensor[(batch, 18, h, w), float32]"
    t = typed("%x: Tensor[(batch, 4, h, w), float32], " + offset + ", %w: Tensor[(8, 4, 3, 3), float32]",
              "nn.deformable_conv2d(%x, %o, %w, padding=[1, 1, 1, 1], kernel_size=[3, 3], channels=8)")
    assert t == T(("batch", 8, "h", "w"))
    t = typed("%x: Tensor[(batch, 4, h, w), float32], " + offset + ", %w: Tensor[(8, 4, 3, 3), float32], "
              "%m: Tensor[(batch, 9, h, w), float32]",
              "nn.modulated_deformable_conv2d(%x, %o, %w, %m, padding=[1, 1, 1, 1])")
    assert t == T(("batch", 8, "h", "w"))
    want = r"the offset must be float32\[batch, 18, h, w\].*got Tensor\[\(batch, 18, h \+ 1, w\)"
    with pytest.raises(TypeInferenceError, match=want):
        typed("%x: Tensor[(batch, 4, h, w), float32], %o: Tensor[(batch, 18, h + 1, w), float32], "
              "%w: Tensor[(8, 4, 3, 3), float32]", "nn.deformable_conv2d(%x, %o, %w, padding=[1, 1, 1, 1])")


# -- dense and matrix products ----------------------------------------------------------------
def test_dense_over_batch_and_sequence():
    t = typed("%x: Tensor[(batch, seq, 768), float32], %w: Tensor[(3072, 768), float32]", "nn.dense(%x, %w)")
    assert t == T(("batch", "seq", 3072))
    t = typed("%x: Tensor[(batch, k), float32], %w: Tensor[(n, k), float32]", "nn.dense(%x, %w, units=10)")
    assert t == T(("batch", 10))  # units=10 may be n: the static one is the answer
    with pytest.raises(TypeInferenceError, match=r"data .* has k input features but the weight .*\(units, k\)"):
        typed("%x: Tensor[(batch, k), float32], %w: Tensor[(10, k + 1), float32]", "nn.dense(%x, %w)")


def test_matmul_and_batch_matmul():
    t = typed("%a: Tensor[(batch, seq, k), float32], %b: Tensor[(k, n), float32]", "nn.matmul(%a, %b)")
    assert t == T(("batch", "seq", "n"))
    # attention scores: one query batch broadcast against the heads
    t = typed("%q: Tensor[(1, seq, 64), float32], %k: Tensor[(heads, seq, 64), float32]",
              "nn.batch_matmul(%q, %k, transpose_b=True)")
    assert t == T(("heads", "seq", "seq"))
    # two batch sizes either of which may be 1: the result's batch is unknown
    t = typed("%x: Tensor[(b1, m, k), float32], %y: Tensor[(b2, k, n), float32]", "nn.batch_matmul(%x, %y)")
    assert t == T(("?", "m", "n"))


def test_matrix_products_provable_mismatch():
    with pytest.raises(TypeInferenceError, match=r"has k reduction elements but tensor_b .* has k \+ 1"):
        typed("%a: Tensor[(m, k), float32], %b: Tensor[(k + 1, n), float32]", "nn.matmul(%a, %b)")
    with pytest.raises(TypeInferenceError, match=r"disagree on the reduction size \(k vs 2\*k"):
        typed("%x: Tensor[(b, m, k), float32], %y: Tensor[(b, 2*k + 1, n), float32]", "nn.batch_matmul(%x, %y)")
    with pytest.raises(TypeInferenceError, match="batch sizes .* differ and neither is 1"):
        typed("%x: Tensor[(b + 2, m, k), float32], %y: Tensor[(b + 3, k, n), float32]", "nn.batch_matmul(%x, %y)")


# -- pooling -------------------------------------------------------------------------------------
def test_pooling_gives_the_expression_not_unknown():
    t = typed("%x: Tensor[(batch, 64, h, w), float32]",
              "nn.max_pool2d(%x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1])")
    assert t == T(("batch", 64, "floordiv(h + 1, 2)", "floordiv(w + 1, 2)"))
    t = typed("%x: Tensor[(batch, 64, h, w), float32]",
              "nn.avg_pool2d(%x, pool_size=[2, 2], strides=[2, 2], ceil_mode=True)")
    assert t == T(("batch", 64, "floordiv(h - 1, 2) + 1", "floordiv(w - 1, 2) + 1"))
    t = typed("%x: Tensor[(batch, c, h, w), float32]", "nn.global_avg_pool2d(%x)")
    assert t == T(("batch", "c", 1, 1))
    t = typed("%x: Tensor[(batch, c, h, w), float32]", "nn.adaptive_avg_pool2d(%x, output_size=[7, 7])")
    assert t == T(("batch", "c", 7, 7))


def test_pooling_that_never_fits_is_still_an_error():
    # height 1 (static) cannot hold a 3-row window whatever w is
    with pytest.raises(TypeInferenceError, match="does not fit the padded input"):
        typed("%x: Tensor[(batch, 3, 1, w), float32]", "nn.max_pool2d(%x, pool_size=[3, 3])")


def test_max_pool_with_argmax_and_unpool():
    t = typed("%x: Tensor[(batch, c, h, w), float32]",
              "nn.max_pool2d_with_argmax(%x, pool_size=[2, 2], strides=[2, 2])")
    pooled = ("batch", "c", "floordiv(h, 2)", "floordiv(w, 2)")
    assert t == ir.TupleType([T(pooled), T(pooled, "int64")])
    t = typed("%x: Tensor[(1, 3, h, w), float32], %i: Tensor[(1, 3, h, w), int64]",
              "nn.max_unpool2d(%x, %i, output_size=[1, 3, 8, 8], pool_size=[2, 2], strides=[2, 2])")
    assert t == T((1, 3, 8, 8))
    with pytest.raises(TypeInferenceError, match="indices integers of its shape"):
        typed("%x: Tensor[(1, 3, h, w), float32], %i: Tensor[(1, 3, h, w + 1), int64]",
              "nn.max_unpool2d(%x, %i, output_size=[1, 3, 8, 8], pool_size=[2, 2], strides=[2, 2])")


# -- padding ---------------------------------------------------------------------------------------
def test_pad_and_crop_a_symbolic_image():
    t = typed(IMG + ", %v: float32", "nn.pad(%x, %v, pad_width=[[0, 0], [0, 0], [1, 1], [2, 2]])")
    assert t == T(("batch", 3, "h + 2", "w + 4"))
    t = typed(IMG + ", %v: float32", "nn.pad(%x, %v, pad_width=[[0, 0], [0, 0], [-1, 0], [1, 1]], pad_mode=\"edge\")")
    assert t == T(("batch", 3, "h - 1", "w + 2"))
    with pytest.raises(TypeInferenceError, match="leaves a negative size"):
        typed(IMG + ", %v: float32", "nn.pad(%x, %v, pad_width=[[0, 0], [-2, -2], [0, 0], [0, 0]])")


# -- normalisations and per-channel parameters --------------------------------------------------
def test_per_channel_parameters_that_may_agree_are_accepted():
    t = typed("%x: Tensor[(batch, c, h, w), float32], %b: Tensor[(64), float32]", "nn.bias_add(%x, %b)")
    assert t == T(("batch", "c", "h", "w"))
    t = typed("%x: Tensor[(batch, c, h, w), float32], %g: Tensor[(c), float32], %b: Tensor[(c), float32], "
              "%m: Tensor[(c), float32], %v: Tensor[(c), float32]", "nn.batch_norm(%x, %g, %b, %m, %v)")
    assert t == ir.TupleType([T(("batch", "c", "h", "w")), T(("c",)), T(("c",))])
    t = typed("%x: Tensor[(batch, seq, 768), float32], %g: Tensor[(768), float32], %b: Tensor[(768), float32]",
              "nn.layer_norm(%x, %g, %b)")
    assert t == T(("batch", "seq", 768))


def test_per_channel_parameter_provable_mismatch():
    with pytest.raises(TypeInferenceError, match=r"the bias has type Tensor\[\(c \+ 1\), float32\] but the data .* "
                                                 r"has c elements on axis 1"):
        typed("%x: Tensor[(batch, c, h, w), float32], %b: Tensor[(c + 1), float32]", "nn.bias_add(%x, %b)")
    with pytest.raises(TypeInferenceError, match="alpha has type"):
        typed("%x: Tensor[(batch, 3, h, w), float32], %a: Tensor[(4), float32]", "nn.prelu(%x, %a)")


# -- quantized operators ------------------------------------------------------------------------
def test_qnn_conv2d_and_dense():
    t = typed("%x: Tensor[(batch, 3, h, w), uint8], %w: Tensor[(8, 3, 3, 3), int8], %zx: uint8, %zw: int8, "
              "%sx: float32, %sw: float32", "qnn.conv2d(%x, %w, %zx, %zw, %sx, %sw, channels=8, kernel_size=[3, 3])")
    assert t == T(("batch", 8, "h - 2", "w - 2"), "int32")
    t = typed("%x: Tensor[(batch, 64), uint8], %w: Tensor[(units, 64), int8], %zx: uint8, "
              "%zw: Tensor[(10), int8], %sx: float32, %sw: float32",
              "qnn.dense(%x, %w, %zx, %zw, %sx, %sw, units=10)")
    assert t == T(("batch", 10), "int32")
    want = r"the weight must be \(units, k\) for data .*got Tensor\[\(10, k \+ 1\)"
    with pytest.raises(TypeInferenceError, match=want):
        typed("%x: Tensor[(batch, k), uint8], %w: Tensor[(10, k + 1), int8], %zx: uint8, %zw: int8, "
              "%sx: float32, %sw: float32", "qnn.dense(%x, %w, %zx, %zw, %sx, %sw)")


def test_qnn_per_channel_scales_on_symbolic_channels():
    t = typed("%x: Tensor[(batch, c), float32], %s: Tensor[(c), float32], %z: Tensor[(c), int8]",
              "qnn.quantize(%x, %s, %z, axis=1)")
    assert t == T(("batch", "c"), "int8")
    # (c + 1 may be 1: one scale for all; c + 2 is neither 1 nor c)
    t = typed("%x: Tensor[(batch, c), float32], %s: Tensor[(c + 1), float32], %z: int8",
              "qnn.quantize(%x, %s, %z, axis=1)")
    assert t == T(("batch", "c"), "int8")
    want = r"one value per slice of axis 1 \(c\), got Tensor\[\(c \+ 2\)"
    with pytest.raises(TypeInferenceError, match=want):
        typed("%x: Tensor[(batch, c), float32], %s: Tensor[(c + 2), float32], %z: int8",
              "qnn.quantize(%x, %s, %z, axis=1)")


# -- resize and grid sampling ---------------------------------------------------------------------
def test_resize2d_to_a_symbolic_size():
    text = "image.resize2d(%x, size=[2*h, 2*w], method=\"nearest_neighbor\")"
    t = typed(IMG, text)
    assert t == T(("batch", 3, "2*h", "2*w"))
    fn = ir.infer_type(ir.parse_expr(f"fn ({IMG}) {{ {text} }}"))
    assert "size=[2*h, 2*w]" in str(fn)
    assert ir.parse_expr(str(fn)).body.attrs.size == fn.body.attrs.size  # prints and reads back
    t = typed("%x: Tensor[(batch, h, w, 3), float32]", "image.resize2d(%x, size=[224, w], layout=\"NHWC\")")
    assert t == T(("batch", 224, "w", 3))


def test_resize2d_size_must_be_positive():
    for size in ("[0, 4]", "[-h, 4]"):
        with pytest.raises(IRError, match="attribute size must be two positive ints or dimensions"):
            typed(IMG, f"image.resize2d(%x, size={size})")


def test_grid_sample_output_follows_the_grid():
    t = typed("%x: Tensor[(batch, c, h, w), float32], %g: Tensor[(batch, 2, oh, ow), float32]",
              "image.grid_sample(%x, %g)")
    assert t == T(("batch", "c", "oh", "ow"))
    t = typed("%x: Tensor[(n, c, h, w), float32], %g: Tensor[(1, 2, oh, ow), float32]", "image.grid_sample(%x, %g)")
    assert t == T((1, "c", "oh", "ow"))  # n must be 1: the static one
    want = r"the grid Tensor\[\(batch \+ 1, 2, oh, ow\).*must be \(N, 2, \*out\)"
    with pytest.raises(TypeInferenceError, match=want):
        typed("%x: Tensor[(batch, c, h, w), float32], %g: Tensor[(batch + 1, 2, oh, ow), float32]",
              "image.grid_sample(%x, %g)")
