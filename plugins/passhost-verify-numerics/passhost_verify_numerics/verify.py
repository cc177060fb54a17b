"""The ``verify-numerics`` instrument: which pass changed the results of ``@main``?

Before the pipeline (the first ``run_before_pass`` at nesting depth 0) the instrument
evaluates ``@main`` with :func:`passhost.ir.evaluate` on seeded random inputs (or the
arrays of a ``.npz`` file, by parameter name) and keeps the result as the reference.
After every pass that changed the module (same module object or same function objects:
unchanged; otherwise :func:`passhost.ir.structural_hash` decides) it evaluates again
and compares with ``rtol``/``atol``. A change made by an enclosing pass before it runs
a nested one (a function pass before its ``InferType``) is checked when the nested
pass starts and blamed on the enclosing pass.

On a mismatch the failing pass is recorded in :attr:`VerifyNumerics.failures` with the
maximum absolute and relative error, and the new results become the reference, so a
later pass is blamed only if it changes the results again. With ``stop=True`` the
instrument raises a :class:`~passhost.errors.PassError` naming the pass instead, which
stops the pipeline (``passhost run`` then reports that pass and writes a reproducer).

A module that cannot be evaluated (e.g. a mid-pipeline state the interpreter cannot
run) is not a failure: the pass is listed in :attr:`VerifyNumerics.unevaluated`.

Example (``SignFlip`` negates ``@main``'s result)::

    $ passhost run model.txt -p FoldConstant,SignFlip --instrument 'verify-numerics(rtol=1e-4)'
    verify-numerics: pass 'SignFlip' changed the results of @main: output: max abs error 8.85, max rel error 2 (6 of 6 elements beyond rtol=0.0001, atol=1e-05)
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Optional


from passhost import ir
from passhost.errors import PassError, PasshostError
from passhost.instrument import PassInstrument
from passhost.numerics import compare_outputs, evaluable, load_npz, random_inputs

__all__ = ["VerifyNumerics", "NumericsFailure", "compare_results"]

_log = logging.getLogger("passhost.verify_numerics")


@dataclass(frozen=True)
class NumericsFailure:
    """A pass after which ``@main``'s results differ from the reference."""

    pass_name: str
    depth: int
    max_abs_error: float
    max_rel_error: float
    message: str

    def __str__(self) -> str:
        return f"pass '{self.pass_name}' changed the results of @main: {self.message}"


def compare_results(got: Any, want: Any, rtol: float, atol: float) -> Optional[tuple]:
    """None when ``got`` matches ``want`` (nested tuples of arrays; NaN matches NaN), else
    ``(max_abs_error, max_rel_error, message)`` for the worst array
    (:func:`passhost.numerics.compare_outputs`)."""
    return compare_outputs(got, want, rtol, atol)


