"""ONNX models end to end: passhost beside onnxscript, onnx-simplifier and onnxoptimizer.

Usage::

    python benchmarks/bench_onnx.py                          # ResNet-50 and DenseNet-121, 5 runs each
    python benchmarks/bench_onnx.py --models all --repeat 3   # all nine model-zoo CNNs
    python benchmarks/bench_onnx.py --models transformers     # BART, Whisper and BERT encoders
    python benchmarks/bench_onnx.py --models dynamic          # dynamic axes kept: BERT, LLMs with a cache, PyTorch
    python benchmarks/bench_onnx.py --quick                   # SqueezeNet, one run (the smoke test)
    python benchmarks/bench_onnx.py --profile resnet50        # cProfile passhost's import + -O3 + export
    python benchmarks/bench_onnx.py --json out.json

Models are the onnx wheel's model-zoo CNNs made numeric with
``passhost_onnx.zoo.reseed`` and written once to a temporary directory. Every tool
works **file to file** on that same file, and every repetition reads a fresh copy from
disk (nothing is timed on an object an earlier run has seen):

``passhost``         ``ir.load(path)``, ``default_pipeline(3)`` under ``PassContext(opt_level=3)``,
                     ``ir.save(out, dst)``
``passhost-import``  ``ir.load(path)`` alone
``onnxscript``       ``onnx.load``, ``onnxscript.optimizer.optimize``, ``onnx.save``
``onnxsim``          ``onnx.load``, ``onnxsim.simplify``, ``onnx.save``
``onnxoptimizer``    ``onnx.load``, ``onnxoptimizer.optimize`` (its default passes), ``onnx.save``
``onnxslim``         ``onnx.load``, ``onnxslim.slim``, ``onnx.save`` (the optimiser many exporters call)

The tools alternate within each repetition (the order rotates from one repetition to
the next), so every tool sees the same machine load. After one untimed warm-up per
tool, each is run ``--repeat`` times; the table gives the median wall time (and CPU
time: onnxruntime inside onnxsim may use threads) with the load, optimise and save
phases. Memory: one more run per tool, each in a fresh child process after its imports:
the peak resident set size (``VmHWM``, reset through ``/proc/self/clear_refs``) minus
the RSS just before the run (an RSS delta, not tracemalloc: the peers allocate in C++
where tracemalloc sees nothing); it is set against the model's weight bytes (the sum of its
initializers' sizes). Each output is checked against onnxruntime on the original model
(``ORT_DISABLE_ALL``, a seeded input in [-1, 1]): the max absolute difference, beside
the node count of the output graph. A tool that is not installed gets a row saying so.

Goals (issue 11): passhost end to end <= 0.5x the fastest peer on ResNet-50 and
DenseNet-121; import of ResNet-50 <= 120 ms; peak memory <= 2x the weight bytes.
Issue 12: the same 0.5x on onnxscript's BART and Whisper encoders (and fewer output nodes
than onnx-simplifier leaves); the BERT encoder is reported beside them.

Issue 32 (``--models dynamic``): models whose dynamic axes every tool keeps -- the opset-13
BERT with its ``batch`` and ``sequence`` axes, the LLMs of ``tests/data/llm`` (GPT-2, Llama,
Qwen2 with their KV cache; T5's decoder with past) and PyTorch models exported with dynamic
axes (``tests/data/torch/dynamic``). Goals: end to end <= 0.5x the fastest of onnxslim,
onnx-simplifier and onnxscript; no more nodes than onnxslim's or onnx-simplifier's. The
outputs are compared with onnxruntime at every size variable bound to 3 (an expression of
them, such as ``past + seq``, evaluated).
"""
from __future__ import annotations

import argparse
import cProfile
import contextlib
import gc
import importlib
import json
import logging
import os
import pstats
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Callable, Optional

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks import current_rss_mb, fmt_seconds, machine_info, peak_rss_mb, reset_peak_rss, summary  # noqa: E402

TOOLS = ("passhost", "passhost-import", "onnxscript", "onnxsim", "onnxoptimizer", "onnxslim")
#: the Python module each tool needs (a missing one makes the row "not installed")
NEEDS = {"passhost": "passhost_onnx", "passhost-import": "passhost_onnx", "onnxscript": "onnxscript.optimizer",
         "onnxsim": "onnxsim", "onnxoptimizer": "onnxoptimizer", "onnxslim": "onnxslim"}
