"""Export the tiny language models of this directory, with their KV cache, and check them.

Real architectures at toy sizes, random weights (no hub download, no tokenizer): each is built
from its ``transformers`` config with ``from_config`` after ``torch.manual_seed``, saved with
``save_pretrained`` into a temporary folder and exported from there by optimum-onnx's exporter
(``main_export``, the TorchScript exporter underneath), as a user exporting a checkpoint gets it:

- ``gpt2/model.onnx``: GPT-2, ``text-generation-with-past``;
- ``llama/model.onnx``: Llama with grouped-query attention (4 heads, 2 key-value heads), rotary
  positions, RMSNorm and a SwiGLU MLP;
- ``qwen2/model.onnx``: Qwen2 (Llama-like, with biases on q, k and v; 4 heads, 2 key-value heads);
- ``llama_fp16/model.onnx``: the same Llama configuration in float16 (``model.half()``, exported
  with ``dtype="fp16"`` on the CPU): Hugging Face's RMSNorm then normalises in float32 between
  two casts, ``weight * x.to(float16)``, and the attention's softmax runs in float32;
- ``gptj/model.onnx``: GPT-J (4 heads of 16, ``rotary_dim=8``): the interleaved rotation
  (``rotate_every_two``) on the first half of each head, before the heads' transpose;
- ``phi/model.onnx``: Phi (``partial_rotary_factor=0.5``): Hugging Face's ``rotate_half`` on the
  first half of each head, the rest passed through;
- ``t5/``: T5 (relative position buckets, gated-GELU), ``text2text-generation-with-past`` left
  unmerged (``no_post_process=True``): ``encoder_model.onnx``, ``decoder_model.onnx`` (the first
  step, no cache in, the self- and cross-attention caches out) and
  ``decoder_with_past_model.onnx`` (the later steps); optimum's post-processing would merge the
  two decoders into one with an ``If``.

Each folder also keeps optimum's ``config.json`` and ``generation_config.json``. The decoders'
cache is ``past_key_values.N.key`` / ``.value`` in (``.decoder.`` / ``.encoder.`` for T5), of
shape (batch, key-value heads, past length, head size), and ``present.N.*`` out; batch,
sequence and past-sequence axes are dynamic. Weights are inline (no external data).

Every model is checked at export time, against PyTorch, in onnxruntime (a float16 model
within float16 rounding, ``HALF_RTOL``/``HALF_ATOL``, PyTorch's CPU kernels and onnxruntime's
rounding differently):

1. a prefill of 7 tokens at batch 1 and at batch 2 (different rows; for T5, 7 decoder tokens
   after a 7-token encoder input): the logits and every ``present`` tensor
   (``rtol=1e-3, atol=1e-4``); for the decoder-only models also several tokens at once on top
   of a cache (3 after 5 at batch 3, 2 after 11 at batch 1) against the logits of the whole
   sequence;
2. 8 greedy tokens with the cache fed back (``../../llm_generate.py``, the helper the tests use)
   against PyTorch's ``generate(do_sample=False)`` and a loop of PyTorch's own without cache,
   at batch 1 and 2.

The prompts and PyTorch's tokens are written to ``expected.json`` (with each model's smallest
margin between the best and second-best logit of a greedy step: random weights are scaled up,
``initializer_range``, so that the margins are far above rounding), which
``test_llm_corpus.py`` reads. To run it again (about a minute)::

    python3 -m venv /work/torchenv && . /work/torchenv/bin/activate
    pip install torch==2.13.0 onnx onnxscript onnxruntime "transformers<4.58" optimum-onnx==0.1.0
    HF_HUB_OFFLINE=1 python export_llm.py            # writes into this directory
    HF_HUB_OFFLINE=1 python export_llm.py . llama_fp16   # only the models named (expected.json merged)

Made with torch 2.13.0+cpu, transformers 4.57.6, optimum 2.1.0, optimum-onnx 0.1.0, onnx 1.23.2,
onnxscript 0.7.2, onnxruntime 1.32.0, numpy 2.4.6, Python 3.11.7.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np
import onnxruntime as ort
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from optimum.exporters.onnx import main_export  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    GenerationConfig,
    GPT2Config,
    GPTJConfig,
    LlamaConfig,
    PhiConfig,
    Qwen2Config,
    T5Config,
)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else HERE
_spec = importlib.util.spec_from_file_location("llm_generate", os.path.join(HERE, "..", "..", "llm_generate.py"))
llm_generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(llm_generate)

VOCAB = 256
PROMPT_LEN = 7
STEPS = 8
RTOL, ATOL = 1e-3, 1e-4
HALF_RTOL, HALF_ATOL = 2e-2, 2e-2
#: bos, eos and pad inside the vocabulary
_SPECIAL = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)


def _llama():
    """Llama with grouped-query attention (the float16 one is the same model)."""
    return LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                       hidden_act="silu", rms_norm_eps=1e-6, rope_theta=10000.0,
                       tie_word_embeddings=False, initializer_range=0.2, **_SPECIAL)


MODELS = {
    "gpt2": dict(
        task="text-generation-with-past",
        auto=AutoModelForCausalLM,
        config=lambda: GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=32, n_layer=2, n_head=4, n_inner=64,
                                  initializer_range=0.2, **_SPECIAL),
    ),
    "llama": dict(
        task="text-generation-with-past",
        auto=AutoModelForCausalLM,
        config=_llama,
    ),
    "qwen2": dict(
        task="text-generation-with-past",
        auto=AutoModelForCausalLM,
        config=lambda: Qwen2Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                   max_window_layers=2, use_sliding_window=False, tie_word_embeddings=True,
                                   rms_norm_eps=1e-6, initializer_range=0.2, **_SPECIAL),
    ),
    "t5": dict(
        task="text2text-generation-with-past",
        auto=AutoModelForSeq2SeqLM,
        config=lambda: T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
                                num_heads=4, relative_attention_num_buckets=8, relative_attention_max_distance=32,
                                feed_forward_proj="gated-gelu", dropout_rate=0.0, initializer_factor=1.0,
                                decoder_start_token_id=0, tie_word_embeddings=False, pad_token_id=0,
                                eos_token_id=2),
    ),
    "llama_fp16": dict(
        task="text-generation-with-past",
        auto=AutoModelForCausalLM,
        dtype="fp16",
        seed=1,  # llama's weights and prompts, in float16
        config=_llama,
    ),
    "gptj": dict(
        task="text-generation-with-past",
        auto=AutoModelForCausalLM,
        config=lambda: GPTJConfig(vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4, rotary_dim=8,
                                  n_inner=128, initializer_range=0.2, tie_word_embeddings=False, **_SPECIAL),
    ),
    "phi": dict(
        task="text-generation-with-past",
        auto=AutoModelForCausalLM,
        config=lambda: PhiConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
                                 partial_rotary_factor=0.5, initializer_range=0.2, **_SPECIAL),
    ),
}

#: what the export keeps (optimum also writes no tokenizer here: there is none)
_KEEP = ("model.onnx", "encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx",
         "config.json", "generation_config.json")


def _seed(name: str) -> int:
    """The model's seed, for its weights and its prompts: its place in MODELS unless it says."""
    return MODELS[name].get("seed", list(MODELS).index(name))


