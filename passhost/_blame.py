"""Naming the plugin code behind a failure: which instrument, from which distribution.

An error out of an instrument hook is marked with the hook (``passhost_hook``) and the
instrument (``passhost_instrument``, e.g. ``"instrument 'timing' (passhost-timing)"``), so
that ``passhost run`` can say which plugin failed and where, in one line.
"""
from __future__ import annotations

from typing import Any, Optional

__all__ = ["distribution_of", "instrument_label", "mark_hook", "contained_hook", "blamed", "not_an_exception"]


def distribution_of(obj: Any) -> Optional[str]:
    """The installed distribution whose package defines ``obj``'s class, if any."""
    module = getattr(type(obj), "__module__", None) or ""
    top = module.split(".", 1)[0]
    if not top or top in ("builtins", "__main__"):
        return None
    try:
        from importlib.metadata import packages_distributions

        dists = packages_distributions().get(top)
    except Exception:  # pragma: no cover - broken metadata must not hide the real error
        return None
    return dists[0] if dists else None


def instrument_label(inst: Any) -> str:
    """``instrument 'timing' (passhost-timing)``: the instrument's name and distribution."""
    name = getattr(inst, "name", None)
    if not isinstance(name, str) or not name:
        name = type(inst).__name__
    dist = distribution_of(inst)
    return f"instrument {name!r}" + (f" ({dist})" if dist else "")


def mark_hook(exc: BaseException, hook: str, inst: Any = None, during: str = "") -> None:
    """Record on ``exc`` that instrument ``inst``'s ``hook`` raised it, around pass ``during``
    (the innermost mark wins)."""
    if getattr(exc, "passhost_hook", None) is not None or getattr(exc, "passhost_pass_path", None) is not None:
        return
    try:
        exc.passhost_hook = hook
        if inst is not None:
            exc.passhost_instrument = instrument_label(inst)
        if during:
            exc.passhost_hook_pass = during
    except (AttributeError, TypeError):  # pragma: no cover - exotic exception types
        pass


def contained_hook(exc: BaseException, hook: str, inst: Any, during: str = "") -> BaseException:
    """What to raise for a ``SystemExit`` or custom ``BaseException`` out of an instrument
    hook: a :class:`~passhost.errors.PassError` naming the instrument (a real Ctrl-C goes on)."""
    from .errors import PassError

    if isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
        return exc
    who = f"{instrument_label(inst)} in {hook}" + (f" during pass '{during}'" if during else "")
    err = PassError(not_an_exception(who, exc))
    err.passhost_hook = hook
    err.passhost_instrument = instrument_label(inst)
    return err


def not_an_exception(who: str, exc: BaseException) -> str:
    """The message for plugin code (``who``) that ended the interpreter or raised a
    ``BaseException`` that is not an ``Exception``."""
    if isinstance(exc, SystemExit):
        return f"{who} ended the interpreter (SystemExit({exc.code!r})); plugin code must return or raise an Exception"
    return f"{who} raised {type(exc).__name__}, which is a BaseException but not an Exception: {exc}"


def blamed(exc: BaseException, hook: str, inst: Any) -> BaseException:
    """What to raise for ``exc`` out of instrument ``inst``'s ``hook``: the exception itself,
    marked with the instrument and hook (TVM semantics), or for a ``SystemExit`` or custom
    ``BaseException`` a :class:`~passhost.errors.PassError` naming the instrument."""
    if isinstance(exc, Exception):
        mark_hook(exc, hook, inst)
        return exc
    return contained_hook(exc, hook, inst)
