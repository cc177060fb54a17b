"""Test helpers for passes: TVM's before/expected idiom and semantic checks.

::

    def test_fold():
        x = ir.var("x", shape=(2,))
        before = ir.Function([x], ir.add(x, ir.add(ir.const(1.0), ir.const(2.0))))
        expected = ir.Function([x], ir.add(x, ir.const(3.0)))
        check_pass(passes.FoldConstant(), before, expected)
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from .. import ir

__all__ = ["check_pass", "assert_semantics_preserved", "run_opt_pass", "as_module", "evaluate_main"]

ModLike = Union[ir.IRModule, ir.Expr]


def as_module(obj: ModLike) -> ir.IRModule:
    """``obj`` as a module: a module as is, a function or expression as ``main``."""
    if isinstance(obj, ir.IRModule):
        return obj
    if isinstance(obj, ir.Expr):
        return ir.IRModule.from_expr(obj)
    if callable(obj):  # TVM tests often pass ``before`` / ``expected`` builder functions
        return as_module(obj())
    raise TypeError(f"expected an IRModule, a Function or an expression, got {type(obj).__name__}")


def _text(obj: Any) -> str:
    try:
        return str(obj)
    except Exception as err:  # still report the mismatch when the printer fails
        return f"{obj!r} (could not print: {type(err).__name__}: {err})"


def check_pass(pass_: Callable, before: ModLike, expected: Optional[ModLike] = None, *,
               infer: bool = True, map_free_vars: bool = False,
               compare: str = "auto") -> ir.IRModule:
    """Run ``pass_`` on ``before`` and assert the result is structurally equal to
    ``expected`` (TVM's ``before``/``expected`` test idiom).

    Both sides are type-inferred first (unless ``infer=False``) so annotations and
    return types filled by inference do not cause spurious differences. On a mismatch
    the ``AssertionError`` shows the pass output and the expected text.

    :param pass_: a pass (or any ``mod -> mod`` callable)
    :param before: module, function or expression (``main``); or a builder callable
    :param expected: the same kinds; ``None`` means "unchanged" (equal to ``before``)
    :param compare: ``"main"`` compares only ``main``, ``"module"`` all functions;
        ``"auto"``: ``"module"`` when ``expected`` is a module, else ``"main"``
    :returns: the pass output (typed when ``infer``)
    """
    mod = as_module(before)
    if infer:
        mod = ir.infer_type(mod)
    # the "unchanged" expectation must be captured before the pass runs
    exp = mod if expected is None else as_module(expected)
    if infer and expected is not None:
        exp = ir.infer_type(exp)
    out = pass_(mod)
    if not isinstance(out, ir.IRModule):
        raise AssertionError(f"{_pass_name(pass_)} returned {type(out).__name__}, not an IRModule")
    if infer:
        out = ir.infer_type(out)
    if compare == "auto":
        compare = "module" if isinstance(expected, ir.IRModule) else "main"
    if compare == "main":
        got, want = out["main"], exp["main"]
    elif compare == "module":
        got, want = out, exp
    else:
        raise ValueError(f"compare must be 'auto', 'main' or 'module', got {compare!r}")
    if not ir.structural_equal(got, want, map_free_vars=map_free_vars):
        raise AssertionError(
            f"{_pass_name(pass_)} did not produce the expected program\n"
            f"--- actual ---\n{_text(got)}\n--- expected ---\n{_text(want)}")
    return out


def _pass_name(pass_: Any) -> str:
    info = getattr(pass_, "info", None)
    name = getattr(info, "name", None)
    return f"pass {name}" if name else f"pass {pass_!r}"


def run_opt_pass(expr: ModLike, opt_pass: Callable, infer: bool = True) -> ir.Expr:
    """TVM's ``run_opt_pass``: run ``opt_pass`` on ``expr`` (wrapped in a module) and
    return the resulting ``main`` function (type-inferred unless ``infer=False``)."""
    mod = as_module(expr)
    if infer:
        mod = ir.infer_type(mod)
    out = opt_pass(mod)
    if infer:
        out = ir.infer_type(out)
    return out["main"]


def evaluate_main(mod: ModLike, inputs: Union[Sequence, dict]) -> Any:
    """Evaluate ``main`` with positional inputs or a ``{param name: array}`` dict."""
    mod = as_module(mod)
    if isinstance(inputs, dict):
        names = [p.name_hint for p in mod["main"].params]
        missing = [n for n in names if n not in inputs]
        if missing:
            raise KeyError(f"no input for parameter %{missing[0]} (parameters: {', '.join(names)})")
        inputs = [inputs[n] for n in names]
    return ir.evaluate(mod, *inputs)


def _assert_close(got: Any, want: Any, rtol: float, atol: float, where: str) -> None:
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            raise AssertionError(f"{where}: expected a tuple of {len(want)} values, got {type(got).__name__}")
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_close(g, w, rtol, atol, f"{where}[{i}]")
        return
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(f"{where}: expected {want.dtype}{list(want.shape)}, got {got.dtype}{list(got.shape)}")
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)


def assert_semantics_preserved(pass_: Callable, mod: ModLike, inputs: Union[Sequence, dict, None] = None,
                               *, rtol: float = 1e-5, atol: float = 1e-5, seed: int = 0) -> ir.IRModule:
    """Evaluate ``main`` before and after ``pass_`` and assert the results agree.

    :param inputs: positional arrays, a ``{name: array}`` dict, or ``None`` for seeded
        random inputs (:func:`passhost.testing.random_inputs`)
    :returns: the pass output
    """
    mod = ir.infer_type(as_module(mod))
    if inputs is None:
        from .random_graph import random_inputs

        inputs = random_inputs(mod, seed)
    want = evaluate_main(mod, inputs)
    out = pass_(mod)
    if not isinstance(out, ir.IRModule):
        raise AssertionError(f"{_pass_name(pass_)} returned {type(out).__name__}, not an IRModule")
    got = evaluate_main(out, inputs)
    try:
        _assert_close(got, want, rtol, atol, "main")
    except AssertionError as err:
        raise AssertionError(f"{_pass_name(pass_)} changed the result of main: {err}\n"
                             f"--- before ---\n{_text(mod)}\n--- after ---\n{_text(out)}") from None
    return out