def _prompts(seed: int):
    rng = np.random.default_rng(seed)
    return rng.integers(3, VOCAB, (2, PROMPT_LEN)).astype(np.int64)


def _session(path):
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


#: name -> the largest absolute difference from PyTorch met in the prefill checks
MAX_DIFF: dict = {}


def _close(name, what, got, want):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    half = MODELS[name].get("dtype") == "fp16"
    np.testing.assert_allclose(got, want, rtol=HALF_RTOL if half else RTOL, atol=HALF_ATOL if half else ATOL,
                               err_msg=f"{name}: {what}")
    MAX_DIFF[name] = max(MAX_DIFF.get(name, 0.0), float(np.abs(got - want).max()))


def _cache_layers(cache):
    """[(key, value), ...] of a transformers cache (self-attention for an encoder-decoder)."""
    if hasattr(cache, "self_attention_cache"):
        cache = cache.self_attention_cache
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return [(k, v) for k, v in cache]


def _greedy_torch_no_cache(model, ids, encoder_ids=None, start=0):
    """PyTorch's greedy tokens recomputing the whole sequence at every step."""
    if encoder_ids is None:
        seq = torch.from_numpy(ids)
        for _ in range(STEPS):
            nxt = model(seq, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], 1)
        return seq[:, ids.shape[1]:].numpy()
    enc = torch.from_numpy(encoder_ids)
    seq = torch.full((enc.shape[0], 1), start, dtype=torch.long)
    for _ in range(STEPS):
        nxt = model(input_ids=enc, decoder_input_ids=seq, use_cache=False).logits[:, -1].argmax(-1, keepdim=True)
        seq = torch.cat([seq, nxt], 1)
    return seq[:, 1:].numpy()


