"""passhost beside peer compiler frameworks (xDSL, Apache TVM Relax) on the same programs.

Peers are optional: a peer that is not installed is reported as skipped, never as an
error. ``tox -e bench`` runs the suite with both installed; by hand:
``pip install xdsl apache-tvm``.

Usage::

    python benchmarks/peers.py                       # 1k and 10k nodes
    python benchmarks/peers.py --sizes 1000,10000,100000 --repeat 3
    python benchmarks/peers.py --sizes 300 --repeat 1 --warmup 0   # tiny (smoke)

Programs (the same operations in every framework; ``size`` is passhost's node count):

``chain``
    ``x + 0.5`` applied ``size - 4`` times (passhost ``chain``, xDSL ``arith.addf`` in a
    ``func.func``, Relax ``R.add`` in a dataflow block).
``dupdead``
    ``size // 12`` steps of two identical adds, one dead multiply and an add joining
    the two (passhost binds each with ``let``; xDSL and Relax are in SSA form).
``resnet``
    stacked basic ResNet blocks with constant weights (passhost and Relax only).

Pass pairs: CSE (passhost ``EliminateCommonSubexpr`` / xDSL ``cse`` / Relax
``EliminateCommonSubexpr``), DCE (``DeadCodeElimination`` / ``dce`` /
``DeadCodeElimination``) and folding (passhost ``FoldConstant`` / xDSL
``canonicalize``, which folds and simplifies / Relax ``FoldConstant``). passhost gets
type-inferred input, as the peers' IRs are always typed. ``ratio`` is passhost's median
CPU time over the peer's: below 1 passhost is faster.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import passhost  # noqa: E402
from benchmarks import fmt_seconds, machine_info, measure  # noqa: E402
from benchmarks.bench_scaling import FAMILIES  # noqa: E402
from passhost import ir  # noqa: E402
from passhost.transform import PassContext  # noqa: E402

CASES = ("cse", "dce", "fold")
PASSHOST_PASSES = {"cse": "EliminateCommonSubexpr", "dce": "DeadCodeElimination", "fold": "FoldConstant"}
#: a peer pass above this many nodes is not run (TVM Relax FoldConstant builds and runs
#: a kernel per call: ~0.3 ms per node, 30 s at 100k)
MAX_SIZE = {("tvm", "fold"): 10_000}


# ------------------------------------------------------------------------------- passhost


def passhost_case(family: str, n: int, case: str) -> tuple:
    def setup():
        return ir.infer_type(FAMILIES[family](n))

    p = passhost.passes.get(PASSHOST_PASSES[case])

    def run(mod):
        with PassContext(opt_level=3):
            return p(mod)

    return setup, run


# ------------------------------------------------------------------------------- xDSL


def xdsl_available() -> bool:
    try:
        import xdsl  # noqa: F401
    except ImportError:
        return False
    return True


def xdsl_case(family: str, n: int, case: str):
    """``(setup, run)`` for xDSL, or ``None`` when xDSL has no such program."""
    if family not in ("chain", "dupdead"):
        return None
    from xdsl.context import Context
    from xdsl.dialects import arith, builtin, func
    from xdsl.dialects.builtin import FloatAttr, ModuleOp, f32
    from xdsl.ir import Block, Region
    from xdsl.transforms.canonicalize import CanonicalizePass
    from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
    from xdsl.transforms.dead_code_elimination import DeadCodeElimination

    ctx = Context()
    for d in (builtin.Builtin, arith.Arith, func.Func):
        ctx.load_dialect(d)
    p = {"cse": CommonSubexpressionElimination, "dce": DeadCodeElimination, "fold": CanonicalizePass}[case]()

    def setup():
        block = Block(arg_types=[f32])
        c = arith.ConstantOp(FloatAttr(0.5, f32))
        ops: list = [c]
        v = block.args[0]
        if family == "chain":
            for _ in range(max(1, n - 4)):
                op = arith.AddfOp(v, c.result)
                ops.append(op)
                v = op.result
        else:
            for _ in range(max(1, n // 12)):
                a, b, d = arith.AddfOp(v, c.result), arith.AddfOp(v, c.result), arith.MulfOp(v, c.result)
                s = arith.AddfOp(a.result, b.result)
                ops += [a, b, d, s]
                v = s.result
        ops.append(func.ReturnOp(v))
        block.add_ops(ops)
        return ModuleOp([func.FuncOp("main", ((f32,), (f32,)), Region(block))])

    def run(module):
        p.apply(ctx, module)
        return module

    return setup, run


# ------------------------------------------------------------------------------- TVM Relax


def tvm_available() -> bool:
    try:
        from tvm import relax  # noqa: F401
    except Exception:  # noqa: BLE001 - a broken TVM install is "not available"
        return False
    return True


def tvm_case(family: str, n: int, case: str):
    """``(setup, run)`` for TVM Relax (built with ``relax.BlockBuilder``)."""
    from tvm import relax

    ttype = getattr(relax, "TensorStructInfo", None) or relax.TensorType  # renamed in 0.27
    op = relax.op

    def build():
        bb = relax.BlockBuilder()
        if family == "resnet":
            return _tvm_resnet(bb, n, relax, ttype)
        x = relax.Var("x", ttype((2,), "float32"))
        c = relax.const(np.full((2,), 0.5, dtype="float32"))
        with bb.function("main", [x]):
            with bb.dataflow():
                v = x
                if family == "chain":
                    for _ in range(max(1, n - 4)):
                        v = bb.emit(op.add(v, c))
                else:
                    for _ in range(max(1, n // 12)):
                        a = bb.emit(op.add(v, c))
                        b = bb.emit(op.add(v, c))
                        bb.emit(op.multiply(v, c))
                        v = bb.emit(op.add(a, b))
                gv = bb.emit_output(v)
            bb.emit_func_output(gv)
        return bb.get()

    if family not in ("chain", "dupdead", "resnet"):
        return None
    p = {"cse": relax.transform.EliminateCommonSubexpr, "dce": relax.transform.DeadCodeElimination,
         "fold": relax.transform.FoldConstant}[case]()
    return build, p


def _tvm_resnet(bb, n: int, relax, ttype, channels: int = 4, seed: int = 0):
    """The ``resnet`` family of bench_scaling in Relax (same shapes, same block)."""
    rng = np.random.RandomState(seed)
    c = channels
    op = relax.op
    x = relax.Var("data", ttype((1, c, 8, 8), "float32"))

    def w():
        return relax.const((rng.standard_normal((c, c, 3, 3)) * 0.1).astype("float32"))

    def vec():
        return relax.const(rng.uniform(0.5, 1.5, c).astype("float32"))

    def bn(data):
        out = bb.emit(op.nn.batch_norm(data, vec(), vec(), vec(), vec(), axis=1, epsilon=1e-5))
        return bb.emit(relax.TupleGetItem(out, 0))

    with bb.function("main", [x]):
        with bb.dataflow():
            y = x
            for _ in range(max(1, n // 19)):
                h = bb.emit(op.nn.relu(bn(bb.emit(op.nn.conv2d(y, w(), padding=(1, 1))))))
                h = bn(bb.emit(op.nn.conv2d(h, w(), padding=(1, 1))))
                y = bb.emit(op.nn.relu(bb.emit(op.add(h, y))))
            gv = bb.emit_output(y)
        bb.emit_func_output(gv)
    return bb.get()


# ------------------------------------------------------------------------------- driver

PEERS: dict = {"xdsl": (xdsl_available, xdsl_case), "tvm": (tvm_available, tvm_case)}


def peer_versions(names=tuple(PEERS)) -> dict:
    """Installed version of each peer (``None`` when it is not installed)."""
    out = {}
    for name in names:
        try:
            out[name] = str(__import__(name).__version__)
        except Exception:  # noqa: BLE001
            out[name] = None
    return out


def _timed(setup: Callable, run: Callable, repeat: int, warmup: int) -> dict:
    r = measure(setup, run, repeat=repeat, warmup=warmup)
    return {"cpu": r["cpu"], "wall": r["wall"]}


def run(sizes=(1_000, 10_000), families=("chain", "dupdead", "resnet"), repeat: int = 3,
        warmup: int = 1, peers=tuple(PEERS)) -> list:
    """One row per family, size and pass pair: passhost's times, each peer's, the ratios."""
    available = {p: PEERS[p][0]() for p in peers}
    rows = []
    for family in families:
        for n in sizes:
            for case in CASES:
                setup, fn = passhost_case(family, n, case)
                row = {"bench": "peers", "family": family, "size": n, "case": case,
                       "passhost": _timed(setup, fn, repeat, warmup), "peers": {}}
                for peer in peers:
                    if not available[peer]:
                        row["peers"][peer] = {"skipped": "not installed"}
                        continue
                    if n > MAX_SIZE.get((peer, case), n):
                        row["peers"][peer] = {"skipped": f"above {MAX_SIZE[(peer, case)]} nodes"}
                        continue
                    made = PEERS[peer][1](family, n, case)
                    if made is None:
                        row["peers"][peer] = {"skipped": f"no {family} program"}
                        continue
                    try:
                        res = _timed(made[0], made[1], repeat, warmup)
                    except Exception as exc:  # noqa: BLE001 - a peer failing is a finding, not a crash
                        row["peers"][peer] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                        continue
                    res["ratio"] = row["passhost"]["cpu"]["median"] / res["cpu"]["median"]
                    row["peers"][peer] = res
                rows.append(row)
    return rows


def print_table(rows: list, out=sys.stdout) -> None:
    print(f"{'family':<8}{'size':>8} {'pass':<6}{'passhost cpu':>13}  peers (median cpu, passhost/peer)", file=out)
    for r in rows:
        parts = []
        for peer, res in r["peers"].items():
            if "cpu" in res:
                parts.append(f"{peer} {fmt_seconds(res['cpu']['median'])} (x{res['ratio']:.2f})")
            else:
                parts.append(f"{peer} {res.get('skipped') or res.get('error')}")
        print(f"{r['family']:<8}{r['size']:>8} {r['case']:<6}{fmt_seconds(r['passhost']['cpu']['median']):>13}  "
              + "; ".join(parts), file=out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000", help="comma-separated node counts (default 1000,10000)")
    ap.add_argument("--family", default="chain,dupdead,resnet", help="comma-separated families")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated peers (default xdsl,tvm)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    peers = tuple(p for p in args.peers.split(",") if p)
    bad = [p for p in peers if p not in PEERS]
    if bad:
        ap.error(f"unknown peer {bad[0]!r}; peers: {', '.join(PEERS)}")
    rows = run(tuple(int(s) for s in args.sizes.split(",") if s),
               tuple(f for f in args.family.split(",") if f), args.repeat, args.warmup, peers)
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_info(), "peer_versions": peer_versions(),
                                               "results": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
