"""Pass-manager overhead per pass.

Runs a Sequential of 1,000 identity module passes (every one enabled) under a
PassContext with no instruments and with three Python instruments whose hooks only
return, and prints the median time per pass in microseconds. For reference it also
times a bare loop doing the same gating and hook calls without the pass manager.

Usage: ``python benchmarks/bench_passmgr.py [--passes N] [--repeats R]``
"""
from __future__ import annotations

import argparse
import statistics
import time

from passhost.instrument import PassInstrument
from passhost.ir import IRModule
from passhost.transform import PassContext, Sequential, module_pass


class Quiet(PassInstrument):
    """Overrides the three per-pass hooks; each only returns."""

    def should_run(self, mod, info):
        return True

    def run_before_pass(self, mod, info):
        return None

    def run_after_pass(self, mod, info):
        return None


def identity(mod, ctx):
    return mod


def _median_us(fn, n_passes: int, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) / n_passes * 1e6)
    return statistics.median(samples)


def _bare_loop(entries, mod, disabled, forced, opt_level, should_run, before, after):
    for info, name, level, body in entries:
        if name in disabled or (level > opt_level and name not in forced):
            continue
        if should_run:
            run = True
            for fn in should_run:
                if not fn(mod, info):
                    run = False
            if not run:
                continue
        for fn in before:
            fn(mod, info)
        mod = body(mod, None)
        for fn in after:
            fn(mod, info)
    return mod


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=51)
    args = parser.parse_args()

    passes = [module_pass(identity, opt_level=i % 3, name=f"Identity{i}") for i in range(args.passes)]
    seq = Sequential(passes)
    mod = IRModule()
    entries = [(p.info, p.info.name, p.info.opt_level, p.pass_func) for p in passes]

    for n_instr in (0, 3):
        instruments = [Quiet() for _ in range(n_instr)]
        with PassContext(opt_level=2, instruments=instruments) as ctx:
            seq(mod, ctx)  # warm up
            us = _median_us(lambda: seq(mod, ctx), args.passes, args.repeats)
        hooks = [tuple(getattr(i, h) for i in instruments)
                 for h in ("should_run", "run_before_pass", "run_after_pass")]
        bare = _median_us(lambda hooks=hooks: _bare_loop(entries, mod, frozenset(), frozenset(), 2, *hooks),
                          args.passes, args.repeats)
        print(f"{n_instr} instruments: {us:.3f} us/pass  (bare loop {bare:.3f} us/pass)")


if __name__ == "__main__":
    main()
