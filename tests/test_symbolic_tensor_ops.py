"""Symbolic dimensions through the tensor operators (shape changes, indexing, creation,
scans, einsum, scatter, reductions, the DFT, element-wise ops, layouts, 3-D convolution):
realistic transformer and vision shapes, the errors that name both dimensions when they
provably differ, and shape attributes that hold dimensions (``reshape(%x, newshape=[batch,
seq, -1, 64])``): their types, their text round trip and the refusal of ``?``.

``tests/test_symbolic_ops.py`` checks every recorded call against its static answer; these
are the readable cases.
"""
from __future__ import annotations

import pytest

from passhost import ir
from passhost.errors import IRError, TypeInferenceError
from passhost.ir import dims
from passhost.ir.types import TensorType, TupleType

batch, seq, past = dims.size_var("batch"), dims.size_var("seq"), dims.size_var("past")
MAX = 2 ** 63 - 1


def T(shape, dtype="float32") -> TensorType:
    return TensorType(shape, dtype)


def var(name, shape, dtype="float32"):
    return ir.var(name, shape=shape, dtype=dtype)


def call(op, args, **attrs):
    return ir.Call(ir.Op.get(op), list(args), attrs)


def typed(expr):
    """The type inferred for ``expr`` (its free variables typed by their annotations)."""
    fn = ir.Function(ir.free_vars(expr), expr)
    return ir.infer_type(ir.IRModule.from_expr(fn))["main"].body.checked_type


def rel(op, types, **attrs):
    """``op``'s relation on ``types`` (no variables needed: tuple arguments, errors)."""
    c = call(op, [var(f"a{i}", (1,)) for i in range(len(types))], **attrs)
    return ir.Op.get(op).type_rel(list(types), c.attrs)


def round_trips(expr) -> str:
    """Print ``expr`` in a typed module, read it back: structurally equal. The text."""
    mod = ir.infer_type(ir.IRModule.from_expr(ir.Function(ir.free_vars(expr), expr)))
    text = ir.astext(mod)
    assert ir.structural_equal(ir.parse(text), mod), text
    return text


def refuses_any(op, args, key, **attrs):
    with pytest.raises(IRError, match=rf"operator {op}: attribute {key}.* \?"):
        call(op, args, **attrs)


# -- reshape --------------------------------------------------------------------------------
def test_reshape_infers_minus_one_exactly_from_symbolic_products():
    x = var("x", ("batch", "seq", 768))
    assert typed(call("reshape", [x], newshape=(batch, seq, -1, 64))) == T(("batch", "seq", 12, 64))
    assert typed(call("reshape", [x], newshape=(-1, 768))) == T(("batch*seq", 768))
    assert typed(call("reshape", [x], newshape=(0, 0, 12, 64))) == T(("batch", "seq", 12, 64))
    kv = var("kv", ("batch", "past + seq", 768))
    assert typed(call("reshape", [kv], newshape=(batch, past + seq, -1, 64))) == T(("batch", "past + seq", 12, 64))
    assert typed(call("reshape", [kv], newshape=(-1, 2 * (past + seq), 768))) == \
        T(("floordiv(batch, 2)", "2*past + 2*seq", 768))


def test_reshape_refuses_what_provably_does_not_divide_and_refuses_unknown_targets():
    with pytest.raises(TypeInferenceError, match=r"cannot reshape \(batch, seq, 768\) to newshape=\[batch, seq, -1, "
                                                 r"100\]: 768\*batch\*seq elements cannot fill the shape"):
        rel("reshape", [T(("batch", "seq", 768))], newshape=(batch, seq, -1, 100))
    refuses_any("reshape", [var("x", ("batch", 3))], "newshape", newshape=(dims.ANY, 3))
    text = round_trips(call("reshape", [var("x", ("batch", "seq", 768))], newshape=(batch, seq, -1, 64)))
    assert "reshape(%x, newshape=[batch, seq, -1, 64])" in text


