"""Export the benchmark-sized language models of ``bench_llm_runtime.py`` (run with a Python
that has torch, transformers and optimum-onnx; the project's venv has none of them).

The architectures of ``plugins/passhost-onnx/tests/data/llm`` (GPT-2; Llama with grouped-query
attention, rotary positions, RMSNorm and SwiGLU; Qwen2; T5's decoder with past) at sizes where
a prefill is compute-bound and a decode step still fits the weights in the caches (hidden 256:
at 512 one decode step reads 50 MB of weights and takes the same time whatever the graph around
the matrix products): hidden 256, 8 query heads of 32 (Llama and Qwen2: 2 key-value heads), 4
layers, a vocabulary of 2048, 512 positions. Random weights after ``torch.manual_seed`` (no hub download), ``save_pretrained``
into a temporary folder, exported from there by optimum-onnx's ``main_export`` as a user gets
it. Nothing is committed: the files go to ``OUT`` (the benchmark passes a folder under the
system temp dir)::

    /work/torchenv/bin/python benchmarks/llm_export_bench_models.py OUT [NAME ...]
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from optimum.exporters.onnx import main_export  # noqa: E402
from transformers import (  # noqa: E402
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    GPT2Config,
    LlamaConfig,
    Qwen2Config,
    T5Config,
)

VOCAB = 2048
_SPECIAL = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)

MODELS = {
    "gpt2": (AutoModelForCausalLM, "text-generation-with-past",
             lambda: GPT2Config(vocab_size=VOCAB, n_positions=512, n_embd=256, n_layer=4, n_head=8, n_inner=1024,
                                **_SPECIAL)),
    "llama": (AutoModelForCausalLM, "text-generation-with-past",
              lambda: LlamaConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                                  num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512,
                                  hidden_act="silu", rms_norm_eps=1e-6, rope_theta=10000.0,
                                  tie_word_embeddings=False, **_SPECIAL)),
    "qwen2": (AutoModelForCausalLM, "text-generation-with-past",
              lambda: Qwen2Config(vocab_size=VOCAB, hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                                  num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512,
                                  max_window_layers=4, use_sliding_window=False, tie_word_embeddings=True,
                                  rms_norm_eps=1e-6, **_SPECIAL)),
    "t5": (AutoModelForSeq2SeqLM, "text2text-generation-with-past",
           lambda: T5Config(vocab_size=VOCAB, d_model=256, d_kv=32, d_ff=1024, num_layers=4, num_decoder_layers=4,
                            num_heads=8, feed_forward_proj="gated-gelu", dropout_rate=0.0, decoder_start_token_id=0,
                            tie_word_embeddings=False, pad_token_id=0, eos_token_id=2)),
}

_KEEP = ("model.onnx", "encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx", "config.json")


def export(name: str, out: str) -> None:
    auto, task, config = MODELS[name]
    torch.manual_seed(list(MODELS).index(name))
    model = auto.from_config(config()).eval()
    folder = os.path.join(out, name)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "src"), os.path.join(tmp, "onnx")
        model.save_pretrained(src)
        main_export(model_name_or_path=src, output=dst, task=task, device="cpu", local_files_only=True,
                    no_post_process=True, do_validation=False)
        os.makedirs(folder, exist_ok=True)
        for f in sorted(os.listdir(dst)):
            if f in _KEEP:
                shutil.copy(os.path.join(dst, f), folder)


def main() -> None:
    warnings.filterwarnings("ignore")
    out = sys.argv[1]
    for name in sys.argv[2:] or list(MODELS):
        export(name, out)
        print("exported", name, flush=True)


if __name__ == "__main__":
    main()