class VerifyNumerics(PassInstrument):
    """Evaluate ``@main`` before the pipeline and after every pass that changed it.

    :param inputs: path of an ``.npz`` with one array per ``@main`` parameter (by name;
        pickles are refused), a ``{name: array}`` dict, a list of arrays, or None for
        seeded uniform random inputs in [-1, 1)
    :param seed: seed of the random inputs
    :param rtol: relative tolerance
    :param atol: absolute tolerance
    :param stop: raise a ``PassError`` naming the first failing pass instead of recording it
    :ivar failures: list of :class:`NumericsFailure`
    :ivar unevaluated: ``[(pass name, reason)]`` for modules that could not be evaluated
    :ivar checked: number of module states evaluated after a change
    """

    name = "verify-numerics"

    def __init__(self, inputs: Any = None, seed: int = 0, rtol: float = 1e-5, atol: float = 1e-5,
                 stop: bool = False) -> None:
        for key, value in (("rtol", rtol), ("atol", atol)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise PasshostError(f"verify-numerics: {key} must be a non-negative number, got {value!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise PasshostError(f"verify-numerics: seed must be an integer, got {seed!r}")
        if not isinstance(stop, bool):
            raise PasshostError(f"verify-numerics: stop must be True or False, got {stop!r}")
        self.inputs = load_npz(inputs, "inputs", prefix="verify-numerics: ") if isinstance(inputs, str) else inputs
        self.seed, self.rtol, self.atol, self.stop = seed, float(rtol), float(atol), stop
        self._reset()

    def _reset(self) -> None:
        self.failures: list = []
        self.unevaluated: list = []
        self.checked = 0
        self.error: Optional[str] = None
        self._args: Optional[list] = None
        self._want: Any = None
        self._last: Any = None
        self._stack: list = []

    # -- evaluation ------------------------------------------------------------------------
    def _arguments(self, mod: Any) -> list:
        typed = ir.infer_type(mod)  # ``mod`` is an evaluable() copy when it was untyped
        params = typed["main"].params
        if self.inputs is None:
            for p in params:
                if not isinstance(p.checked_type, ir.TensorType):
                    raise PasshostError(f"verify-numerics: parameter %{p.name_hint} of @main is not a tensor "
                                        f"({p.checked_type}); give inputs=...")
            return random_inputs(typed, self.seed)
        if isinstance(self.inputs, dict):
            missing = [p.name_hint for p in params if p.name_hint not in self.inputs]
            if missing:
                raise PasshostError(f"verify-numerics: no input for parameter %{missing[0]} of @main")
            return [self.inputs[p.name_hint] for p in params]
        return list(self.inputs)

    def _start(self, mod: Any) -> None:
        try:
            copy = evaluable(mod)
            self._args = self._arguments(copy)
            self._want = ir.evaluate(copy, *self._args)
        except PasshostError as err:
            self.error = f"cannot evaluate the input module, nothing is verified: {' '.join(str(err).split())}"
            _log.warning("verify-numerics: %s", self.error)
            self._args = None
        self._last = mod

    def _check(self, mod: Any, blame: str, depth: int) -> None:
        if self._args is None or not ir.module_changed(self._last, mod):
            self._last = mod
            return
        self._last = mod
        try:
            got = ir.evaluate(evaluable(mod), *self._args)
        except PasshostError as err:
            self.unevaluated.append((blame, " ".join(str(err).split())))
            return
        self.checked += 1
        diff = compare_results(got, self._want, self.rtol, self.atol)
        if diff is None:
            return
        failure = NumericsFailure(blame, depth, diff[0], diff[1], diff[2])
        self.failures.append(failure)
        self._want = got  # blame later passes only for further changes
        if self.stop:
            err = PassError(f"verify-numerics: {failure}", blame)
            err.passhost_pass_path = [blame]  # the pass is the culprit, not this hook
            raise err

    # -- the protocol --------------------------------------------------------------------------
    def enter_pass_ctx(self) -> None:
        self._reset()

    def run_before_pass(self, mod: Any, info: Any) -> None:
        if not self._stack:
            if mod is not self._last:  # a new top-level run (not a continuation of the last one)
                self._start(mod)
        else:
            # the enclosing pass changed the module before running this nested one
            self._check(mod, self._stack[-1], len(self._stack) - 1)
        self._stack.append(info.name)

    def run_after_pass(self, mod: Any, info: Any) -> None:
        if self._stack:
            self._stack.pop()
        self._check(mod, info.name, len(self._stack))

    # -- results ----------------------------------------------------------------------------------
    @property
    def first_failure(self) -> Optional[NumericsFailure]:
        return self.failures[0] if self.failures else None

    def render(self) -> str:
        """One line per failure (and per unevaluated module), or a one-line all-clear."""
        if self.error:
            return f"verify-numerics: {self.error}\n"
        if self._last is None:
            return ""
        lines = [f"verify-numerics: {f}" for f in self.failures]
        lines += [f"verify-numerics: could not evaluate @main after pass '{n}': {why}"
                  for n, why in self.unevaluated]
        if not self.failures:
            lines.append(f"verify-numerics: results of @main preserved ({self.checked} changed module "
                         f"state{'s' if self.checked != 1 else ''} checked, rtol={self.rtol:g}, atol={self.atol:g})")
        return "\n".join(lines) + "\n"
