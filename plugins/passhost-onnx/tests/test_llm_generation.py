"""Language models with a KV cache through passhost: import with no shapes, -O3, export;
the output keeps every dynamic axis of the original under its name, and a greedy
generation loop of 8 tokens with the cache fed back gives the original's tokens, with
logits within float32 rounding at every step (issue 32's and issue 34's check).

The models are ``data/llm/``'s tiny random-weight GPT-2, Llama (grouped-query attention,
rotary, RMSNorm), Qwen2, T5 (encoder, decoder, decoder with past) and Llama in float16, as
optimum exports them; ``llm_generate.py`` runs the loop in onnxruntime from a file alone. A
float16 model's logits are held within float16 rounding instead (``HALF_LOGIT_RTOL`` of the
step's largest logit, the bound of ``test_half_models.py``): onnxruntime rounds a half-precision
graph where its kernels are, so a graph fused differently rounds at other places.
"""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

import passhost
from passhost import ir, transform

ort = pytest.importorskip("onnxruntime")

HERE = Path(__file__).parent
DATA = HERE / "data" / "llm"
EXPECTED = json.loads((DATA / "expected.json").read_text())
NAMES = [k for k in EXPECTED if k not in ("steps", "versions")]
#: logits after -O3 differ from the original's by float32 reassociation only
LOGIT_ATOL = 1e-4
#: a float16 model's logits: within 2^-7 of the step's largest logit
HALF_LOGIT_RTOL = 2.0 ** -7

_spec = importlib.util.spec_from_file_location("llm_generate", HERE / "llm_generate.py")
llm_generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llm_generate)


def _optimise(src: Path, dst: Path) -> None:
    mod = ir.load(str(src))
    with transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(mod)
    ir.save(mod, str(dst))


def _signature(path: Path) -> list:
    model = onnx.load(str(path), load_external_data=False)
    return [(vi.name, vi.type.tensor_type.elem_type,
             [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim])
            for vi in list(model.graph.input) + list(model.graph.output)]


def _files(name: str) -> list:
    folder = DATA / name
    return sorted(folder.glob("*.onnx"))


@pytest.fixture(scope="module")
def optimised(tmp_path_factory):
    """name -> the folder of its optimised files (each model optimised once per module)."""
    out = {}
    root = tmp_path_factory.mktemp("llm")
    for name in NAMES:
        folder = root / name
        folder.mkdir()
        for src in _files(name):
            _optimise(src, folder / src.name)
        for extra in DATA.joinpath(name).glob("*.json"):
            shutil.copy(extra, folder / extra.name)
        out[name] = folder
    return out


def _generate(folder: Path, name: str, ids: np.ndarray):
    steps = EXPECTED["steps"]
    if (folder / "model.onnx").exists():
        return llm_generate.greedy_generate(folder / "model.onnx", ids, steps)
    config = json.loads((folder / "config.json").read_text())
    return llm_generate.greedy_generate_seq2seq(folder, ids, steps, config["decoder_start_token_id"])


@pytest.mark.parametrize("name", NAMES)
def test_the_optimised_model_keeps_the_signature_and_is_smaller(name, optimised):
    for src in _files(name):
        dst = optimised[name] / src.name
        assert _signature(dst) == _signature(src)
        assert len(onnx.load(str(dst)).graph.node) < len(onnx.load(str(src)).graph.node)


@pytest.mark.parametrize("name", NAMES)
def test_greedy_generation_gives_the_original_tokens_at_batch_1_and_2(name, optimised):
    for key in ("prompt", "prompts_batch2"):
        ids = np.asarray(EXPECTED[name][key], dtype=np.int64)
        want_tokens, want_logits = _generate(DATA / name, name, ids)
        got_tokens, got_logits = _generate(optimised[name], name, ids)
        np.testing.assert_array_equal(got_tokens, want_tokens)
        for step, (g, w) in enumerate(zip(got_logits, want_logits)):
            assert g.dtype == w.dtype
            atol = LOGIT_ATOL if w.dtype == np.float32 else HALF_LOGIT_RTOL * float(np.abs(w).max())
            np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=0, atol=atol,
                                       err_msg=f"{name}, step {step}")
