"""Bisecting a pipeline: find the first pass that changes a module's results (private;
the ``passhost bisect`` command is :mod:`passhost.cli.bisect`).

The pipeline is flattened (nested :class:`~passhost.transform.Sequential` s that the
context would run are replaced by their passes; those it would skip are dropped) into
passes ``#1 .. #N``. The unoptimised module is evaluated with :func:`passhost.ir.evaluate`
on the inputs (seeded random arrays, or ``--inputs FILE.npz``) to get the reference.
Like LLVM's ``-opt-bisect-limit``, a binary search then runs prefixes of the flattened
pipeline and compares each prefix's results with the reference (``rtol``/``atol``):
the first pass of the shortest failing prefix is the guilty one. A prefix "fails" when
its results differ, when a pass raises, or when its output cannot be evaluated.

The search assumes that once results are wrong they stay wrong (as LLVM's does); it
runs each prefix from the cached output of the longest good prefix found so far and
evaluates about ``log2(N) + 1`` modules.

Exit status: 0 the guilty pass was found (its before/after IR is written to ``-o DIR``),
1 no pass changes the results, 2 bad usage or input (including a module whose
reference evaluation fails).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import ir, transform
from .errors import PasshostError, UsageError
from .numerics import compare_outputs, evaluable, load_npz, random_inputs

__all__ = ["flatten", "compare_results", "Bisection", "bisect", "seeded_inputs", "load_inputs"]


# -- comparing results ------------------------------------------------------------------------
def compare_results(got: Any, want: Any, rtol: float, atol: float) -> Optional[str]:
    """None when ``got`` matches ``want`` (nested tuples of arrays) within ``rtol``/``atol``
    (NaNs match NaNs), else a one-line description of the worst difference
    (:func:`passhost.numerics.compare_outputs`)."""
    diff = compare_outputs(got, want, rtol, atol)
    return None if diff is None else diff[2]


def seeded_inputs(mod: ir.IRModule, seed: int) -> list:
    """Uniform [-1, 1) arrays (integers in [-1, 1]) for ``main``'s parameters, seeded."""
    return random_inputs(mod, seed)


def load_inputs(mod: ir.IRModule, path: str) -> list:
    """Arrays for ``main``'s parameters from an ``.npz`` saved with names (no pickles)."""
    arrays = load_npz(path, "--inputs", UsageError)
    names = [p.name_hint for p in mod["main"].params]
    missing = [n for n in names if n not in arrays]
    if missing:
        raise UsageError(f"--inputs {path!r} has no array for parameter %{missing[0]} of @main "
                           f"(it needs: {', '.join(names) or 'none'})")
    return [arrays[n] for n in names]


# -- flattening --------------------------------------------------------------------------------
def flatten(seq: Any, ctx: transform.PassContext, where: str = "") -> list:
    """``[(pass, where)]``: the leaf passes of ``seq`` in run order.

    A nested Sequential the context would skip is dropped; one it runs is replaced by
    the passes its own ``required`` names (resolved now) followed by its children.
    ``where`` names the enclosing Sequentials (``"FoldScaleAxis"``).
    """
    out: list = []
    stack = [(p, where) for p in reversed(seq.passes)]
    while stack:
        p, w = stack.pop()
        if isinstance(p, transform.Sequential):
            if not ctx.pass_enabled(p.info):
                continue
            inner = f"{w}/{p.info.name}" if w else p.info.name
            stack.extend((c, inner) for c in reversed(p.passes))
            stack.extend((transform.resolve_pass(r), w) for r in reversed(p.info.required))
        else:
            out.append((p, w))
    return out


# -- the search ---------------------------------------------------------------------------------
@dataclass
class Bisection:
    """The outcome: ``index`` is the 1-based number of the guilty pass (None: none found)."""

    passes: list
    index: Optional[int]
    reason: str = ""
    before: Optional[ir.IRModule] = None
    after: Optional[ir.IRModule] = None
    error: Optional[BaseException] = None
    evaluations: int = 0

    @property
    def guilty(self) -> Optional[Any]:
        return None if self.index is None else self.passes[self.index - 1][0]


def bisect(mod: ir.IRModule, leaves: list, ctx: transform.PassContext, inputs: list, *, rtol: float,
           atol: float, log: Callable[[str], None] = lambda line: None) -> Bisection:
    """Binary-search the first of ``leaves`` after which ``mod``'s results differ.

    :raises PasshostError: the unoptimised module cannot be evaluated (bad input)
    """
    try:
        want = ir.evaluate(mod, *inputs)
    except PasshostError as err:
        raise type(err)(f"cannot evaluate the input module: {' '.join(str(err).split())}") from None
    n = len(leaves)
    cache: dict = {0: mod}
    result = Bisection(leaves, None)

    def probe(k: int, lo: int) -> Optional[str]:
        """Run passes lo+1..k on the cached output of prefix lo; None if results match."""
        try:
            with ctx:
                out = transform.Sequential([p for p, _ in leaves[lo:k]])(cache[lo])
        except Exception as err:
            probe.error = err
            return f"pass raised {type(err).__name__}: {' '.join(str(err).split())}"
        probe.error = None
        cache[k] = out
        result.evaluations += 1
        try:
            got = ir.evaluate(evaluable(out), *inputs)
        except Exception as err:
            return f"the output cannot be evaluated: {type(err).__name__}: {' '.join(str(err).split())}"
        return compare_results(got, want, rtol, atol)

    probe.error = None
    lo, hi = 0, n
    why = probe(n, 0) if n else None
    log(f"passes 1..{n}: " + (why or "results match"))
    if why is None:
        return result
    hi_why, hi_error = why, probe.error
    while hi - lo > 1:
        mid = (lo + hi) // 2
        why = probe(mid, lo)
        log(f"passes 1..{mid}: " + (why or "results match"))
        if why is None:
            lo = mid
        else:
            hi, hi_why, hi_error = mid, why, probe.error
    result.index = hi
    result.reason = hi_why
    result.error = hi_error
    result.before = cache[lo]  # lo == hi - 1: the output of the last good prefix
    result.after = cache.get(hi)  # None when the guilty pass raised
    return result
