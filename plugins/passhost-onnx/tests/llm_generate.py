"""Greedy generation with a KV cache in onnxruntime, from the ONNX files alone (no PyTorch).

The files are those of ``data/llm/`` (optimum's exports, or anything with the same naming):
a decoder takes ``input_ids`` and, where it has them, ``attention_mask``, ``position_ids``,
``cache_position``, ``use_cache_branch`` (a merged decoder), ``encoder_hidden_states`` and
``encoder_attention_mask`` (the decoder of an encoder-decoder), and the cache as
``past_key_values.<rest>``; it returns ``logits`` (batch, sequence, vocabulary) first or by
name, and the new cache as ``present.<rest>``, which is fed back as ``past_key_values.<rest>``.
The first step is given an empty cache, of shape (batch, heads, 0, head size) in the input's
element type. A decoder with no cache inputs is given the whole sequence at every step.

::

    tokens, logits = greedy_generate("data/llm/gpt2/model.onnx", ids, 8)
    tokens, logits = greedy_generate_seq2seq("data/llm/t5/", ids, 8)

Tests run this on an original file and on an optimised copy and compare the tokens.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

_NUMPY = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(bool)": np.bool_,
}


def session(session_or_path, session_options=None):
    """An onnxruntime session on the CPU for a path or bytes; a session is returned as it is.
    Without ``session_options``: one thread for the operators and one between them, as the
    tests' runner (conftest.py) has it, so that sums run in the same order on any core count."""
    if hasattr(session_or_path, "run") and hasattr(session_or_path, "get_inputs"):
        return session_or_path
    import onnxruntime as ort

    if isinstance(session_or_path, Path):
        session_or_path = str(session_or_path)
    if session_options is None:
        session_options = ort.SessionOptions()
        session_options.intra_op_num_threads = 1
        session_options.inter_op_num_threads = 1
    return ort.InferenceSession(session_or_path, session_options, providers=["CPUExecutionProvider"])


def _empty_past(arg, batch: int) -> np.ndarray:
    """A zero-length cache for the input ``arg``: the batch on axis 0, its static sizes, 0 for
    every other symbolic axis (the past sequence)."""
    shape = [batch] + [d if isinstance(d, int) else 0 for d in arg.shape[1:]]
    return np.zeros(shape, _NUMPY[arg.type])


def _int(arg, value) -> np.ndarray:
    return np.asarray(value).astype(_NUMPY.get(arg.type, np.int64))