DEFAULT_MODELS = ("resnet50", "densenet121")
QUICK_MODELS = ("squeezenet",)
GOAL_RATIO = 0.5                      # passhost end to end / fastest peer, on the goal models
GOAL_MODELS = ("resnet50", "densenet121", "bart", "whisper")
#: transformer encoders (issue 12): onnxscript's BART and Whisper, passhost_onnx.bert's BERT,
#: written with every symbolic dimension made concrete (sequence TRANSFORMER_SEQ)
TRANSFORMERS = ("bart", "whisper", "bert")
TRANSFORMER_SEQ = 64  # BART's position table holds 100 positions
GOAL_IMPORT_S = {"resnet50": 0.120}   # passhost import alone
#: models with their dynamic axes kept (issue 32): name -> file under the plugin's tests/data
DYNAMIC = {
    "bert-dyn": None,  # passhost_onnx.bert, batch and sequence symbolic
    "gpt2-cache": "llm/gpt2/model.onnx",
    "llama-cache": "llm/llama/model.onnx",
    "qwen2-cache": "llm/qwen2/model.onnx",
    "t5-decoder-past": "llm/t5/decoder_with_past_model.onnx",
    "transformer-dyn": "torch/dynamic/tiny_transformer.dyn.ts17.onnx",
    "decoder-dyn": "torch/dynamic/decoder.dyn.dynamo.onnx",
    "unet-dyn": "torch/dynamic/unetish.dyn.dynamo.onnx",
}
GOAL_MODELS = GOAL_MODELS + tuple(DYNAMIC)
#: what a size variable is bound to when the outputs are compared with onnxruntime
DYNAMIC_SIZE = 3
GOAL_MEMORY_RATIO = 2.0               # peak RSS delta / weight bytes


def onnx_available() -> bool:
    """Whether onnx and passhost's ONNX plugin are importable (the benchmark needs both)."""
    try:
        import onnx  # noqa: F401
        import passhost_onnx.zoo  # noqa: F401
    except ImportError:
        return False
    return True


def installed(tool: str) -> bool:
    try:
        importlib.import_module(NEEDS[tool])
    except Exception:  # noqa: BLE001 - a broken install is "not installed"
        return False
    return True


def tool_versions() -> dict:
    out = {}
    for name in ("onnx", "onnxruntime", "onnxscript", "onnxsim", "onnxoptimizer", "onnxslim", "passhost"):
        try:
            out[name] = str(importlib.import_module(name).__version__)
        except Exception:  # noqa: BLE001
            out[name] = None
    return out


# ------------------------------------------------------------------------------- models


