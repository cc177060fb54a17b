"""Language models in onnxruntime: how fast each optimiser's output runs (issue 34's runtime goals).

Usage::

    python benchmarks/bench_llm_runtime.py                     # the benchmark-sized models (see below)
    python benchmarks/bench_llm_runtime.py --models tiny       # tests/data/llm's tiny models as they are
    python benchmarks/bench_llm_runtime.py --only llama --rounds 3 --json out.json

For each model, one run times onnxruntime (CPU, ``--threads`` intra-op threads, 1 by default:
the figures do not depend on the core count or on other jobs' threads) on five files:

``original``      the optimum export as it is
``onnxslim``      ``onnxslim.slim`` of it
``ort-opt``       ``onnxruntime.transformers.optimizer.optimize_model`` (``model_type`` gpt2 for the
                  decoders, t5 for T5, with the model's heads and hidden size, ``opt_level=0``:
                  its own fusions, ``SkipLayerNormalization``, ``SimplifiedLayerNormalization``,
                  ``RotaryEmbedding``, ``FastGelu`` ...; a higher level adds what the timed session
                  does anyway at ``ORT_ENABLE_BASIC``/``ALL``, and imports torch)
``passhost``      ``ir.load``, ``default_pipeline(3)``, ``ir.save``: ``passhost run -O3 -o``, standard
                  ONNX at the model's opset (18): the fused blocks written as the nodes they
                  stand for
``passhost-23``   the same module at ``--opset 23``: ``RMSNormalization``, ``RotaryEmbedding``,
                  ``Attention`` with the KV cache
``passhost-ort``  the same module with ``--target onnxruntime``: opset 23 and onnxruntime's
                  ``QuickGelu`` for SiLU

in two phases, each at ``ORT_ENABLE_ALL`` and at ``ORT_ENABLE_BASIC``:

``prefill``  batch 1, 128 new tokens, an empty cache (T5: ``decoder_model.onnx``, 128 decoder
             tokens over 128 encoder states)
``decode``   batch 1, one new token after a cache of 128 (T5: ``decoder_with_past_model.onnx``)

Every session is made once and warmed up; then ``--rounds`` rounds each run every session (in
an order that rotates from round to round) for a burst of about ``--burst-seconds``, timing
each run, so the sessions interleave every few tens of milliseconds and all see the same
machine. A cell is the 10th percentile of its runs' times: other jobs on the machine only ever
add time, and an undisturbed run is what the model costs (the JSON has the medians too). Each
output is compared with the original's at ``ORT_ENABLE_BASIC`` on the same inputs (the
largest absolute difference over all outputs is reported).

Models. ``tiny``: ``plugins/passhost-onnx/tests/data/llm`` (hidden 32-64, 2 layers): onnxruntime's
per-node cost is all there is. ``bench`` (the default): the same four architectures (GPT-2;
Llama with grouped-query attention, rotary, RMSNorm and SwiGLU; Qwen2; T5) at hidden 256, 4
layers, a vocabulary of 2048, random weights, exported by optimum-onnx as the tiny ones are, by
``benchmarks/llm_export_bench_models.py``. That needs torch, transformers and optimum-onnx, which
the project's venv does not have: the script runs it with ``--torch-python`` (default
``$PASSHOST_TORCH_PYTHON`` or ``/work/torchenv/bin/python``) into ``--cache`` (default
``<tmp>/passhost_llm_bench``) once; without such a Python the run says so and times the tiny
models. Nothing large is written into the repository.

Goals (issue 34): passhost's output no slower than any peer's in any cell; with
``--target onnxruntime`` at least 1.3x faster than the original on decode at ``ORT_ENABLE_BASIC``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks import machine_info  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "plugins" / "passhost-onnx" / "tests" / "data" / "llm"
EXPORTER = Path(__file__).resolve().parent / "llm_export_bench_models.py"
NAMES = ("gpt2", "llama", "qwen2", "t5")
VARIANTS = ("original", "onnxslim", "ort-opt", "passhost", "passhost-23", "passhost-ort")
MINE = ("passhost", "passhost-23", "passhost-ort")
PEERS = ("original", "onnxslim", "ort-opt")
LEVELS = ("all", "basic")
PHASES = ("prefill", "decode")
PREFILL, PAST, ENCODER = 128, 128, 128


# ------------------------------------------------------------------------------- the models


def bench_models(cache: Path, python: str) -> Path:
    """The benchmark-sized exports in ``cache``, made with ``python`` (torch) when missing."""
    missing = [n for n in NAMES if not (cache / n / ("decoder_model.onnx" if n == "t5" else "model.onnx")).exists()]
    if missing:
        cache.mkdir(parents=True, exist_ok=True)
        print(f"exporting {', '.join(missing)} with {python} into {cache} ...", flush=True)
        subprocess.run([python, str(EXPORTER), str(cache), *missing], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return cache


def files_of(folder: Path, name: str) -> dict:
    """phase -> the ONNX file of that phase."""
    if name == "t5":
        return {"prefill": folder / "decoder_model.onnx", "decode": folder / "decoder_with_past_model.onnx"}
    return {"prefill": folder / "model.onnx", "decode": folder / "model.onnx"}


def config_of(folder: Path) -> dict:
    c = json.loads((folder / "config.json").read_text())
    heads = c.get("num_attention_heads") or c.get("n_head") or c.get("num_heads")
    hidden = c.get("hidden_size") or c.get("n_embd") or c.get("d_model")
    positions = c.get("n_positions") or c.get("max_position_embeddings") or 1 << 30
    return {"heads": int(heads), "hidden": int(hidden), "vocab": int(c["vocab_size"]), "type": c["model_type"],
            "positions": int(positions)}


# ------------------------------------------------------------------------------- the optimisers


def optimise(src: Path, dst_dir: Path, name: str, cfg: dict) -> dict:
    """variant -> (path, seconds to make it) for one source file."""
    import onnx

    out = {"original": (src, 0.0)}
    stem = src.stem
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        import onnxslim

        path = dst_dir / f"{stem}.onnxslim.onnx"
        onnx.save(onnxslim.slim(onnx.load(str(src))), str(path))
        out["onnxslim"] = (path, time.perf_counter() - t)

        from onnxruntime.transformers.optimizer import optimize_model

        t = time.perf_counter()
        path = dst_dir / f"{stem}.ort-opt.onnx"
        model_type = "t5" if cfg["type"] == "t5" else "gpt2"
        optimize_model(str(src), model_type=model_type, num_heads=cfg["heads"], hidden_size=cfg["hidden"],
                       opt_level=0).save_model_to_file(str(path))
        out["ort-opt"] = (path, time.perf_counter() - t)

    import passhost
    from passhost import ir, transform

    t = time.perf_counter()
    mod = ir.load(str(src))
    with transform.PassContext(opt_level=3):
        mod = passhost.default_pipeline(3)(mod)
    path = dst_dir / f"{stem}.passhost.onnx"
    ir.save(mod, str(path))
    out["passhost"] = (path, time.perf_counter() - t)
    path = dst_dir / f"{stem}.passhost-23.onnx"
    ir.save(mod, str(path), opset=23)
    out["passhost-23"] = (path, out["passhost"][1])
    path = dst_dir / f"{stem}.passhost-ort.onnx"
    ir.save(mod, str(path), target="onnxruntime")
    out["passhost-ort"] = (path, out["passhost"][1])
    return out


def node_count(path: Path) -> int:
    import onnx

    return len(onnx.load(str(path), load_external_data=False).graph.node)


# ------------------------------------------------------------------------------- timing


_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
           "tensor(int32)": np.int32, "tensor(bool)": np.bool_}


def _dim(d, sizes: dict) -> int:
    if isinstance(d, int):
        return d
    return sum(int(t) if t.strip().isdigit() else sizes[t.strip()] for t in str(d).split("+"))


def lengths(phase: str, positions: int) -> tuple:
    """(new tokens, cache length) of a phase: prefill 128 on no cache, decode 1 after 128 (a model
    with fewer positions, tests/data/llm's GPT-2, decodes after positions - 1)."""
    return (min(PREFILL, positions), 0) if phase == "prefill" else (1, min(PAST, positions - 1))


def feeds_for(session, phase: str, vocab: int, rng: np.random.Generator, positions: int = 1 << 30) -> dict:
    """Inputs of one phase: batch 1, :func:`lengths`' tokens."""
    new, past = lengths(phase, positions)
    sizes = {"batch_size": 1, "sequence_length": new, "decoder_sequence_length": new, "past_sequence_length": past,
             "past_decoder_sequence_length": past, "encoder_sequence_length": ENCODER}
    feeds = {}
    for a in session.get_inputs():
        shape = [_dim(d, sizes) for d in a.shape]
        dt = _DTYPES[a.type]
        if a.name in ("input_ids",):
            feeds[a.name] = rng.integers(3, vocab, shape).astype(dt)
        elif a.name.endswith("attention_mask"):
            feeds[a.name] = np.ones(shape, dt)
        elif a.name == "position_ids":
            feeds[a.name] = np.broadcast_to(np.arange(past, past + new), shape).astype(dt)
        else:  # the cache, encoder states
            feeds[a.name] = rng.standard_normal(shape).astype(dt)
    return feeds


def session(path: Path, level: str, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                                   "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC}[level]
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def time_cells(sessions: dict, feeds: dict, rounds: int, burst_seconds: float) -> dict:
    """key -> (the 10th percentile of the per-run times in ms, every per-run time). Each round
    runs every session (in an order that rotates) for a burst of about ``burst_seconds``,
    timing each run: sessions interleave every few tens of milliseconds, so all see the same
    machine. The 10th percentile, not the mean: other jobs on the machine only ever add time,
    and a run they did not disturb is what the model costs (the medians are in the JSON)."""
    keys = list(sessions)
    reps = {}
    for k in keys:  # warm up, and size each session's burst of runs
        s = sessions[k]
        for _ in range(3):
            s.run(None, feeds)
        t = time.perf_counter()
        s.run(None, feeds)
        one = max(time.perf_counter() - t, 1e-5)
        reps[k] = max(1, min(500, int(burst_seconds / one)))
    runs: dict = {k: [] for k in keys}
    clock = time.perf_counter
    for r in range(rounds):
        order = keys[r % len(keys):] + keys[:r % len(keys)]
        for k in order:
            s, out = sessions[k], runs[k]
            for _ in range(reps[k]):
                t = clock()
                s.run(None, feeds)
                out.append((clock() - t) * 1e3)
    return {k: (float(np.percentile(v, 10)), v) for k, v in runs.items()}


def max_diff(a: list, b: list) -> float:
    return max(float(np.max(np.abs(x.astype("float64") - y))) if x.size else 0.0 for x, y in zip(a, b))


# ------------------------------------------------------------------------------- one model


def run_model(name: str, folder: Path, work: Path, args) -> dict:
    cfg = config_of(folder)
    files = files_of(folder, name)
    made: dict = {}
    for src in files.values():
        if src not in made:
            made[src] = optimise(src, work, name, cfg)
    result = {"model": name, "config": cfg, "phases": {}}
    rng = np.random.default_rng(0)
    for phase in PHASES:
        variants = dict(made[files[phase]])
        nodes = {v: node_count(p) for v, (p, _) in variants.items()}
        sessions, failed = {}, {}
        for v, (p, _) in list(variants.items()):
            try:
                for lv in LEVELS:
                    sessions[(v, lv)] = session(p, lv, args.threads)
            except Exception as err:  # noqa: BLE001 - a peer's output the CPU provider cannot run
                failed[v] = " ".join(str(err).split())[:200]
                sessions.pop((v, LEVELS[0]), None)
                del variants[v]
        feeds = feeds_for(sessions[("original", "basic")], phase, cfg["vocab"], rng, cfg["positions"])
        want = sessions[("original", "basic")].run(None, feeds)
        names = [o.name for o in sessions[("original", "basic")].get_outputs()]
        diffs = {}
        for v in variants:
            s = sessions[(v, "basic")]
            got = dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))
            diffs[v] = max_diff([got[n] for n in names], want)
        cells = time_cells(sessions, feeds, args.rounds, args.burst_seconds)
        result["phases"][phase] = {
            "new_tokens_and_past": lengths(phase, cfg["positions"]), "nodes": nodes, "max_abs_diff": diffs, "failed": failed,
            "optimise_seconds": {v: round(t, 3) for v, (_, t) in variants.items()},
            "ms": {f"{v}/{lv}": round(cells[(v, lv)][0], 4) for v in variants for lv in LEVELS},
            "median_ms": {f"{v}/{lv}": round(float(np.median(cells[(v, lv)][1])), 4) for v in variants for lv in LEVELS},
            "runs": {f"{v}/{lv}": len(cells[(v, lv)][1]) for v in variants for lv in LEVELS},
        }
    return result


