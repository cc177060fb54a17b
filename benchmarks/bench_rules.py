"""The rewrite driver with rules that do not fire: passhost.ir.pattern beside onnxscript's rewriter.

Usage::

    python benchmarks/bench_rules.py                 # DenseNet-121 and the scaling series
    python benchmarks/bench_rules.py --quick         # small sizes, one run (the smoke test)
    python benchmarks/bench_rules.py --json out.json

**DenseNet-121.** 46 rules, each ``outer(inner(x))`` (``outer(inner(x), w)`` for a
convolution), rooted at operators the model has (Relu, Conv, MaxPool, AveragePool) over
inner operators it never feeds them, so every rule is offered nodes and none fires --
the cost of a rewrite pass that finds nothing, the common case. The same 46 rules are
written for both tools. passhost: ``rewrite(rules, mod["main"])`` on the model imported by
passhost-onnx; onnxscript: ``RewriteRuleSet(rules).apply_to_model(model)`` on the model
deserialised to ``onnx_ir``. Each repetition gets a freshly loaded graph (outside the
clock): nothing is timed on an object an earlier run has seen.

**Scaling.** The 46 rules over synthetic graphs of 10k, 100k and 1M nodes (chains of
``nn.relu(add(exp(x), c))`` blocks): the time per node per rule should stay flat.

Goals (issue 14): DenseNet-121, 46 non-firing rules, <= 40 ms; per node per rule
<= 1.3x from 10k to 1M nodes. The table also gives onnxscript's time on the same graph.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from benchmarks import fmt_seconds, machine_info, measure  # noqa: E402

GOAL_DENSENET_S = 0.040
GOAL_FLAT = 1.3
ROOTS = ("Relu", "Conv", "MaxPool", "AveragePool")
INNERS = ("Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Sqrt", "Log", "Floor", "Ceil", "Softmax", "Erf", "Relu",
          "Sin", "Cos", "Round", "Sign")
ONNX_TO_PASSHOST = {"Relu": "nn.relu", "Conv": "nn.conv2d", "MaxPool": "nn.max_pool2d",
                    "AveragePool": "nn.avg_pool2d", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp",
                    "Abs": "abs", "Neg": "negative", "Sqrt": "sqrt", "Log": "log", "Floor": "floor",
                    "Ceil": "ceil", "Softmax": "nn.softmax", "Erf": "erf", "Sin": "sin", "Cos": "cos",
                    "Round": "round", "Sign": "sign"}


def occurring(path: str) -> set:
    """(consumer, producer of its first input) op-type pairs of the ONNX model at ``path``."""
    import onnx

    graph = onnx.load(path).graph
    producer = {o: n.op_type for n in graph.node for o in n.output}
    return {(n.op_type, producer[n.input[0]]) for n in graph.node if n.input and n.input[0] in producer}


def rule_pairs(occurs: set = frozenset(), n: int = 46) -> list:
    """``n`` (outer, inner) pairs that do not occur in the model (so the rules never fire)."""
    pairs = [(o, i) for o in ROOTS for i in INNERS if (o, i) not in occurs]
    assert len(pairs) >= n, len(pairs)
    return pairs[:n]


def passhost_rules(pairs: list) -> list:
    from passhost.ir.pattern import is_op, rule

    out = []
    for outer, inner in pairs:
        o, i = ONNX_TO_PASSHOST[outer], ONNX_TO_PASSHOST[inner]
        if outer == "Conv":
            def pattern(x, w, _o=o, _i=i):
                return is_op(_o)(is_op(_i)(x), w)
        else:
            def pattern(x, _o=o, _i=i):
                return is_op(_o)(is_op(_i)(x))
        out.append(rule(pattern, lambda x, **kw: x, name=f"{outer}_{inner}", require_type=False))
    return out


def onnxscript_rules(pairs: list) -> list:
    from onnxscript.rewriter import pattern

    def make(outer: str, inner: str):
        # onnxscript reads a pattern's inputs from its parameters: bind the op names by closure
        if outer == "Conv":
            def target(op, x, w):
                return getattr(op, outer)(getattr(op, inner)(x), w)

            def repl(op, x, w):
                return op.Identity(x)
        else:
            def target(op, x):
                return getattr(op, outer)(getattr(op, inner)(x))

            def repl(op, x):
                return op.Identity(x)
        return pattern.RewriteRule(target, repl, name=f"{outer}_{inner}")

    return [make(o, i) for o, i in pairs]


def densenet(directory: str) -> str:
    import onnx
    from passhost_onnx.zoo import light_path, reseed

    path = os.path.join(directory, "densenet121.onnx")
    model = reseed(onnx.load(light_path("densenet121")))
    model.ir_version = max(model.ir_version, 4)
    inits = {t.name for t in model.graph.initializer}
    keep = [i for i in model.graph.input if i.name not in inits]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    onnx.save(model, path)
    return path


def bench_densenet(repeat: int, warmup: int) -> list:
    from passhost import ir
    from passhost.ir.pattern import rewrite

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_rules_") as tmp:
        path = densenet(tmp)
        pairs = rule_pairs(occurring(path))
        rules = passhost_rules(pairs)
        probe = ir.load(path)["main"]
        nodes = sum(1 for _ in ir.post_order(probe.body))
        assert rewrite(rules, probe) is probe, "a rule fired on DenseNet-121"
        r = measure(lambda: ir.load(path)["main"], lambda f: rewrite(rules, f), repeat=repeat, warmup=warmup)
        rows.append({"tool": "passhost", "nodes": nodes, "rules": len(rules), **r})
        try:
            import onnx
            import onnx_ir
            from onnxscript.rewriter import pattern
        except ImportError:
            rows.append({"tool": "onnxscript", "skipped": "onnxscript is not installed"})
            return rows
        rule_set = pattern.RewriteRuleSet(onnxscript_rules(pairs))
        proto = onnx.load(path)
        model = onnx_ir.serde.deserialize_model(proto)
        count = rule_set.apply_to_model(model)
        assert not count, "an onnxscript rule fired on DenseNet-121"
        r = measure(lambda: onnx_ir.serde.deserialize_model(proto), rule_set.apply_to_model,
                    repeat=repeat, warmup=warmup)
        rows.append({"tool": "onnxscript", "nodes": len(proto.graph.node), "rules": len(pairs), **r})
    return rows


def chain(blocks: int):
    """``nn.relu(add(exp(x), c))`` repeated: 3 calls per block (4 nodes with the constant)."""
    from passhost import ir

    x = ir.var("x", shape=(4,))
    c = ir.const(np.ones(4, "float32"))
    e = x
    for _ in range(blocks):
        e = ir.nn.relu(ir.add(ir.exp(e), c))
    return ir.Function([x], e)


def bench_scaling(sizes: list, repeat: int) -> list:
    from passhost.ir.pattern import rewrite

    rules = passhost_rules(rule_pairs())
    rows = []
    for n in sizes:
        blocks = max(1, n // 3)
        r = measure(lambda b=blocks: chain(b), lambda f: rewrite(rules, f), repeat=repeat, warmup=0)
        probe = chain(2)
        assert rewrite(rules, probe) is probe
        calls = 3 * blocks
        rows.append({"calls": calls, "rules": len(rules), **r,
                     "per_node_rule_ns": r["cpu"]["median"] / calls / len(rules) * 1e9})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="small sizes, one run")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    try:
        import passhost_onnx  # noqa: F401
    except ImportError:
        print("bench_rules: skipped: passhost-onnx is needed (bash scripts/dev-install.sh)")
        return 0
    repeat = 1 if args.quick else args.repeat
    dense = bench_densenet(repeat, 0 if args.quick else 1)
    sizes = [3_000, 30_000] if args.quick else [10_000, 100_000, 1_000_000]
    scaling = bench_scaling(sizes, 1 if args.quick else 3)
    print("DenseNet-121, 46 rules that do not fire (median CPU / wall):")
    for r in dense:
        if "skipped" in r:
            print(f"  {r['tool']:<11} {r['skipped']}")
            continue
        print(f"  {r['tool']:<11} {r['nodes']:>6} nodes  {fmt_seconds(r['cpu']['median']):>10}  "
              f"{fmt_seconds(r['wall']['median']):>10}")
    ours = dense[0]["cpu"]["median"]
    print(f"  goal <= {GOAL_DENSENET_S * 1e3:.0f} ms: {'met' if ours <= GOAL_DENSENET_S else 'NOT met'}")
    print("scaling (46 rules, chains of relu(add(exp(x), c))):")
    for r in scaling:
        print(f"  {r['calls']:>9} calls  {fmt_seconds(r['cpu']['median']):>10}  {r['per_node_rule_ns']:.1f} ns per call per rule")
    ratio = scaling[-1]["per_node_rule_ns"] / scaling[0]["per_node_rule_ns"]
    print(f"  largest / smallest per call per rule: {ratio:.2f}x (goal <= {GOAL_FLAT}x: "
          f"{'met' if ratio <= GOAL_FLAT else 'NOT met'})")
    print("(ports of a pass to rules are timed against their hand-written revision by benchmarks/ab_pass.py)")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_info(), "densenet": dense, "scaling": scaling},
                                              indent=1, default=str))
    return 0


if __name__ == "__main__":
    t0 = time.perf_counter()
    code = main()
    print(f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)
    raise SystemExit(code)
