"""Pass instruments: code that runs around every pass invocation.

An instrument is handed to :class:`passhost.transform.PassContext` (``instruments=[...]``)
or installed later with :meth:`~passhost.transform.PassContext.override_instruments`.
The context calls its hooks, in the order the instruments were given:

``enter_pass_ctx()``
    once when the context is entered (or when the instrument is installed by
    ``override_instruments``);
``exit_pass_ctx()``
    once when the context is exited (or when the instrument is replaced);
``should_run(mod, info) -> bool``
    before every pass invocation whose name is not in the context's ``required_pass``;
    every instrument is asked (no short-circuit) and the pass runs only if all agree;
``run_before_pass(mod, info)``
    before every pass that runs, with the input module;
``run_after_pass(mod, info)``
    after every pass that ran, with the **output** module.

Only the hooks a class actually overrides are called; the others cost nothing.

One optional extra method, not part of TVM's protocol, lets an instrument hear about
passes that did **not** run (the pass manager calls it only on its skip paths, and only
when an installed instrument defines it, so it costs nothing otherwise):

``on_pass_skipped(info, reason)``
    ``reason`` is ``"disabled"`` (named in ``disabled_pass``), ``"opt_level"`` (its
    ``opt_level`` is above the context's and it is not in ``required_pass``) -- both
    only inside a ``Sequential`` -- or ``"should_run"`` (an instrument vetoed it).

Two ways to write one, as in TVM::

    class Counter(PassInstrument):
        def run_before_pass(self, mod, info):
            self.count += 1

    @pass_instrument
    class PrintNames:
        def run_before_pass(self, mod, info):
            print("Running pass:", info.name)

What happens when a hook raises (as in TVM's pass-instrument tutorial):

* ``enter_pass_ctx`` raises: the instruments that had already entered get
  ``exit_pass_ctx`` in reverse order, the context's instrument list is cleared and the
  exception propagates (the ``with`` body does not run);
* ``exit_pass_ctx`` raises: the later instruments are not exited, the list is cleared
  and the exception propagates;
* ``should_run`` / ``run_before_pass`` / ``run_after_pass`` / the pass itself raise: the
  exception propagates unchanged; the list is kept, and leaving the ``with`` block calls
  every ``exit_pass_ctx`` as usual.
"""
from __future__ import annotations

from typing import Any, Final

from .errors import PasshostError

__all__ = ["PassInstrument", "pass_instrument", "HOOK_NAMES", "InstrumentTypeError"]

#: the five hook names, in protocol order
HOOK_NAMES: Final = ("enter_pass_ctx", "exit_pass_ctx", "should_run", "run_before_pass", "run_after_pass")


class InstrumentTypeError(PasshostError, TypeError):
    """An instrument was defined or passed wrongly (e.g. a class where an instance belongs)."""


class _ClassName:
    """Non-data descriptor: ``name`` is the class name unless the instance sets its own."""

    def __get__(self, obj: Any, owner: type) -> str:
        return owner.__name__


class PassInstrument:
    """Base class of pass instruments; every hook is an optional no-op.

    Subclass it and override the hooks you need. ``name`` is the class name (an
    instance may assign its own ``name``).
    """

    name = _ClassName()

    def enter_pass_ctx(self) -> None:
        """Called once when the owning :class:`PassContext` is entered."""

    def exit_pass_ctx(self) -> None:
        """Called once when the owning :class:`PassContext` is exited."""

    def should_run(self, mod: Any, info: Any) -> bool:
        """Return False to skip the pass described by ``info`` (a ``PassInfo``)."""
        return True

    def run_before_pass(self, mod: Any, info: Any) -> None:
        """Called before a pass runs, with its input module."""

    def run_after_pass(self, mod: Any, info: Any) -> None:
        """Called after a pass ran, with its output module."""

    def __repr__(self) -> str:
        return f"<PassInstrument {self.name}>"


#: the base class's no-op functions; a hook equal to one of these is never called
BASE_HOOKS: Final = {h: getattr(PassInstrument, h) for h in HOOK_NAMES}


def overridden_hook(inst: Any, hook: str) -> Any:
    """The bound ``hook`` method of ``inst`` if it does something, else None.

    A hook is skipped when the object lacks it or when it is the no-op inherited from
    :class:`PassInstrument`.
    """
    fn = getattr(inst, hook, None)
    if fn is None or getattr(fn, "__func__", None) is BASE_HOOKS[hook]:
        return None
    return fn


def pass_instrument(pi_cls: type) -> type:
    """Class decorator: make a plain class a :class:`PassInstrument`.

    Returns a new class deriving from ``pi_cls`` and :class:`PassInstrument` (same name,
    module and docstring); a class that already derives from :class:`PassInstrument` is
    returned unchanged. Hooks the class does not define stay no-ops.

    :raises InstrumentTypeError: ``pi_cls`` is not a class.
    """
    if not isinstance(pi_cls, type):
        raise InstrumentTypeError(f"pi_cls must be a class, got {type(pi_cls).__name__}; "
                                  "decorate the class itself with @pass_instrument")
    if issubclass(pi_cls, PassInstrument):
        return pi_cls
    ns = {
        "__module__": pi_cls.__module__,
        "__qualname__": pi_cls.__qualname__,
        "__doc__": pi_cls.__doc__,
        "__wrapped__": pi_cls,
    }
    return type(pi_cls.__name__, (pi_cls, PassInstrument), ns)
