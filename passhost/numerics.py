"""Evaluating modules and comparing their results (shared by ``passhost bisect`` and
the ``verify-numerics`` instrument; public API).

* :func:`random_inputs` — seeded arrays for a function's parameters;
* :func:`evaluable` — a module :func:`passhost.ir.evaluate` may type without touching
  the caller's nodes;
* :func:`compare_outputs` — the worst difference between two results, within
  ``rtol``/``atol``;
* :func:`load_npz` — the named arrays of an ``.npz`` file (no pickles).
"""
from __future__ import annotations

import zipfile
from typing import Any, Optional

import numpy as np

from . import ir
from .errors import IRError, PasshostError
from .ir.types import is_float

__all__ = ["random_inputs", "evaluable", "compare_outputs", "load_npz"]

_INF = float("inf")


#: sizes :func:`random_inputs` gives size variables, in the order of their names: small,
#: distinct and not 1, so a swapped or wrongly broadcast dimension shows
DEFAULT_SIZES = (2, 3, 5, 7, 11, 13)


def size_bindings(func: Any, sizes: Optional[dict] = None) -> dict:
    """Values for every size variable of ``func``'s parameter types: ``sizes`` where given,
    else :data:`DEFAULT_SIZES` in the order of the variables' names."""
    names: set = set()
    for p in func.params:
        t = p.type_annotation if p.type_annotation is not None else (p.checked_type if p.has_type else None)
        if isinstance(t, ir.TensorType) and not t.is_static:
            names |= ir.dims.free_size_vars(t.shape)
    out = dict(sizes or {})
    for i, name in enumerate(sorted(names - set(out))):
        out[name] = DEFAULT_SIZES[i % len(DEFAULT_SIZES)]
    return out


def concrete_shape(shape: tuple, sizes: dict) -> tuple:
    """``shape`` with its size variables bound by ``sizes`` (``?`` is an error)."""
    return tuple(ir.dims.evaluate_dim(d, sizes) for d in shape)


def random_inputs(mod: Any, seed: int = 0, low: float = -1.0, high: float = 1.0,
                  sizes: Optional[dict] = None) -> list:
    """Arrays for every parameter of ``mod["main"]`` (or of a function), uniform in
    ``[low, high)``, seeded (integers in ``[low, high]``, booleans either way); the
    parameters need tensor type annotations or types. Symbolic dimensions take the values
    ``sizes`` gives, else :func:`size_bindings`'s defaults.

    :raises IRError: ``mod`` is neither a module nor a function, or a parameter has no
        tensor type
    """
    func = mod["main"] if isinstance(mod, ir.IRModule) else mod
    if not isinstance(func, ir.Function):
        raise IRError(f"random_inputs needs an IRModule or a Function, got {type(func).__name__}")
    rng = np.random.RandomState(seed % (2 ** 32))
    out = []
    bound = size_bindings(func, sizes)
    for p in func.params:
        t = p.type_annotation if p.type_annotation is not None else (p.checked_type if p.has_type else None)
        if not isinstance(t, ir.TensorType):
            raise IRError(f"random_inputs: parameter %{p.name_hint} has no tensor type ({t}); "
                          "annotate it or run type inference first")
        shape = t.shape if t.is_static else concrete_shape(t.shape, bound)
        if is_float(t.dtype):  # (bfloat16 and the float8 types too)
            arr = rng.uniform(low, high, size=shape).astype(t.dtype)
        elif t.dtype == "bool":
            arr = rng.randint(0, 2, size=shape).astype("bool")
        else:
            arr = rng.randint(int(low), int(high) + 1, size=shape).astype(t.dtype)
        out.append(arr)
    return out


def _fresh_leaf(node: Any) -> Any:
    t = type(node)
    if t is ir.Var:
        return ir.Var(node.name_hint, node.type_annotation)
    if t is ir.Constant:
        return ir.Constant(node.data)  # same array, new (untyped) node
    return None