def greedy_generate(session_or_path, input_ids, steps: int, *, with_past=None, encoder_hidden_states=None,
                    encoder_attention_mask=None, session_options=None):
    """Generate ``steps`` tokens greedily after the prompt ``input_ids`` (batch, length).

    ``session_or_path`` runs the first step; ``with_past``, where given, the later ones (the
    ``decoder_with_past_model.onnx`` of an encoder-decoder, whose first step is the
    ``decoder_model.onnx`` without a cache). An encoder-decoder's decoder is also given
    ``encoder_hidden_states`` and ``encoder_attention_mask`` (see :func:`encode`).

    Returns ``(tokens, per_step_logits)``: the generated tokens as an int64 array of shape
    (batch, steps), and for each step the logits of the last position, (batch, vocabulary).
    """
    first = session(session_or_path, session_options)
    later = session(with_past, session_options) if with_past is not None else first
    ids = np.asarray(input_ids, dtype=np.int64)
    if ids.ndim != 2:
        raise ValueError(f"input_ids must be (batch, length), not {ids.shape}")
    batch = ids.shape[0]
    cache: dict = {}  # past_key_values.<rest> -> array
    generated = ids  # every token so far, the prompt included
    new = ids  # the tokens of this step
    past = 0  # the cache's length
    tokens, logits_per_step = [], []
    for step in range(steps):
        sess = first if step == 0 else later
        args = sess.get_inputs()
        has_cache = any(a.name.startswith("past_key_values") for a in args)
        step_ids = new if has_cache else generated
        length = step_ids.shape[1]
        start = past if has_cache else 0
        feeds = {}
        for a in args:
            n = a.name
            if n == "input_ids":
                feeds[n] = _int(a, step_ids)
            elif n.startswith("past_key_values"):
                feeds[n] = cache[n] if n in cache else _empty_past(a, batch)
            elif n == "attention_mask":
                feeds[n] = _int(a, np.ones((batch, start + length)))
            elif n == "position_ids":
                feeds[n] = _int(a, np.broadcast_to(np.arange(start, start + length), (batch, length)))
            elif n == "cache_position":
                feeds[n] = _int(a, np.arange(start, start + length))
            elif n == "use_cache_branch":
                feeds[n] = np.array([start > 0])
            elif n == "encoder_hidden_states":
                if encoder_hidden_states is None:
                    raise ValueError(f"{n} is an input: pass encoder_hidden_states (see encode())")
                feeds[n] = encoder_hidden_states
            elif n == "encoder_attention_mask":
                if encoder_attention_mask is None:
                    raise ValueError(f"{n} is an input: pass encoder_attention_mask")
                feeds[n] = _int(a, encoder_attention_mask)
            else:
                raise ValueError(f"greedy_generate does not know what to feed the input {n!r}")
        names = [o.name for o in sess.get_outputs()]
        outs = dict(zip(names, sess.run(None, feeds)))
        logits = outs["logits"] if "logits" in outs else outs[names[0]]
        last = logits[:, -1, :]
        token = last.argmax(-1).astype(np.int64)
        for n, v in outs.items():
            if n.startswith("present"):
                cache["past_key_values" + n[len("present"):]] = v
        past = start + length
        tokens.append(token)
        logits_per_step.append(last)
        new = token[:, None]
        generated = np.concatenate([generated, new], 1)
    return np.stack(tokens, 1) if tokens else np.zeros((batch, 0), np.int64), logits_per_step


def encode(session_or_path, input_ids, attention_mask=None, session_options=None):
    """Run an encoder (``encoder_model.onnx``): ``(last_hidden_state, attention_mask)``."""
    sess = session(session_or_path, session_options)
    ids = np.asarray(input_ids, dtype=np.int64)
    mask = np.ones(ids.shape, np.int64) if attention_mask is None else np.asarray(attention_mask, np.int64)
    feeds = {}
    for a in sess.get_inputs():
        if a.name == "input_ids":
            feeds[a.name] = _int(a, ids)
        elif a.name == "attention_mask":
            feeds[a.name] = _int(a, mask)
        else:
            raise ValueError(f"encode does not know what to feed the input {a.name!r}")
    return sess.run(None, feeds)[0], mask


def greedy_generate_seq2seq(directory, input_ids, steps: int, decoder_start_token_id: int = 0, *,
                            session_options=None, encoder=None, decoder=None, decoder_with_past=None):
    """Encode ``input_ids`` then generate ``steps`` tokens greedily with the decoder and its cache.

    The three files are ``encoder_model.onnx``, ``decoder_model.onnx`` and
    ``decoder_with_past_model.onnx`` in ``directory`` (optimum's names), unless given as paths
    or sessions. The decoder starts from ``decoder_start_token_id``. Returns
    ``(tokens, per_step_logits)`` as :func:`greedy_generate`.
    """
    def pick(given, name):
        return given if given is not None else os.path.join(str(directory), name)

    hidden, mask = encode(pick(encoder, "encoder_model.onnx"), input_ids, session_options=session_options)
    start = np.full((hidden.shape[0], 1), decoder_start_token_id, np.int64)
    return greedy_generate(pick(decoder, "decoder_model.onnx"), start, steps,
                           with_past=pick(decoder_with_past, "decoder_with_past_model.onnx"),
                           encoder_hidden_states=hidden, encoder_attention_mask=mask,
                           session_options=session_options)