def prepare(name: str, directory: str) -> dict:
    """Write the reseeded model ``name`` to ``directory``; ``{"path", "weight_bytes", "nodes"}``.

    ``reseed`` adds initializers that are not graph inputs, which IR version 3 (what the
    zoo files declare) forbids: onnx.checker and onnxsim reject the model. The IR version
    is raised to 4 (opset 9 is IR-4 era) and the initializers that were also declared as
    graph inputs stop being inputs, so every tool sees plain constant weights (as in a
    model exported today) and none has to guess whether a weight may be overridden.
    """
    import onnx

    if name in TRANSFORMERS:
        return _prepare_transformer(name, directory)
    if name in DYNAMIC:
        return _prepare_dynamic(name, directory)
    from passhost_onnx.zoo import light_path, reseed

    model = reseed(onnx.load(light_path(name)))
    model.ir_version = max(model.ir_version, 4)
    inits = {t.name for t in model.graph.initializer}
    keep = [i for i in model.graph.input if i.name not in inits]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    onnx.checker.check_model(model)
    path = os.path.join(directory, f"{name}.onnx")
    onnx.save(model, path)
    weight_bytes = sum(onnx.numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    return {"path": path, "weight_bytes": weight_bytes, "nodes": len(model.graph.node)}


def _prepare_dynamic(name: str, directory: str) -> dict:
    """A model of :data:`DYNAMIC`, copied with its dynamic axes (external data loaded in)."""
    import onnx

    if DYNAMIC[name] is None:
        from passhost_onnx.bert import make_bert

        model = make_bert(layers=4, hidden=256, heads=4, ffn=1024)
    else:
        data = Path(__file__).resolve().parent.parent / "plugins" / "passhost-onnx" / "tests" / "data"
        model = onnx.load(str(data / DYNAMIC[name]))
    path = os.path.join(directory, f"{name}.onnx")
    onnx.save(model, path)
    weight_bytes = sum(onnx.numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    return {"path": path, "weight_bytes": weight_bytes, "nodes": len(model.graph.node)}


def _prepare_transformer(name: str, directory: str) -> dict:
    """BART/Whisper from onnxscript's private model builders (random weights), BERT from
    ``passhost_onnx.bert``; symbolic dimensions become concrete so every tool sees the same
    static model (passhost would otherwise bind them to 1 and onnxsim would keep them)."""
    import onnx

    if name == "bert":
        from passhost_onnx.bert import make_bert

        model = make_bert(layers=4, hidden=256, heads=4, ffn=1024)
    else:
        module = importlib.import_module(f"onnxscript.rewriter.models._{name}_encoder")
        model = module.make_model_with_random_weights()
        if not isinstance(model, onnx.ModelProto):
            import onnx_ir

            model = onnx_ir.serde.serialize_model(model)
    for vi in model.graph.input:
        for i, d in enumerate(vi.type.tensor_type.shape.dim):
            if not d.dim_value:
                d.dim_value = 1 if i == 0 else TRANSFORMER_SEQ
    path = os.path.join(directory, f"{name}.onnx")
    onnx.save(model, path)
    weight_bytes = sum(onnx.numpy_helper.to_array(t).nbytes for t in model.graph.initializer)
    weight_bytes += sum(onnx.numpy_helper.to_array(n.attribute[0].t).nbytes for n in model.graph.node
                        if n.op_type == "Constant" and n.attribute and n.attribute[0].type == onnx.AttributeProto.TENSOR)
    return {"path": path, "weight_bytes": weight_bytes, "nodes": len(model.graph.node)}


# ------------------------------------------------------------------------------- tools


def _quiet():
    """Silence the peers' logging and warnings (onnxscript logs one line per initializer)."""
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    for logger in ("onnxscript", "onnx_ir", "onnxsim"):
        lg = logging.getLogger(logger)
        old = lg.level
        lg.setLevel(logging.ERROR)
        stack.callback(lg.setLevel, old)
    return stack


def _phases(steps: list) -> dict:
    """Run ``[(phase, fn)]`` in order, each fed the previous result; phase wall times."""
    out, value = {}, None
    for phase, fn in steps:
        t0 = time.perf_counter()
        value = fn(value)
        out[phase] = time.perf_counter() - t0
    return out


def run_tool(tool: str, src: str, dst: str) -> dict:
    """One file-to-file run of ``tool``: the wall time of each phase."""
    import onnx

    if tool in ("passhost", "passhost-import"):
        import passhost
        from passhost import ir
        from passhost.transform import PassContext

        def o3(mod):
            with PassContext(opt_level=3):
                return passhost.default_pipeline(3)(mod)

        steps = [("load", lambda _: ir.load(src))]
        if tool == "passhost":
            steps += [("optimize", o3), ("save", lambda m: ir.save(m, dst))]
        return _phases(steps)
    if tool == "onnxscript":
        import onnxscript.optimizer

        opt = onnxscript.optimizer.optimize
    elif tool == "onnxsim":
        import onnxsim

        def opt(model):
            out, ok = onnxsim.simplify(model)
            if not ok:
                raise RuntimeError("onnxsim's own check failed")
            return out
    elif tool == "onnxoptimizer":
        import onnxoptimizer

        opt = onnxoptimizer.optimize
    elif tool == "onnxslim":
        import onnxslim

        opt = onnxslim.slim
    else:
        raise ValueError(f"unknown tool {tool!r}; tools: {', '.join(TOOLS)}")
    return _phases([("load", lambda _: onnx.load(src)), ("optimize", opt), ("save", lambda m: onnx.save(m, dst))])


def timed_run(tool: str, src: str, dst: str) -> dict:
    """:func:`run_tool` under the wall and CPU clocks (garbage collected first, quietly)."""
    gc.collect()
    with _quiet():
        c0, t0 = time.process_time(), time.perf_counter()
        phases = run_tool(tool, src, dst)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall": wall, "cpu": cpu, "phases": phases}


def _warm_imports(tool: str) -> None:
    """Import what ``tool`` runs (and build passhost's pipeline: plugin discovery) so a
    memory baseline taken afterwards holds the code and only the run is measured."""
    import onnx  # noqa: F401

    importlib.import_module(NEEDS[tool])
    if tool.startswith("passhost"):
        import passhost
        from passhost.transform import PassContext

        with PassContext(opt_level=3):
            passhost.default_pipeline(3)


def _memory_child(tool: str, src: str, dst: str) -> Optional[float]:
    """In a fresh process: peak RSS above the RSS before one run, in bytes."""
    _warm_imports(tool)
    gc.collect()
    before = current_rss_mb()
    if not before or not reset_peak_rss():
        return None
    with _quiet():
        run_tool(tool, src, dst)
    return (peak_rss_mb() - before) * 2**20


def memory_run(tool: str, src: str, dst: str, timeout: float = 600.0) -> Optional[float]:
    """Peak RSS of one run of ``tool`` above the RSS before it, in bytes, measured in a fresh
    child process (in this one, memory freed by earlier runs would be reused and hide the
    peak); ``None`` where /proc is missing."""
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--memory-child", tool, src, dst],
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"memory run of {tool} failed: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------- checks


def node_count(path: str) -> dict:
    """Nodes of the output graph, and of its local functions (FuseOps may write some)."""
    import onnx

    model = onnx.load(path, load_external_data=False)
    return {"nodes": len(model.graph.node), "function_nodes": sum(len(f.node) for f in model.functions)}


def ort_outputs(path: str, seed: int = 1):
    """onnxruntime's outputs (graph optimisations off) on a seeded input, or ``None``."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 3
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    rng = np.random.RandomState(seed)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else _size_of(d) for d in i.shape]
        if i.type == "tensor(int64)":  # token ids (and an all-ones attention mask)
            feeds[i.name] = (np.ones(shape, np.int64) if "mask" in i.name else rng.randint(0, 100, shape).astype(np.int64))
        else:
            feeds[i.name] = rng.uniform(-1, 1, shape).astype(np.float32)
    return sess.run(None, feeds)


def _size_of(dim) -> int:
    """A symbolic input dimension bound: every size variable :data:`DYNAMIC_SIZE`, an
    expression of them (``past_sequence_length + sequence_length``) evaluated; 1 for an
    unnamed one."""
    if not dim:
        return 1
    from passhost.ir import dims

    try:
        value = dims.parse_dim(str(dim))
    except ValueError:
        return DYNAMIC_SIZE
    return dims.evaluate_dim(value, {n: DYNAMIC_SIZE for n in dims.free_size_vars(value)})


def max_abs_diff(want: list, path: str) -> Optional[float]:
    got = ort_outputs(path)
    if want is None or got is None:
        return None
    if len(got) != len(want):
        return float("inf")
    return max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)))) for a, b in zip(want, got))


# ------------------------------------------------------------------------------- driver


def run(models=DEFAULT_MODELS, tools=TOOLS, repeat: int = 5, warmup: int = 1, memory: bool = True,
        workdir: Optional[str] = None, log: Callable[[str], None] = lambda s: None) -> list:
    """One row per model and tool: median/min/max wall and CPU time, phase medians, peak
    memory, node count after optimisation and max abs difference against onnxruntime."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_onnx_", dir=workdir) as tmp:
        for name in models:
            log(f"{name}: reseed and write")
            info = prepare(name, tmp)
            src = info["path"]
            present = [t for t in tools if installed(t)]
            dst = {t: os.path.join(tmp, f"{name}.{t}.onnx") for t in present}
            samples: dict = {t: [] for t in present}
            errors: dict = {}
            for _ in range(warmup):
                for t in present:
                    try:
                        timed_run(t, src, dst[t])
                    except Exception as exc:  # noqa: BLE001 - a tool failing is a finding, not a crash
                        errors[t] = f"{type(exc).__name__}: {str(exc)[:300]}"
            live = [t for t in present if t not in errors]
            for rep in range(max(1, repeat)):
                order = live[rep % len(live):] + live[:rep % len(live)] if live else []
                log(f"{name}: run {rep + 1}/{repeat} ({', '.join(order)})")
                for t in order:
                    if t in errors:
                        continue
                    try:
                        samples[t].append(timed_run(t, src, dst[t]))
                    except Exception as exc:  # noqa: BLE001
                        errors[t] = f"{type(exc).__name__}: {str(exc)[:300]}"
            want = ort_outputs(src)
            for t in tools:
                row = {"model": name, "tool": t, "weight_bytes": info["weight_bytes"], "nodes_before": info["nodes"]}
                rows.append(row)
                if t not in present:
                    row["skipped"] = "not installed"
                    continue
                if t in errors:
                    row["error"] = errors[t]
                    continue
                s = samples[t]
                row["wall"] = summary([x["wall"] for x in s])
                row["cpu"] = summary([x["cpu"] for x in s])
                row["phases"] = {p: summary([x["phases"][p] for x in s])["median"] for p in s[0]["phases"]}
                row["repeat"] = len(s)
                if memory:
                    log(f"{name}: memory {t}")
                    peak = memory_run(t, src, dst[t])
                    if peak is not None:
                        row["peak_bytes"] = peak
                        row["memory_ratio"] = peak / info["weight_bytes"]
                if t != "passhost-import":
                    row.update(node_count(dst[t]))
                    row["max_abs_diff"] = max_abs_diff(want, dst[t])
            judge(rows, name)
    return rows


def judge(rows: list, model: str) -> None:
    """Attach to ``model``'s passhost rows the ratio to the fastest peer and the goals met."""
    mine = {r["tool"]: r for r in rows if r["model"] == model}
    # (issue 32 sets the dynamic models against onnxslim, onnx-simplifier and onnxscript)
    others = ("passhost", "passhost-import") + (("onnxoptimizer",) if model in DYNAMIC else ())
    peers = [r["wall"]["median"] for t, r in mine.items() if t not in others and "wall" in r]
    ph = mine.get("passhost")
    if ph and "wall" in ph:
        if peers:
            ph["ratio_fastest_peer"] = ph["wall"]["median"] / min(peers)
            if model in GOAL_MODELS:
                ph["meets_ratio_goal"] = ph["ratio_fastest_peer"] <= GOAL_RATIO
        if "memory_ratio" in ph:
            ph["meets_memory_goal"] = ph["memory_ratio"] <= GOAL_MEMORY_RATIO
    imp = mine.get("passhost-import")
    if imp and "wall" in imp and model in GOAL_IMPORT_S:
        imp["goal_s"] = GOAL_IMPORT_S[model]
        imp["meets_goal"] = imp["wall"]["median"] <= GOAL_IMPORT_S[model]


def _mb(b) -> str:
    return "—" if b is None else f"{b / 2**20:.0f} MB"


def _diff(d) -> str:
    return "—" if d is None else f"{d:.1e}"


def table_rows(rows: list) -> list:
    """The table's cells per row (shared by the text and the Markdown report)."""
    out = []
    for r in rows:
        if "wall" not in r:
            out.append([r["model"], r["tool"], r.get("skipped") or f"error: {r.get('error')}", "", "", "", "", "", ""])
            continue
        ph = r["phases"]
        phases = " / ".join(fmt_seconds(ph[p]) for p in ("load", "optimize", "save") if p in ph)
        mem = "—" if "peak_bytes" not in r else f"{_mb(r['peak_bytes'])} ({r['memory_ratio']:.2f}×)"
        nodes = "—" if "nodes" not in r else str(r["nodes"]) + (f" (+{r['function_nodes']} in functions)"
                                                                 if r.get("function_nodes") else "")
        ratio = f"{r['ratio_fastest_peer']:.2f}×" if "ratio_fastest_peer" in r else ""
        out.append([r["model"], r["tool"], fmt_seconds(r["wall"]["median"]),
                    f"{fmt_seconds(r['wall']['min'])}–{fmt_seconds(r['wall']['max'])}", fmt_seconds(r["cpu"]["median"]),
                    phases, mem, nodes, _diff(r.get("max_abs_diff")) + (f"; {ratio} fastest peer" if ratio else "")])
    return out


HEADER = ["model", "tool", "wall median", "wall min–max", "CPU median", "load / optimise / save",
          "peak RSS Δ (× weights)", "nodes after", "max |Δ| vs ORT"]


def print_table(rows: list, out=sys.stdout) -> None:
    cells = [HEADER] + table_rows(rows)
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    for c in cells:
        print("  ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip(), file=out)


def markdown(rows: list) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    lines += ["| " + " | ".join(c) + " |" for c in table_rows(rows)]
    return "\n".join(lines)


def profile(model: str, out=sys.stdout, top: int = 30) -> None:
    """cProfile one warm passhost import + -O3 + export of ``model`` (cumulative and own time)."""
    with tempfile.TemporaryDirectory(prefix="bench_onnx_") as tmp:
        src = prepare(model, tmp)["path"]
        dst = os.path.join(tmp, "out.onnx")
        timed_run("passhost", src, dst)  # warm: plugins, registry, lazy imports
        prof = cProfile.Profile()
        gc.collect()
        prof.enable()
        run_tool("passhost", src, dst)
        prof.disable()
        for key in ("cumulative", "tottime"):
            pstats.Stats(prof, stream=out).sort_stats(key).print_stats(top)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="comma-separated zoo models, transformers (bart, whisper, bert) or dynamic models "
                         "(bert-dyn, gpt2-cache, ...), 'all' (the zoo), 'transformers' or 'dynamic' "
                         "(default resnet50,densenet121)")
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated subset of {', '.join(TOOLS)}")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--no-memory", action="store_true", help="skip the extra run that measures peak memory")
    ap.add_argument("--quick", action="store_true", help="SqueezeNet, one run, no warm-up (the smoke test)")
    ap.add_argument("--profile", metavar="MODEL", help="cProfile passhost end to end on MODEL and exit")
    ap.add_argument("--json", metavar="PATH", help="also write the rows, machine and versions as JSON")
    ap.add_argument("--memory-child", nargs=3, metavar=("TOOL", "SRC", "DST"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory_child:
        print(json.dumps(_memory_child(*args.memory_child)))
        return 0
    if not onnx_available():
        print("bench_onnx: skipped: onnx and passhost-onnx are needed (bash scripts/dev-install.sh)")
        if args.json:
            Path(args.json).write_text(json.dumps({"skipped": "onnx or passhost-onnx not installed"}))
        return 0
    from passhost_onnx.zoo import MODELS

    known = tuple(MODELS) + TRANSFORMERS + tuple(DYNAMIC)
    sets = {"all": list(MODELS), "transformers": list(TRANSFORMERS), "dynamic": list(DYNAMIC)}
    models = sets.get(args.models) or [m for m in args.models.split(",") if m]
    tools = [t for t in args.tools.split(",") if t]
    for m in models:
        if m not in known:
            ap.error(f"unknown model {m!r}; models: {', '.join(known)}")
    for t in tools:
        if t not in TOOLS:
            ap.error(f"unknown tool {t!r}; tools: {', '.join(TOOLS)}")
    if args.profile:
        if args.profile not in known:
            ap.error(f"unknown model {args.profile!r}; models: {', '.join(known)}")
        profile(args.profile)
        return 0
    repeat, warmup = (1, 0) if args.quick else (args.repeat, args.warmup)
    if args.quick:
        models = list(QUICK_MODELS)
    load_before = [round(x, 2) for x in os.getloadavg()]
    t0 = time.perf_counter()
    rows = run(models, tools, repeat, warmup, memory=not args.no_memory,
               log=lambda s: print(f"[{time.perf_counter() - t0:6.1f}s] {s}", file=sys.stderr, flush=True))
    load_after = [round(x, 2) for x in os.getloadavg()]
    versions = tool_versions()
    print(f"versions: {', '.join(f'{k} {v}' for k, v in versions.items())}; load average {load_before} -> "
          f"{load_after}; {repeat} timed runs after {warmup} warm-up, tools alternating")
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_info(), "versions": versions,
                                               "load_before": load_before, "load_after": load_after,
                                               "settings": {"repeat": repeat, "warmup": warmup, "models": models},
                                               "results": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