def test_transpose_expand_dims_squeeze_and_batch_flatten_keep_the_expressions():
    x = var("x", ("batch", "seq", 12, 64))
    assert typed(call("transpose", [x], axes=(0, 2, 1, 3))) == T(("batch", 12, "seq", 64))
    assert typed(call("expand_dims", [var("m", ("batch", "seq"))], axis=1, num_newaxis=2)) == T(("batch", 1, 1, "seq"))
    assert typed(call("squeeze", [var("s", ("batch", 1, "seq"))], axis=(1,))) == T(("batch", "seq"))
    assert typed(call("nn.batch_flatten", [var("f", ("batch", 3, "h", "w"))])) == T(("batch", "3*h*w"))
    with pytest.raises(TypeInferenceError, match=r"squeeze: axis 1 has size seq \+ 2, only size-1 axes"):
        rel("squeeze", [T(("batch", "seq + 2"))], axis=(1,))


def test_concatenate_adds_the_axis_and_takes_the_static_dimension_elsewhere():
    kv = ir.Tuple([var("p", ("batch", 12, "past", 64)), var("k", ("batch", 12, "seq", 64))])
    assert typed(call("concatenate", [kv], axis=2)) == T(("batch", 12, "past + seq", 64))
    assert rel("concatenate", [TupleType([T(("?", 3)), T(("batch", 4))])], axis=1) == T(("batch", 7))
    with pytest.raises(TypeInferenceError, match=r"concatenate: Tensor\[\(batch, 3\), float32\] and "
                                                 r"Tensor\[\(batch \+ 1, 3\), float32\] differ outside axis 1"):
        rel("concatenate", [TupleType([T(("batch", 3)), T(("batch + 1", 3))])], axis=1)


def test_split_into_sections_and_at_indices():
    qkv = var("qkv", ("batch", "seq", "3*hidden"))
    part = T(("batch", "seq", "hidden"))
    assert typed(call("split", [qkv], indices_or_sections=3, axis=2)) == TupleType([part, part, part])
    assert rel("split", [T(("seq",))], indices_or_sections=(1, 3), axis=0) == \
        TupleType([T((1,)), T((2,)), T(("seq - 3",))])
    with pytest.raises(TypeInferenceError, match=r"split: cannot split an axis of size 2\*seq \+ 1 into 2 equal"):
        rel("split", [T(("2*seq + 1",))], indices_or_sections=2, axis=0)


# -- indexing ------------------------------------------------------------------------------------
def test_strided_slice_with_symbolic_data_and_bounds():
    kv = var("kv", ("batch", "past + seq", 64))
    # the new positions of a KV cache: begin=[past] up to the end
    assert typed(call("strided_slice", [kv], begin=(past,), end=(MAX,), strides=(1,), axes=(1,))) == \
        T(("batch", "seq", 64))
    x = var("x", ("batch", "seq", 64))
    assert typed(call("strided_slice", [x], begin=(0,), end=(seq,), strides=(1,), axes=(1,))) == x.type_annotation
    # the last token: x[:, -1:] has min(1, seq) rows (none when seq is 0)
    assert typed(call("strided_slice", [x], begin=(-1,), end=(MAX,), strides=(1,), axes=(1,))) == \
        T(("batch", "min(1, seq)", 64))
    # reversed, and every second one
    assert typed(call("strided_slice", [x], begin=(-1,), end=(-MAX,), strides=(-1,), axes=(1,))) == x.type_annotation
    assert typed(call("strided_slice", [x], begin=(0,), end=(MAX,), strides=(2,), axes=(1,))) == \
        T(("batch", "floordiv(seq + 1, 2)", 64))
    # a static position table sliced by symbolic bounds: clamped with min
    table = var("table", (2048, 64))
    assert typed(call("strided_slice", [table], begin=(past,), end=(past + seq,), strides=(1,), axes=(0,))) == \
        T(("min(2048, past + seq) - min(2048, past)", 64))


def test_strided_slice_bounds_print_read_back_and_refuse_unknowns():
    kv = var("kv", ("batch", "past + seq", 64))
    text = round_trips(call("strided_slice", [kv], begin=(0, past), end=(MAX, past + seq), strides=(1, 1)))
    assert "begin=[0, past], end=[9223372036854775807, past + seq]" in text
    refuses_any("strided_slice", [kv], "end", begin=(0,), end=(dims.ANY,), strides=(1,))