# ------------------------------------------------------------------------------- report


def report(results: list) -> str:
    lines = []
    for res in results:
        for phase in PHASES:
            ph = res["phases"][phase]
            ran = [v for v in VARIANTS if v in ph["max_abs_diff"]]
            new, past = ph["new_tokens_and_past"]
            lines.append(f"\n{res['model']} {phase} ({new} new, {past} cached)  (nodes: " + ", ".join(f"{v} {ph['nodes'][v]}" for v in VARIANTS)
                         + "; max |diff| vs original: "
                         + ", ".join(f"{v} {ph['max_abs_diff'][v]:.1e}" for v in ran[1:]) + ")")
            for v, why in ph["failed"].items():
                lines.append(f"  {v} does not run on onnxruntime's CPU provider: {why}")
            lines.append(f"  {'level':6s}" + "".join(f"{v:>14s}" for v in VARIANTS) + "   / best peer")
            for lv in LEVELS:
                ms = {v: ph["ms"][f"{v}/{lv}"] for v in ran}
                base = ms["original"]
                cells = "".join(f"{ms[v]:8.3f} {base / ms[v]:4.2f}x" if v in ms else f"{'-':>14s}" for v in VARIANTS)
                best_peer = min(ms[p] for p in PEERS if p in ms)
                ratios = " ".join(f"{ms[v] / best_peer:4.2f}" for v in MINE)
                slower = [v for v in MINE if ms[v] > best_peer]
                lines.append(f"  {lv:6s}{cells}   {ratios}" + (f"   <- {', '.join(slower)} slower than a peer"
                                                                  if slower else ""))
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", choices=("bench", "tiny"), default="bench")
    p.add_argument("--only", default="", help="comma list of " + ",".join(NAMES))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=40)
    p.add_argument("--burst-seconds", type=float, default=0.05)
    p.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "passhost_llm_bench"))
    p.add_argument("--torch-python", default=os.environ.get("PASSHOST_TORCH_PYTHON", "/work/torchenv/bin/python"))
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    names = [n for n in NAMES if not args.only or n in args.only.split(",")]
    root = TINY
    if args.models == "bench":
        if Path(args.torch_python).exists():
            root = bench_models(Path(args.cache), args.torch_python)
        else:
            print(f"no Python with torch at {args.torch_python} (--torch-python): timing the tiny models", flush=True)
    info = machine_info()
    print(", ".join(f"{k} {info[k]}" for k in ("cpu_model", "cores", "load_average") if k in info), flush=True)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            work = Path(tmp) / name
            work.mkdir()
            print(f"{name} ...", flush=True)
            results.append(run_model(name, root / name, work, args))
            print(report(results[-1:]), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"models": str(root), "threads": args.threads, "machine": info,
                                               "results": results}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
