"""A seeded differential fuzzer of every pass (issue 38 §5).

Each random graph (:func:`passhost.testing.random_graph` with global functions, some
``Inline=1``, closures capturing outer values, ``if`` branches and closure bodies as
nested scopes, used and dead lets, tuples; every fifth one with symbolic batch, height
and width) is printed and read back, evaluated, then run through every registered
pass and every ``-O`` level's default pipeline. Each output is checked, in this order, and
a failure is counted under the first check it fails:

* ``error``: the pass raised on this valid module (typed or not);
* ``ill-formed``: :func:`passhost.ir.well_formed` rejects its output;
* ``reparse``: its text (``astext``) does not parse back to a structurally equal module
  (the input's own text is checked the same way first);
* ``wrong``: ``main`` gives other outputs than before (``rtol=1e-4, atol=1e-5``: the passes
  reassociate float32 arithmetic; the graphs' values are clamped to about 10).

Quick mode (the default run): ``QUICK_GRAPHS`` graphs from seed 0, in a few seconds.
Long mode: ``pytest tests/test_fuzz_passes.py --fuzz-graphs 10000`` (``tox -e fuzz``) runs
that many in chunks of ``CHUNK`` (so ``-n auto`` spreads them), and with
``--fuzz-report FILE`` each chunk appends its counts to FILE as a JSON line, which
``python tests/test_fuzz_passes.py --summary FILE`` adds up (``tox -e fuzz`` does both).
A failure names the seed and the case; ``random_graph`` rebuilds the graph from the seed
alone.
"""
from __future__ import annotations

import json
import os
import traceback

import numpy as np

import passhost
from passhost import ir, transform
from passhost.testing import evaluate_main
from passhost.testing.random_graph import random_graph, random_inputs

QUICK_GRAPHS = 6
CHUNK = 50
RTOL, ATOL = 1e-4, 1e-5
OPT_LEVELS = (0, 1, 2, 3)
#: passes that need options to run, and variants worth their own run
OPTIONS = {
    "ConvertLayout": [{"desired_layouts": {"nn.conv2d": ["NHWC", "default"]}}],
    "DeadCodeElimination": [{}, {"inline_once": True}],
    # (random graphs seldom read one value through three dense layers)
    "CombineParallelDense": [{}, {"min_num_branches": 2}, {"min_num_branches": 2, "to_batch": True}],
}
SKIP = {"PrintIR"}  # writes the module to stderr: nothing to check beyond the identity
#: pass sequences the issue found failures after (A-normal form back to graph form)
PIPELINES = ["ToANormalForm,ToGraphNormalForm", "ToANormalForm,DeadCodeElimination(inline_once=True)"]
CLASSES = ("error", "ill-formed", "reparse", "wrong")


def graph(seed: int) -> ir.IRModule:
    """The fuzzer's graph number ``seed`` (typed for an even seed: a pass meets both)."""
    mod = random_graph(seed, 4 + seed % 9, lets=seed % 3 != 0, tuples=seed % 4 != 1, ifs=True,
                       rank5=seed % 7 == 0, closures=True, functions=True, dead_lets=seed % 2 == 0,
                       scopes=True, symbolic=seed % 5 == 4)
    return mod if seed % 2 else ir.infer_type(mod)


def cases() -> list:
    """``(label, pass)`` for every registered pass (and option variant), the
    :data:`PIPELINES` and every -O level."""
    out = []
    for name in passhost.passes.names():
        if name in SKIP:
            continue
        for opts in OPTIONS.get(name, [{}]):
            label = name + ("" if not opts else "(" + ",".join(f"{k}={v!r}" for k, v in opts.items()) + ")")
            out.append((label, passhost.passes.get(name, **opts)))
    for text in PIPELINES:
        out.append((text, passhost.pipeline(text)))
    for level in OPT_LEVELS:
        out.append((f"-O{level}", passhost.default_pipeline(level)))
    return out


def _close(got, want) -> None:
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), "a different number of outputs"
        for g, w in zip(got, want):
            _close(g, w)
        return
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=RTOL, atol=ATOL)


def _reparses(mod: ir.IRModule) -> None:
    again = ir.parse(ir.astext(mod))
    assert ir.structural_equal(again, mod, map_free_vars=True), "the re-parsed module differs"


