"""A float16 and a bfloat16 copy of the corpus' GPT-2 (``data/llm/gpt2``, KV cache, dynamic
axes) through import, -O3 and export (issue 34 §2).

The copies are made here from the float32 file: every float32 weight, constant, graph
input and output and ``Cast`` target becomes the half type (what a model exported in half
precision holds). Tolerances follow from one rounding per operator (docs/ir.md): against a
float32 computation rounded to the half type, a prefill's and a decode step's logits are
within 2^-7 (float16) or 2^-5 (bfloat16) of the largest logit; measured, at most 0.16%
and 1.7%.

float16: onnxruntime runs the copy and passhost's export; greedy generation gives the same
8 tokens on both (and on the float32 original), logits within float16 rounding, and
passhost's interpreter agrees with onnxruntime. bfloat16: onnxruntime's CPU provider has
no bfloat16 kernel for MatMul, Gemm, Add, Mul, Softmax, Pow, Tanh ... (only data movement,
Cast, Clip and LayerNormalization), so passhost's interpreter is compared with float32
onnxruntime rounded to bfloat16, on the imported module, the -O3 one and the export read
back, which also passes ``onnx.checker``.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import ml_dtypes  # noqa: F401
import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper

import passhost
from passhost import ir, transform

ort = pytest.importorskip("onnxruntime")

HERE = Path(__file__).parent
GPT2 = HERE / "data" / "llm" / "gpt2" / "model.onnx"
#: the largest logit error allowed, as a fraction of the largest logit
TOLERANCE = {"float16": 2.0 ** -7, "bfloat16": 2.0 ** -5}
STEPS = 8

_spec = importlib.util.spec_from_file_location("llm_generate", HERE / "llm_generate.py")
llm_generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llm_generate)


def retype(model: onnx.ModelProto, dtype: str) -> onnx.ModelProto:
    """``model`` with every float32 tensor -- initializers, ``Constant`` and
    ``ConstantOfShape`` values, graph inputs, outputs and value infos, ``Cast`` targets --
    made ``dtype`` (``"float16"`` or ``"bfloat16"``)."""
    elem = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}[dtype]
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph

    def convert(t: onnx.TensorProto) -> None:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(dtype), t.name))

    for t in g.initializer:
        convert(t)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                convert(a.t)
            elif n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = elem
    for vi in (*g.input, *g.output, *g.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = elem
    onnx.checker.check_model(out, full_check=True)
    return out


@pytest.fixture(scope="module", params=["float16", "bfloat16"])
def copies(request, tmp_path_factory):
    """``(dtype, the half copy, passhost's -O3 module of it, the export of that)``."""
    dtype = request.param
    folder = tmp_path_factory.mktemp(dtype)
    src, dst = folder / "model.onnx", folder / "out.onnx"
    onnx.save(retype(onnx.load(str(GPT2)), dtype), str(src))
    mod = ir.load(str(src))
    with transform.PassContext(opt_level=3):
        out = passhost.default_pipeline(3)(mod)
    ir.save(out, str(dst))
    return dtype, src, mod, out, dst


def _feeds(past: dict = None, length: int = 4) -> dict:
    """A prefill of ``length`` tokens (no cache), or a one-token step after ``past``."""
    ids = np.array([[5, 17, 3, 42]], dtype=np.int64)[:, :length]
    if past is None:
        feeds = {"input_ids": ids, "attention_mask": np.ones((1, length), np.int64),
                 "position_ids": np.arange(length)[None]}
        past = {f"past_key_values.{i}.{kv}": np.zeros((1, 4, 0, 8), np.float32) for i in range(2)
                for kv in ("key", "value")}
    else:
        p = next(iter(past.values())).shape[2]
        feeds = {"input_ids": np.array([[7]]), "attention_mask": np.ones((1, p + 1), np.int64),
                 "position_ids": np.array([[p]])}
    return {**feeds, **past}


def _half(feeds: dict, dtype: str) -> dict:
    return {k: v.astype(dtype) if v.dtype == np.float32 else v for k, v in feeds.items()}


def _evaluate(mod, feeds: dict) -> list:
    out = ir.evaluate(mod, *[feeds[p.name_hint] for p in mod["main"].params])
    return list(out) if isinstance(out, tuple) else [out]


def _close(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    got, want = got.astype(np.float32), want.astype(dtype).astype(np.float32)
    err = float(np.abs(got - want).max())
    assert err <= TOLERANCE[dtype] * float(np.abs(want).max()), (err, float(np.abs(want).max()))


def test_the_half_copy_keeps_its_dtype_and_signature(copies):
    dtype, src, mod, out, dst = copies
    written = onnx.load(str(dst))
    onnx.checker.check_model(written, full_check=True)
    elem = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}[dtype]
    original = onnx.load(str(src))
    for a, b in zip((*original.graph.input, *original.graph.output), (*written.graph.input, *written.graph.output)):
        assert a.name == b.name and a.type.tensor_type.elem_type == b.type.tensor_type.elem_type
        assert [d.dim_param or d.dim_value for d in a.type.tensor_type.shape.dim] == \
            [d.dim_param or d.dim_value for d in b.type.tensor_type.shape.dim]
    assert not [t.name for t in written.graph.initializer if t.data_type == TensorProto.FLOAT]
    assert any(t.data_type == elem for t in written.graph.initializer)


def test_prefill_and_decode_match_float32_rounded(copies):
    """Logits of a prefill and of one decode step fed its cache, from the imported, the -O3
    and the re-read exported module, against float32 onnxruntime rounded to the half type."""
    dtype, src, mod, out, dst = copies
    s32 = llm_generate.session(GPT2)
    back = ir.load(str(dst))
    prefill = _feeds()
    want = s32.run(None, prefill)
    names = [o.name for o in s32.get_outputs()]
    present = {n.replace("present", "past_key_values"): v for n, v in zip(names, want) if n.startswith("present")}
    step = _feeds(present)
    want_step = s32.run(None, step)
    for module in (mod, out, back):
        got = _evaluate(module, _half(prefill, dtype))
        assert got[0].dtype.name == dtype
        _close(got[0], want[0], dtype)
        half_present = {n.replace("present", "past_key_values"): v for n, v in zip(names, got) if n.startswith("present")}
        step_half = {**_half(step, dtype), **half_present}
        _close(_evaluate(module, step_half)[0], want_step[0], dtype)


# float16 only: onnxruntime's CPU provider has no bfloat16 kernels for these operators
@pytest.mark.parametrize("copies", ["float16"], indirect=True)
def test_float16_generates_the_same_tokens_in_onnxruntime(copies):
    dtype, src, mod, out, dst = copies
    ids = np.array([[5, 17, 3, 42]], dtype=np.int64)
    tokens32, _ = llm_generate.greedy_generate(GPT2, ids, STEPS)
    tokens, logits = llm_generate.greedy_generate(src, ids, STEPS)
    tokens_out, logits_out = llm_generate.greedy_generate(dst, ids, STEPS)
    np.testing.assert_array_equal(tokens, tokens32)
    np.testing.assert_array_equal(tokens_out, tokens)
    for a, b in zip(logits_out, logits):
        _close(a, b.astype(np.float32), dtype)
    got = _evaluate(out, _half(_feeds(), dtype))[0]  # the interpreter, against onnxruntime in float16
    want = llm_generate.session(src).run(None, _half(_feeds(), dtype))[0]
    _close(got, want.astype(np.float32), dtype)