def _margin(logits_per_step) -> float:
    top = np.sort(np.stack(logits_per_step), -1)
    return float((top[..., -1] - top[..., -2]).min())


def check_decoder(name, model, folder) -> dict:
    path = os.path.join(folder, "model.onnx")
    sess = _session(path)
    prompts = _prompts(_seed(name))
    for batch in (1, 2):
        ids = prompts[:batch]
        with torch.no_grad():
            ref = model(torch.from_numpy(ids), use_cache=True)
        feeds = {}
        for a in sess.get_inputs():
            if a.name == "input_ids":
                feeds[a.name] = ids
            elif a.name == "attention_mask":
                feeds[a.name] = np.ones_like(ids)
            elif a.name == "position_ids":
                feeds[a.name] = np.broadcast_to(np.arange(PROMPT_LEN), ids.shape).astype(np.int64)
            else:
                feeds[a.name] = llm_generate._empty_past(a, batch)
        outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        _close(name, f"prefill logits, batch {batch}", outs["logits"], ref.logits.numpy())
        for i, (k, v) in enumerate(_cache_layers(ref.past_key_values)):
            _close(name, f"present.{i}.key, batch {batch}", outs[f"present.{i}.key"], k.numpy())
            _close(name, f"present.{i}.value, batch {batch}", outs[f"present.{i}.value"], v.numpy())
    _check_chunks(name, model, sess)
    return _check_greedy(name, model, prompts, lambda ids: llm_generate.greedy_generate(sess, ids, STEPS),
                         lambda ids: _greedy_torch_no_cache(model, ids))


def _check_chunks(name, model, sess):
    """Several new tokens on top of a cache (batch 3: 5 cached, 3 new; batch 1: 11 cached, 2 new)
    give the logits of PyTorch's run over the whole sequence."""
    rng = np.random.default_rng(5)
    for batch, cached, new in ((3, 5, 3), (1, 11, 2)):
        ids = rng.integers(3, VOCAB, (batch, cached + new))
        with torch.no_grad():
            want = model(torch.from_numpy(ids)).logits[:, cached:].numpy()
            past = _cache_layers(model(torch.from_numpy(ids[:, :cached]), use_cache=True).past_key_values)
        feeds = {"input_ids": ids[:, cached:], "attention_mask": np.ones(ids.shape, np.int64),
                 "position_ids": np.broadcast_to(np.arange(cached, cached + new), (batch, new)).astype(np.int64)}
        for i, (k, v) in enumerate(past):
            feeds[f"past_key_values.{i}.key"], feeds[f"past_key_values.{i}.value"] = k.numpy(), v.numpy()
        got = sess.run(["logits"], {a.name: feeds[a.name] for a in sess.get_inputs()})[0]
        _close(name, f"{new} tokens after {cached} cached, batch {batch}", got, want)


def check_seq2seq(name, model, folder) -> dict:
    enc = _session(os.path.join(folder, "encoder_model.onnx"))
    dec = _session(os.path.join(folder, "decoder_model.onnx"))
    dec_past = _session(os.path.join(folder, "decoder_with_past_model.onnx"))
    prompts = _prompts(_seed(name))
    start = model.config.decoder_start_token_id
    targets = _prompts(100 + list(MODELS).index(name))
    for batch in (1, 2):
        ids, tgt = prompts[:batch], targets[:batch]
        with torch.no_grad():
            ref = model(input_ids=torch.from_numpy(ids), decoder_input_ids=torch.from_numpy(tgt), use_cache=True)
        hidden, mask = llm_generate.encode(enc, ids)
        _close(name, f"encoder, batch {batch}", hidden, ref.encoder_last_hidden_state.numpy())
        feeds = {"input_ids": tgt, "encoder_hidden_states": hidden, "encoder_attention_mask": mask}
        feeds = {a.name: feeds[a.name] for a in dec.get_inputs()}
        outs = dict(zip([o.name for o in dec.get_outputs()], dec.run(None, feeds)))
        _close(name, f"prefill logits, batch {batch}", outs["logits"], ref.logits.numpy())
        cross = ref.past_key_values.cross_attention_cache
        for i, (k, v) in enumerate(_cache_layers(ref.past_key_values)):
            _close(name, f"present.{i}.decoder.key, batch {batch}", outs[f"present.{i}.decoder.key"], k.numpy())
            _close(name, f"present.{i}.decoder.value, batch {batch}", outs[f"present.{i}.decoder.value"], v.numpy())
        for i, (k, v) in enumerate(_cache_layers(cross)):
            _close(name, f"present.{i}.encoder.key, batch {batch}", outs[f"present.{i}.encoder.key"], k.numpy())
            _close(name, f"present.{i}.encoder.value, batch {batch}", outs[f"present.{i}.encoder.value"], v.numpy())

    def onnx_greedy(ids):
        return llm_generate.greedy_generate_seq2seq(folder, ids, STEPS, start, encoder=enc, decoder=dec,
                                                    decoder_with_past=dec_past)

    return _check_greedy(name, model, prompts, onnx_greedy,
                         lambda ids: _greedy_torch_no_cache(model, None, ids, start), seq2seq=True)