def test_take_gather_and_the_batch_axes_they_share():
    emb = var("emb", (50257, 768))
    ids = var("ids", ("batch", "seq"), "int64")
    assert typed(call("take", [emb, ids], axis=0)) == T(("batch", "seq", 768))
    assert rel("take", [T(("?", "n", 4)), T(("batch", 2), "int64")], axis=1, batch_dims=1) == T(("batch", 2, 4))
    with pytest.raises(TypeInferenceError, match=r"take: the first 1 \(batch\) axes of the data \(batch, n\) and the "
                                                 r"indices \(batch \+ 1, 2\) differ"):
        rel("take", [T(("batch", "n")), T(("batch + 1", 2), "int64")], axis=1, batch_dims=1)
    assert rel("gather", [T(("batch", "seq")), T(("batch", "k"), "int64")], axis=1) == T(("batch", "k"))


def test_broadcast_to_a_symbolic_shape():
    mask = var("mask", (1, "seq", 1))
    assert typed(call("broadcast_to", [mask], shape=(batch, seq, 64))) == T(("batch", "seq", 64))
    # the data's 5 is not 1: the target's n must be 5
    assert rel("broadcast_to", [T((5,))], shape=(batch, dims.size_var("n"))) == T(("batch", 5))
    with pytest.raises(TypeInferenceError, match=r"broadcast_to: cannot broadcast Tensor\[\(seq \+ 2\), float32\] "
                                                 r"to the shape \[batch, 1\]"):
        rel("broadcast_to", [T(("seq + 2",))], shape=(batch, 1))
    text = round_trips(call("broadcast_to", [mask], shape=(batch, seq, 64)))
    assert "broadcast_to(%mask, shape=[batch, seq, 64])" in text
    refuses_any("broadcast_to", [mask], "shape", shape=(batch, dims.ANY, 64))


def test_tile_by_symbolic_reps_and_repeat():
    x = var("x", ("seq", 2))
    assert typed(call("tile", [x], reps=(batch, 1))) == T(("batch*seq", 2))
    assert "tile(%x, reps=[batch, 1])" in round_trips(call("tile", [x], reps=(batch, 1)))
    refuses_any("tile", [x], "reps", reps=(dims.ANY, 1))
    assert typed(call("repeat", [var("r", ("batch", "seq"))], repeats=2, axis=1)) == T(("batch", "2*seq"))


# -- ranges, scans, sorting, encodings ---------------------------------------------------------------
def test_arange_over_symbolic_integer_bounds():
    positions = call("arange", [], start=0, stop=seq, step=1, dtype="int64")
    assert typed(positions) == T(("seq",), "int64")
    assert typed(call("arange", [], start=past, stop=past + seq, step=1, dtype="int64")) == T(("seq",), "int64")
    assert typed(call("arange", [], start=0, stop=seq, step=2, dtype="int64")) == T(("floordiv(seq + 1, 2)",), "int64")
    assert typed(call("arange", [], start=seq, stop=0, step=-1, dtype="int64")) == T(("seq",), "int64")
    assert "arange(start=0, stop=seq, dtype=\"int64\")" in round_trips(positions)
    with pytest.raises(IRError, match=r"operator arange: attribute stop is \?"):
        call("arange", [], start=0, stop=dims.ANY, step=1, dtype="int64")
    with pytest.raises(IRError, match=r"operator arange: a symbolic bound needs an integer range, but step=0.5"):
        call("arange", [], start=0, stop=seq, step=0.5, dtype="float32")


def test_scans_topk_one_hot_and_size():
    x = var("x", ("batch", "seq"))
    assert typed(call("cumsum", [x])) == T(("batch*seq",))
    assert typed(call("cumprod", [x], axis=1)) == x.type_annotation
    assert typed(call("topk", [x], k=2, axis=1)) == TupleType([T(("batch", 2)), T(("batch", 2), "int32")])
    assert typed(call("topk", [x], k=0, axis=1, ret_type="values")) == x.type_annotation
    ids = var("ids", ("batch", "seq"), "int64")
    on, off = ir.const(1.0), ir.const(0.0)
    assert typed(call("one_hot", [ids, on, off], depth=10)) == T(("batch", "seq", 10))
    assert typed(call("ndarray_size", [x], dtype="int64")) == T((), "int64")


