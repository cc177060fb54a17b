"""Overhead of the instrument plugins on a real compile: ResNet-50, default pipeline, -O3.

Runs ``passhost.default_pipeline(3)`` over ResNet-50 (parameters bound, a freshly built module for every run) under a
``PassContext(opt_level=3)`` with no instrument and with each instrument in turn
(``timing`` by default), alternating the runs so that drift of this shared machine hits
both sides alike, and prints the median wall and CPU time of each and the overhead in
percent (the goal for ``timing`` is at most 5 %). ``render()`` is called inside the
context, as ``passhost run`` does, and counted.

On a loaded machine the end-to-end wall figures are mostly noise, so the script also
times each instrument's before/after hook pair in isolation and multiplies it by the
number of pass invocations of one run: a load-independent estimate of the overhead.

Usage: ``python benchmarks/bench_instruments.py [--repeats R] [--layers N] [--instrument NAME]...``
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time

import passhost
from passhost import ir, testing
from passhost.transform import PassContext


def _workload(layers: int) -> ir.IRModule:
    mod, params = testing.resnet(num_layers=layers)
    out = mod.copy()
    out["main"] = ir.bind_params_by_name(mod["main"], params)
    return out


def _once(mod: ir.IRModule, name: str | None) -> tuple:
    seq = passhost.default_pipeline(3)
    insts = [] if name is None else [passhost.instruments.get(name)]
    gc.collect()  # start every run from the same collector state (outside the clock)
    w0, c0 = time.perf_counter(), time.process_time()
    with PassContext(opt_level=3, instruments=insts):
        seq(mod)
        for inst in insts:
            render = getattr(inst, "render", None)
            if callable(render):
                render()
    return time.perf_counter() - w0, time.process_time() - c0


def _hook_cost_us(name: str, mod: ir.IRModule, loops: int = 20000) -> float:
    """Median cost in microseconds of one run_before_pass + run_after_pass pair, measured
    in isolation (immune to the machine's load, unlike the end-to-end figures)."""
    from passhost.transform import PassInfo

    inst = passhost.instruments.get(name)
    info = PassInfo(0, "Bench")
    before, after = inst.run_before_pass, inst.run_after_pass
    samples = []
    for _ in range(5):
        inst.enter_pass_ctx()
        t0 = time.perf_counter()
        for _ in range(loops):
            before(mod, info)
            after(mod, info)
        samples.append((time.perf_counter() - t0) / loops * 1e6)
        inst.exit_pass_ctx()
    return statistics.median(samples)


def _invocations(mod: ir.IRModule) -> int:
    """How many pass invocations the -O3 default pipeline makes (nested ones included)."""
    from passhost.instrument import PassInstrument

    class Count(PassInstrument):
        n = 0

        def run_before_pass(self, mod, info):
            Count.n += 1

    with PassContext(opt_level=3, instruments=[Count()]):
        passhost.default_pipeline(3)(mod)
    return Count.n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--layers", type=int, default=50)
    parser.add_argument("--instrument", action="append", default=None,
                        help="instrument to measure (repeatable; default: timing)")
    args = parser.parse_args()
    names = args.instrument or ["timing"]
    _once(_workload(args.layers), None)  # warm process-wide caches (op tables) first
    samples: dict = {None: [], **{n: [] for n in names}}
    for _ in range(args.repeats):
        for name in samples:
            # a fresh module each run: types and folded constants are not reused
            samples[name].append(_once(_workload(args.layers), name))
    base_wall = statistics.median(s[0] for s in samples[None])
    base_cpu = statistics.median(s[1] for s in samples[None])
    print(f"ResNet-{args.layers}, default pipeline -O3, median of {args.repeats} runs")
    print(f"{'instrument':<12}{'wall s':>9}{'cpu s':>9}{'wall %':>9}{'cpu %':>9}")
    for name, runs in samples.items():
        wall = statistics.median(s[0] for s in runs)
        cpu = statistics.median(s[1] for s in runs)
        print(f"{name or '(none)':<12}{wall:>9.3f}{cpu:>9.3f}"
              f"{100 * (wall / base_wall - 1):>+9.2f}{100 * (cpu / base_cpu - 1):>+9.2f}")
    n = _invocations(_workload(args.layers))
    print(f"\nhook cost in isolation ({n} pass invocations per run, before+after pair each; "
          "op-diff/trace reuse their cached count here, a changed module costs one walk more):")
    for name in names:
        mod = _workload(args.layers)
        pair = _hook_cost_us(name, mod, loops=200 if name in ("print-ir",) else 20000)
        total_ms = pair * n / 1000
        print(f"{name:<12}{pair:>9.2f} us/pass  = {total_ms:.3f} ms/run = "
              f"{100 * total_ms / 1000 / base_cpu:.3f} % of the uninstrumented CPU time")


if __name__ == "__main__":
    main()