def _check_greedy(name, model, prompts, onnx_greedy, torch_no_cache, seq2seq=False) -> dict:
    record = {"prompt": prompts[:1].tolist(), "prompts_batch2": prompts.tolist()}
    gen = GenerationConfig(do_sample=False, max_new_tokens=STEPS, min_new_tokens=0, eos_token_id=None,
                           pad_token_id=0, bos_token_id=None, decoder_start_token_id=model.config.decoder_start_token_id
                           if seq2seq else None)
    for batch in (1, 2):
        ids = prompts[:batch]
        tokens, logits = onnx_greedy(ids)
        with torch.no_grad():
            out = model.generate(torch.from_numpy(ids), generation_config=gen,
                                 attention_mask=torch.ones(ids.shape, dtype=torch.long)).numpy()
            want = out[:, 1:] if seq2seq else out[:, ids.shape[1]:]
            plain = torch_no_cache(ids)
        assert (want == plain).all(), f"{name}: generate() {want} and the loop without cache {plain} differ"
        assert tokens.shape == (batch, STEPS) and (tokens == want).all(), f"{name}: onnx {tokens}, torch {want}"
        record["tokens" if batch == 1 else "tokens_batch2"] = tokens.tolist()
        record["min_margin" if batch == 1 else "min_margin_batch2"] = round(_margin(logits), 4)
    # identical rows give the first row's tokens
    same, _ = onnx_greedy(np.repeat(prompts[:1], 2, 0))
    assert (same == np.asarray(record["tokens"] * 2)).all(), f"{name}: identical rows differ: {same}"
    return record


def export(name, spec, out) -> dict:
    torch.manual_seed(_seed(name))
    config = spec["config"]()
    model = spec["auto"].from_config(config).eval()
    if spec.get("dtype") == "fp16":
        model = model.half()
    folder = os.path.join(out, name)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "src"), os.path.join(tmp, "onnx")
        model.save_pretrained(src)
        main_export(model_name_or_path=src, output=dst, task=spec["task"], device="cpu", local_files_only=True,
                    no_post_process=True, do_validation=False, dtype=spec.get("dtype", "fp32"))
        if os.path.isdir(folder):
            shutil.rmtree(folder)
        os.makedirs(folder)
        for f in sorted(os.listdir(dst)):
            if f in _KEEP:
                shutil.copy(os.path.join(dst, f), folder)
            else:
                print(f"     ({name}: not kept: {f})")
    record = (check_seq2seq if spec["task"].startswith("text2text") else check_decoder)(name, model, folder)
    record["prefill_max_abs_diff"] = float(f"{MAX_DIFF[name]:.3g}")
    record["files"] = {f: os.path.getsize(os.path.join(folder, f)) for f in sorted(os.listdir(folder))}
    return record


def main() -> None:
    """Export every model, or those named after the output folder (their records replace the
    ones of ``expected.json``, the others' are kept)."""
    warnings.filterwarnings("ignore")
    names = sys.argv[2:] or list(MODELS)
    expected = {"steps": STEPS, "versions": {"torch": torch.__version__, "onnxruntime": ort.__version__}}
    old = os.path.join(OUT, "expected.json")
    if sys.argv[2:] and os.path.exists(old):
        with open(old) as f:
            expected = json.load(f)
    for name in names:
        spec = MODELS[name]
        expected[name] = export(name, spec, OUT)
        print("ok  ", name, expected[name]["files"], "tokens", expected[name]["tokens"],
              "margin", expected[name]["min_margin"])
    with open(os.path.join(OUT, "expected.json"), "w") as f:  # a model a line
        f.write("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in expected.items()) + "\n}\n")


if __name__ == "__main__":
    main()
