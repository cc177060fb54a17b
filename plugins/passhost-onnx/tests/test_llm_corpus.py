"""The LLM corpus of ``data/llm/`` and the greedy-generation helper ``llm_generate.py``.

``data/llm/export_llm.py`` exported tiny random-weight GPT-2, Llama (grouped-query attention),
Qwen2 and T5 models with their KV cache (optimum-onnx) and recorded, per model, a fixed prompt
and the 8 tokens PyTorch generates greedily from it in ``expected.json``. This checks, with
onnxruntime and the helper only (neither PyTorch nor passhost), that the committed files and the
helper still work: the cache-fed greedy loop gives PyTorch's tokens, twice the same, and a batch
of two identical rows gives the single row's tokens in each row.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")

HERE = Path(__file__).parent
DATA = HERE / "data" / "llm"
EXPECTED = json.loads((DATA / "expected.json").read_text())
NAMES = [k for k in EXPECTED if k not in ("steps", "versions")]

_spec = importlib.util.spec_from_file_location("llm_generate", HERE / "llm_generate.py")
llm_generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llm_generate)


def _generate(name: str, ids: np.ndarray):
    steps = EXPECTED["steps"]
    folder = DATA / name
    if (folder / "model.onnx").exists():
        return llm_generate.greedy_generate(folder / "model.onnx", ids, steps)
    config = json.loads((folder / "config.json").read_text())
    return llm_generate.greedy_generate_seq2seq(folder, ids, steps, config["decoder_start_token_id"])


@pytest.mark.parametrize("name", NAMES)
def test_a_committed_llm_generates_pytorchs_tokens_deterministically_with_its_cache(name):
    want = EXPECTED[name]
    prompt = np.array(want["prompt"], np.int64)
    tokens, logits = _generate(name, prompt)
    assert tokens.shape == (1, EXPECTED["steps"]) and tokens.dtype == np.int64
    assert len(logits) == EXPECTED["steps"] and all(step.shape[0] == 1 for step in logits)
    assert tokens.tolist() == want["tokens"]
    again, logits_again = _generate(name, prompt)
    assert again.tolist() == tokens.tolist()
    for a, b in zip(logits, logits_again):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", NAMES)
def test_a_batch_of_two_gives_each_rows_tokens(name):
    want = EXPECTED[name]
    prompt = np.array(want["prompt"], np.int64)
    same, logits = _generate(name, np.repeat(prompt, 2, 0))
    assert same.tolist() == want["tokens"] * 2
    for step in logits:
        np.testing.assert_allclose(step[0], step[1], rtol=1e-5, atol=1e-5)
    different, _ = _generate(name, np.array(want["prompts_batch2"], np.int64))
    assert different.tolist() == want["tokens_batch2"]


def test_the_helper_feeds_an_empty_cache_of_the_inputs_type_and_static_sizes():
    sess = llm_generate.session(DATA / "llama" / "model.onnx")
    past = [a for a in sess.get_inputs() if a.name.startswith("past_key_values")]
    assert [a.name for a in past] == [f"past_key_values.{i}.{kv}" for i in range(2) for kv in ("key", "value")]
    empty = llm_generate._empty_past(past[0], 3)
    assert empty.shape == (3, 2, 0, 16) and empty.dtype == np.float32  # 2 key-value heads of 16
