"""The pass infrastructure: PassInfo, ModulePass, FunctionPass, Sequential, PassContext.

Semantics follow TVM's Relay pass manager (CONTRACT §3):

* every pass invocation goes through one wrapper: the context's instruments are asked
  ``should_run`` (unless the pass is in ``required_pass``), then get ``run_before_pass``
  (input module), the body runs, then ``run_after_pass`` (output module);
* calling a pass directly always runs it (only an instrument can veto it);
* inside a :class:`Sequential` a pass runs when it is not disabled and its ``opt_level``
  is at most the context's or it is in ``required_pass``; the names in its
  ``PassInfo.required`` are looked up (see :func:`set_pass_resolver`) and run first,
  each time, through the same wrapper;
* a :class:`FunctionPass` rewrites every optimizable function and then runs ``InferType``
  on the whole module through the wrapper, so instruments see that nested run.

Example::

    @module_pass(opt_level=1)
    def drop_helpers(mod, ctx):
        ...
        return mod

    with PassContext(opt_level=3, instruments=[MyInstrument()]):
        mod = Sequential([drop_helpers, other_pass])(mod)

A pass's own exception propagates unchanged; it carries the failing pass's name (see
:func:`failed_pass`) and a note saying which pass raised. An exception from an instrument
hook carries ``passhost_hook`` (the hook's name) instead.

The hooks called for one invocation come from the instruments installed when it started,
so ``run_before_pass``/``run_after_pass`` stay paired even if a pass calls
``override_instruments``; the passes after it see the new instruments.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Optional, Sequence

from ._context import (
    ConfigOption,
    PassContext,
    PassContextError,
    config_options,
    lookup_config,
    register_config,
    set_config_loader,
    unregister_config,
)
from ._passes import (
    FunctionPass,
    ModulePass,
    Pass,
    PassDefinitionError,
    PassInfo,
    PassTypeError,
    Sequential,
    failed_pass,
    resolve_pass,
    set_pass_resolver,
)

__all__ = [
    "PassInfo",
    "Pass",
    "ModulePass",
    "FunctionPass",
    "Sequential",
    "PassContext",
    "module_pass",
    "function_pass",
    "pattern_pass",
    "declared_info",
    "set_pass_resolver",
    "resolve_pass",
    "failed_pass",
    "register_config",
    "unregister_config",
    "lookup_config",
    "config_options",
    "set_config_loader",
    "ConfigOption",
    "PassDefinitionError",
    "PassTypeError",
    "PassContextError",
]


# --------------------------------------------------------------------------------------
# decorators
# --------------------------------------------------------------------------------------
def _check_required(required: Any) -> tuple:
    if required is None:
        return ()
    if not isinstance(required, (list, tuple)):
        raise PassTypeError("Required is expected to be the type of list/tuple.")
    return tuple(required)


def _wrap_class(cls: type, base: type, method: str, info: PassInfo) -> type:
    """A ``base`` subclass whose instances wrap ``cls(*args, **kwargs)`` and run its ``method``."""
    if not callable(getattr(cls, method, None)):
        kind = "module" if base is ModulePass else "function"
        raise PassTypeError(f"class {cls.__name__} decorated with @{kind}_pass must define "
                            f"{method}(self, {'mod' if kind == 'module' else 'func, mod'}, ctx)")

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        inst = cls(*args, **kwargs)
        self._inst = inst
        base.__init__(self, getattr(inst, method), info)

    def __getattr__(self: Any, attr: str) -> Any:
        try:
            inst = object.__getattribute__(self, "__dict__")["_inst"]
        except KeyError:
            raise AttributeError(attr) from None
        return getattr(inst, attr)

    ns = {
        "__init__": __init__,
        "__getattr__": __getattr__,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
        "__wrapped__": cls,
        "_declared_info": info,
    }
    return type(cls.__name__, (base,), ns)


def declared_info(obj: Any) -> Optional[PassInfo]:
    """The :class:`PassInfo` a pass declares, read without building it: a pass's ``info``,
    or the one a class made by :func:`module_pass`/:func:`function_pass` gives every
    instance. ``None`` for anything else (a function returning a pass must be called to tell).
    """
    if isinstance(obj, Pass):
        return obj.info
    info = getattr(obj, "_declared_info", None) if isinstance(obj, type) and issubclass(obj, Pass) else None
    return info if isinstance(info, PassInfo) else None


def _pass_name(obj: Any, name: Optional[str]) -> str:
    if name:
        return name
    return getattr(obj, "__name__", None) or type(obj).__name__


def _make_pass(cls: type, kind: str, method: str, pass_func: Optional[Callable], opt_level: Optional[int],
               name: Optional[str], required: Optional[Sequence[str]], preserves_types: bool = False,
               idempotent: bool = False) -> Any:
    """The body of :func:`module_pass` / :func:`function_pass`: ``cls`` is the pass class,
    ``kind`` its name in messages (``"Module"``), ``method`` the one a decorated class
    must define."""
    if opt_level is None:
        raise PassDefinitionError(f"Please provide opt_level for the {kind.lower()} pass.")
    required = _check_required(required)

    def create_pass(pass_arg: Any) -> Any:
        if not callable(pass_arg):
            raise PassTypeError(f"pass_func must be a callable for {kind} pass")
        info = PassInfo(opt_level, _pass_name(pass_arg, name), required, preserves_types=preserves_types,
                        idempotent=idempotent)
        if inspect.isclass(pass_arg):
            return _wrap_class(pass_arg, cls, method, info)
        return cls(pass_arg, info)

    if pass_func is not None:
        return create_pass(pass_func)
    return create_pass


def module_pass(pass_func: Optional[Callable] = None, opt_level: Optional[int] = None, name: Optional[str] = None,
                required: Optional[Sequence[str]] = None, *, preserves_types: bool = False,
                idempotent: bool = False) -> Any:
    """Make a :class:`ModulePass` from ``pass_func(mod, ctx) -> IRModule``, or from a class
    with ``transform_module(self, mod, ctx)``.

    Use directly (``module_pass(f, opt_level=2)``) or as a decorator factory
    (``@module_pass(opt_level=2, name="Foo")``). Decorating a class returns a new
    :class:`ModulePass` subclass: its constructor builds the user object with the same
    arguments, and unknown attributes are looked up on that object. The name defaults to
    the function's or class's name.

    ``preserves_types=True`` declares that a typed module comes out fully typed
    (:class:`PassInfo`); verify-each then checks it.

    :raises PassDefinitionError: (a ``ValueError``) ``opt_level`` is missing.
    :raises PassTypeError: ``required`` is not a list/tuple, or the argument is not callable.
    """
    return _make_pass(ModulePass, "Module", "transform_module", pass_func, opt_level, name, required,
                      preserves_types, idempotent)


def function_pass(pass_func: Optional[Callable] = None, opt_level: Optional[int] = None,
                  name: Optional[str] = None, required: Optional[Sequence[str]] = None, *,
                  preserves_types: bool = False, idempotent: bool = False) -> Any:
    """Make a :class:`FunctionPass` from ``pass_func(func, mod, ctx) -> Function``, or from
    a class with ``transform_function(self, func, mod, ctx)``.

    Same calling forms and class behaviour as :func:`module_pass`::

        @function_pass(opt_level=1)
        class CustomPipeline:
            def __init__(self, multiplier):
                self.multiplier = multiplier

            def transform_function(self, func, mod, ctx):
                ...

        custom = CustomPipeline(multiplier=ir.const(3.0))
        assert custom.info.name == "CustomPipeline"

    ``idempotent=True`` declares ``p(p(f)) == p(f)`` on typed functions: the pass manager
    then skips a function the pass returned before (:class:`PassInfo`).

    :raises PassDefinitionError: (a ``ValueError``) ``opt_level`` is missing.
    :raises PassTypeError: ``required`` is not a list/tuple, or the argument is not callable.
    """
    return _make_pass(FunctionPass, "Function", "transform_function", pass_func, opt_level, name, required,
                      preserves_types, idempotent)


def pattern_pass(name: str, rules: Any, opt_level: int = 1, required: Sequence[str] = ("InferType",),
                 max_iterations: int = 64, doc: str = "") -> Any:
    """A :class:`FunctionPass` made of rewrite rules (:mod:`passhost.ir.pattern`).

    ``rules`` is a list of :class:`~passhost.ir.pattern.DFPatternCallback` (or a function
    returning one, called afresh for every run, for rules that keep state). Every function
    of the module is rewritten with :func:`~passhost.ir.pattern.rewrite`: rules by priority,
    then in the order given, to a fixed point of at most ``max_iterations`` sweeps. The
    pass's ``rules`` attribute lists them (``passhost info NAME`` prints it)::

        def pattern(x):
            return is_op("negative")(is_op("negative")(x))

        DoubleNegation = pattern_pass("DoubleNegation", [rule(pattern, lambda x: x)])
        # negative(negative(%x))  ->  %x
    """
    from .ir.pattern import DFPatternCallback, rewrite

    make = rules if callable(rules) else (lambda: list(rules))
    listed = make()
    if isinstance(listed, DFPatternCallback):
        listed = [listed]
    for r in listed:
        if not isinstance(r, DFPatternCallback):
            raise PassTypeError(f"pattern_pass {name!r}: {r!r} is not a DFPatternCallback")

    def transform(func: Any, mod: Any, ctx: Any) -> Any:
        stats = ctx.rule_stats.setdefault(name, {}) if ctx is not None else None
        return rewrite(make(), func, mod=mod, max_iterations=max_iterations, stats=stats)

    transform.__name__ = name
    transform.__doc__ = doc or f"{name}: rewrite rules " + ", ".join(r.name for r in listed)
    transform.rules = tuple(listed)  # type: ignore[attr-defined]
    return function_pass(transform, opt_level=opt_level, name=name, required=list(required), preserves_types=True)


# the public classes belong to this module (they are defined in private helpers)
for _public in (PassInfo, Pass, ModulePass, FunctionPass, Sequential, PassContext, ConfigOption,
                PassDefinitionError, PassTypeError, PassContextError):
    _public.__module__ = __name__
del _public