# -- creation --------------------------------------------------------------------------------------
def test_full_zeros_and_ones_of_a_symbolic_shape():
    fill = var("v", (), "float32")
    assert typed(call("full", [fill], shape=(batch, seq + 1))) == T(("batch", "seq + 1"))
    assert typed(call("zeros", [], shape=(batch, 12, seq, seq), dtype="float16")) == \
        T(("batch", 12, "seq", "seq"), "float16")
    assert typed(call("ones", [], shape=(batch, seq), dtype="int64")) == T(("batch", "seq"), "int64")
    text = round_trips(ir.Tuple([call("full", [fill], shape=(batch, 2 * seq)),
                                 call("zeros", [], shape=(batch, seq), dtype="float32"),
                                 call("ones", [], shape=(seq - 1,), dtype="int32")]))
    assert "full(%v, shape=[batch, 2*seq])" in text and 'ones(shape=[seq - 1], dtype="int32")' in text
    for op, args in (("full", [fill]), ("zeros", []), ("ones", [])):
        refuses_any(op, args, "shape", shape=(batch, dims.ANY), dtype="float32")
    assert typed(call("zeros_like", [var("z", ("batch", "?"))])) == T(("batch", "?"))


# -- einsum, scatter and gather ---------------------------------------------------------------------
def test_einsum_attention_scores_over_a_kv_cache():
    q, k = var("q", ("batch", 12, "seq", 64)), var("k", ("batch", 12, "past + seq", 64))
    assert typed(call("einsum", [ir.Tuple([q, k])], equation="bhqd,bhkd->bhqk")) == \
        T(("batch", 12, "seq", "past + seq"))
    assert rel("einsum", [TupleType([T(("n", 1, 3, 4)), T((5, 4, 6))])], equation="...ij,...jk") == \
        T(("n", 5, 3, 6))
    with pytest.raises(TypeInferenceError, match=r"einsum: 'ij,jk->ik': label 'j' is 64 in one operand and "
                                                 r"seq \+ 65 in another"):
        rel("einsum", [TupleType([T(("batch", 64)), T(("seq + 65", 10))])], equation="ij,jk->ik")


def test_gather_nd_needs_a_known_coordinate_count():
    data = T(("batch", "seq", 64))
    assert rel("gather_nd", [data, T((2, "n"), "int64")]) == T(("n", 64))
    assert rel("gather_nd", [data, T(("m", "n"), "int64")], index_rank=2) == T(("n", 64))
    with pytest.raises(TypeInferenceError, match=r"gather_nd: .* symbolic number of coordinates M=m .* give index_rank"):
        rel("gather_nd", [data, T(("m", "n"), "int64")])


def test_scatter_nd_scatter_elements_and_reverse_sequence():
    data = T(("batch", "seq"))
    assert rel("scatter_nd", [data, T((2, "n"), "int64"), T(("n",))]) == data
    # a symbolic M follows from the ranks (updates: Y..., X_M...)
    assert rel("scatter_nd", [data, T(("m", "n"), "int64"), T(("n",))]) == data
    assert rel("scatter_elements", [data, T(("batch", "k"), "int64"), T(("batch", "k"))], axis=1) == data
    with pytest.raises(TypeInferenceError, match=r"scatter_elements: indices Tensor\[\(batch, k\), int64\] and "
                                                 r"updates Tensor\[\(batch, k \+ 1\), float32\] must have one shape"):
        rel("scatter_elements", [data, T(("batch", "k"), "int64"), T(("batch", "k + 1"))], axis=1)
    x = T(("seq", "batch", 64))
    assert rel("reverse_sequence", [x, T(("batch",), "int64")], seq_axis=0, batch_axis=1) == x
    with pytest.raises(TypeInferenceError, match=r"reverse_sequence: seq_lengths Tensor\[\(batch \+ 1\), int64\]"):
        rel("reverse_sequence", [x, T(("batch + 1",), "int64")], seq_axis=0, batch_axis=1)