def check(mod: ir.IRModule, label: str, p, inputs: list, want) -> tuple:
    """``(class, message)`` of the first check ``p``'s output on ``mod`` fails, or ``None``."""
    stage = "error"
    try:
        with transform.PassContext(opt_level=3):
            out = p(mod)
        stage = "ill-formed"
        ir.well_formed(out)
        stage = "reparse"
        _reparses(out)
        stage = "wrong"
        _close(evaluate_main(out, inputs), want)
    except Exception as err:  # every failure is counted and reported with its seed
        last = traceback.extract_tb(err.__traceback__)[-1]
        return stage, f"{label}: {type(err).__name__}: {str(err)[:300]} ({last.filename}:{last.lineno})"
    return None


def fuzz(seeds: range, all_cases: list) -> dict:
    """Run every case on the graphs of ``seeds``; the counts and the failures."""
    counts = {"graphs": 0, "checks": 0, **{c: 0 for c in CLASSES}}
    failures = []
    for seed in seeds:
        mod = graph(seed)
        counts["graphs"] += 1
        inputs = random_inputs(mod, seed)
        want = evaluate_main(mod, inputs)
        found = [check(mod, "input", lambda m: m, inputs, want)]
        found += [check(mod, label, p, inputs, want) for label, p in all_cases]
        counts["checks"] += len(found)
        for f in found:
            if f is not None:
                counts[f[0]] += 1
                failures.append(f"seed {seed}: {f[0]}: {f[1]}")
    counts["failures"] = failures
    return counts


def _report(config, counts: dict) -> None:
    path = config.getoption("--fuzz-report")
    if path:
        line = json.dumps({k: v for k, v in counts.items() if k != "failures"} | {"failed": counts["failures"][:200]})
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def pytest_generate_tests(metafunc):
    if "chunk" in metafunc.fixturenames:
        total = metafunc.config.getoption("--fuzz-graphs")
        if total is None:
            metafunc.parametrize("chunk", [range(QUICK_GRAPHS)], ids=["quick"])
        else:
            first = metafunc.config.getoption("--fuzz-first")
            bounds = range(first, first + total, CHUNK)
            metafunc.parametrize("chunk", [range(s, min(s + CHUNK, first + total)) for s in bounds],
                                 ids=[f"seeds{s}" for s in bounds])


def test_every_pass_and_level_on_random_graphs(chunk, request):
    counts = fuzz(chunk, cases())
    _report(request.config, counts)
    failures = counts.pop("failures")
    assert not failures, f"{counts}\n" + "\n".join(failures[:30])


def test_the_graphs_hold_every_construct():
    seen = set()
    for seed in range(30):
        mod = graph(seed)
        text = ir.astext(mod)
        seen |= {k for k, word in (("global", "def @g"), ("inline", "Inline=1"), ("closure", "fn ("),
                                   ("let", "let %"), ("if", "if ("), ("tuple", ".0"), ("symbolic", "(n, "))
                 if word in text}
    assert seen == {"global", "inline", "closure", "let", "if", "tuple", "symbolic"}


def test_the_scope_options_are_deterministic_well_typed_and_run():
    options = {"closures": True, "functions": True, "dead_lets": True, "scopes": True}
    for seed in range(40):
        mod = random_graph(seed, 10, lets=True, tuples=True, **options)
        assert ir.astext(mod) == ir.astext(random_graph(seed, 10, lets=True, tuples=True, **options))
        typed = ir.infer_type(mod)
        ir.well_formed(typed)
        evaluate_main(typed, random_inputs(typed, seed))


def summary(path: str) -> str:
    """The totals of a ``--fuzz-report`` file: graphs, checks, failures by class."""
    totals = {"graphs": 0, "checks": 0, **{c: 0 for c in CLASSES}}
    failed: list = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            failed += row.pop("failed", [])
            for k in totals:
                totals[k] += row.get(k, 0)
    head = ", ".join(f"{k} {v}" for k, v in totals.items())
    return "\n".join([f"pass fuzzer: {head}"] + failed[:50])


if __name__ == "__main__":  # python tests/test_fuzz_passes.py --summary REPORT (tox -e fuzz)
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "--summary":
        sys.exit("usage: python tests/test_fuzz_passes.py --summary REPORT.jsonl")
    print(summary(sys.argv[2]))