def evaluable(mod: ir.IRModule) -> ir.IRModule:
    """``mod`` itself when every function is typed, else a copy with fresh nodes.

    :func:`passhost.ir.evaluate` types an untyped module's nodes in place; checking a
    mid-pipeline module must not do that to the pipeline's own nodes (a later pass, or
    a cached prefix output, must stay as the passes left it), so untyped functions are
    rebuilt first (new variables and constant nodes, hence new nodes above them;
    linear, no recursion).
    """
    if all(f.has_type for _, f in mod.items()):
        return mod
    out = mod.copy()
    for gv, func in mod.items():
        if not func.has_type:
            out[gv] = ir.rewrite_post_order(func, _fresh_leaf)
    return out


def _leaves(value: Any) -> list:
    """``[(where, array)]`` of a nested tuple/list result, in order (``output[1][0]``)."""
    out: list = []
    stack = [(value, "output")]
    while stack:
        v, where = stack.pop()
        if isinstance(v, (tuple, list)):
            stack.extend((v[i], f"{where}[{i}]") for i in range(len(v) - 1, -1, -1))
        else:
            out.append((where, v))
    return out


def compare_outputs(got: Any, want: Any, rtol: float, atol: float) -> Optional[tuple]:
    """Compare two results (nested tuples of arrays).

    Floating-point arrays match within ``rtol``/``atol`` (as :func:`numpy.isclose`; NaN
    matches NaN), others exactly.

    :returns: None when ``got`` matches ``want``, else ``(max_abs_error, max_rel_error,
        message)`` for the array with the largest absolute error, where ``message`` is one
        line such as ``output[1]: max abs error 2, max rel error 1 (3 of 6 elements beyond
        rtol=1e-05, atol=1e-05)``; a changed structure, shape or dtype gives infinite
        errors and a message saying what changed
    """
    g_items, w_items = _leaves(got), _leaves(want)
    if [w for w, _ in g_items] != [w for w, _ in w_items]:
        return (_INF, _INF, f"the result structure changed ({len(w_items)} arrays expected, got {len(g_items)})")
    worst = None
    for (where, g), (_, w) in zip(g_items, w_items):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return (_INF, _INF, f"{where} changed from {w.dtype}{list(w.shape)} to {g.dtype}{list(g.shape)}")
        with np.errstate(all="ignore"):
            if w.dtype.kind in "fc" or is_float(w.dtype):
                if w.dtype.kind not in "fc":  # (ml_dtypes' floats: compare their values in float64)
                    g, w = g.astype("float64"), w.astype("float64")
                close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
            else:
                close = g == w
            if bool(np.all(close)):
                continue
            far = ~close  # only the elements out of tolerance (a NaN matching a NaN is close)
            wf = w.astype("float64")[far]
            diff = np.abs(g.astype("float64")[far] - wf)
            diff = np.where(np.isnan(diff), np.inf, diff)
            with np.errstate(divide="ignore", invalid="ignore"):
                # a difference against an exact zero reference is infinitely relative, and
                # says so (dividing by the tiniest float gave 1e+308-sized nonsense)
                rel = np.where(diff == 0, 0.0, diff / np.abs(wf))
            max_abs, max_rel = float(np.max(diff)), float(np.max(rel))
        bad = int(np.size(close) - np.count_nonzero(close))
        if worst is None or max_abs > worst[0]:
            worst = (max_abs, max_rel, f"{where}: max abs error {max_abs:.6g}, max rel error {max_rel:.6g} "
                                       f"({bad} of {np.size(close)} elements beyond rtol={rtol:g}, atol={atol:g})")
    return worst


def load_npz(path: str, label: str, error: type = PasshostError, prefix: str = "") -> dict:
    """``{name: array}`` from an ``.npz`` file saved with names (``np.savez``); pickled
    objects are refused.

    :param label: what the file is to the user, e.g. ``"--params"``; messages read
        ``{prefix}{label} 'x.npy' holds a single array; save named arrays with np.savez``
        and ``{prefix}cannot read {label} 'x.npz': <reason>``
    :param error: the :class:`~passhost.errors.PasshostError` subclass to raise
    :raises error: the file is missing, unreadable, not an ``.npz``, or holds one array
    """
    try:
        loaded = np.load(path, allow_pickle=False)
        if not hasattr(loaded, "files"):
            raise error(f"{prefix}{label} {path!r} holds a single array; save named arrays with np.savez")
        with loaded:
            return {k: loaded[k] for k in loaded.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise error(f"{prefix}cannot read {label} {path!r}: {reason}") from None