# -- reductions, DFT, element-wise, layouts --------------------------------------------------------
def test_reductions_keep_the_other_axes():
    x = var("x", ("batch", "seq", 768))
    assert typed(call("mean", [x], axis=(-1,), keepdims=True)) == T(("batch", "seq", 1))
    assert typed(call("argmax", [x], axis=(1,))) == T(("batch", 768), "int32")
    assert rel("variance", [T(("batch", "seq", 768)), T(("batch", "seq", 1))], axis=(2,)) == T(("batch", "seq"))
    with pytest.raises(TypeInferenceError, match=r"variance: the mean Tensor\[\(batch, seq \+ 2, 1\), float32\] "
                                                 r"must broadcast to the data"):
        rel("variance", [T(("batch", "seq", 768)), T(("batch", "seq + 2", 1))], axis=(2,))


def test_dft_pairs_the_real_and_imaginary_parts():
    re = T(("batch", "n"))
    assert rel("dft", [re, T(("batch", "n"))]) == TupleType([re, re])
    assert rel("dft", [T(("?", 16)), T(("batch", 16))]) == TupleType([T(("batch", 16))] * 2)
    with pytest.raises(TypeInferenceError, match=r"dft: the real part Tensor\[\(batch, n\), float32\] and the "
                                                 r"imaginary part Tensor\[\(batch, n \+ 1\), float32\] differ"):
        rel("dft", [re, T(("batch", "n + 1"))])


def test_elementwise_where_cast_and_shape_of():
    x = var("x", ("batch", "seq", 768))
    assert typed(call("add", [x, var("b", (768,))])) == x.type_annotation
    cond = var("c", (1, 1, "seq", "seq"), "bool")
    scores = var("s", ("batch", 12, "seq", "seq"))
    assert typed(call("where", [cond, scores, ir.const(-1e9)])) == scores.type_annotation
    assert typed(call("cast", [x], dtype="float16")) == T(("batch", "seq", 768), "float16")
    assert typed(call("shape_of", [x], dtype="int64")) == T((3,), "int64")
    with pytest.raises(TypeInferenceError, match=r"add: cannot broadcast Tensor\[\(batch, seq \+ 4\), float32\] "
                                                 r"with Tensor\[\(3\), float32\]"):
        rel("add", [T(("batch", "seq + 4")), T((3,))])


def test_layout_transform_permutes_symbolic_dimensions():
    x = var("x", ("batch", 3, "h", "w"))
    assert typed(call("layout_transform", [x], src_layout="NCHW", dst_layout="NHWC")) == T(("batch", "h", "w", 3))


# -- 3-D convolution and pooling ---------------------------------------------------------------------
def test_conv3d_and_pool3d_over_symbolic_volumes():
    x = var("x", ("batch", 3, "d", "h", "w"))
    w = var("w", (8, 3, 3, 3, 3))
    out = typed(call("nn.conv3d", [x, w], strides=(2, 2, 2), padding=(1, 1, 1), dilation=(1, 1, 1)))
    half = "floordiv(d - 1, 2) + 1", "floordiv(h - 1, 2) + 1", "floordiv(w - 1, 2) + 1"
    assert out == T(("batch", 8) + half)
    pooled = typed(call("nn.max_pool3d", [x], pool_size=(2, 2, 2), strides=(2, 2, 2), padding=(0, 0, 0)))
    assert pooled == T(("batch", 3, "floordiv(d, 2)", "floordiv(h, 2)", "floordiv(w, 2)"))
    with pytest.raises(TypeInferenceError, match=r"nn.conv3d: the weight Tensor\[\(8, c \+ 1, 3, 3, 3\), float32\] "
                                                 r"does not fit the data Tensor\[\(batch, c, d, h, w\), float32\]"):
        rel("nn.conv3d", [T(("batch", "c", "d", "h", "w")), T((8, "c + 1", 3, 3, 3))],
            strides=(1, 1, 1), padding=(1, 1, 1), dilation=(1, 1, 1))
