"""Pass objects and the invocation wrapper (private; public names live in
:mod:`passhost.transform`).

:func:`_invoke` is the one wrapper every pass invocation goes through (instrument
protocol, the ``testing.immutable_module`` check, result check, error attribution);
:meth:`Sequential._run` inlines the same logic for its children, because that loop is
the pass manager's hot path.
"""
from __future__ import annotations

from gc import disable as _gc_disable
from gc import isenabled as _gc_isenabled
from typing import Any, Callable, Optional, Sequence

from ._blame import contained_hook, mark_hook, not_an_exception
from ._context import PassContext, current_context
from .errors import PassError, PasshostError, PassNotFound
from .ir._gc import resume as _resume_gc
from .ir.expr import Function
from .ir.facts import fixed_points
from .ir.module import IRModule

__all__ = [
    "PassInfo",
    "Pass",
    "ModulePass",
    "FunctionPass",
    "Sequential",
    "set_pass_resolver",
    "resolve_pass",
    "failed_pass",
    "PassDefinitionError",
    "PassTypeError",
]

class PassDefinitionError(PasshostError, ValueError):
    """A pass was declared wrongly (e.g. a decorator without ``opt_level``)."""


class PassTypeError(PasshostError, TypeError):
    """A pass API got an argument of the wrong type."""


# --------------------------------------------------------------------------------------
# PassInfo
# --------------------------------------------------------------------------------------
class PassInfo:
    """The metadata of a pass: ``opt_level``, ``name`` and the names it ``required``.

    ``preserves_types`` (keyword-only, default ``False``) declares that the pass leaves a
    typed module fully typed: every expression of its output has a ``checked_type``.
    verify-each holds such a pass to it (MLIR's preserved analyses, for types).

    ``idempotent`` (keyword-only, default ``False``) declares that running the pass on its
    own typed output changes nothing (``p(p(f))`` is ``p(f)``). For a function pass the
    pass manager then remembers the typed functions it returned (weakly, per pass name,
    implementation and options: :func:`passhost.ir.facts.fixed_points`) and hands such a
    function back without calling the pass again.

    Immutable; compares by value. ``str(info)`` is TVM's form, e.g.
    ``The meta data of the pass - pass name: FuseOps, opt_level: 0, required passes: [\\nInferType, ]\\n``.
    """

    __slots__ = ("opt_level", "name", "required", "preserves_types", "idempotent")

    def __init__(self, opt_level: int, name: str, required: Optional[Sequence[str]] = (), *,
                 preserves_types: bool = False, idempotent: bool = False) -> None:
        if not isinstance(opt_level, int) or isinstance(opt_level, bool):
            raise PassTypeError(f"PassInfo opt_level must be an int, got {opt_level!r}")
        if not isinstance(name, str):
            raise PassTypeError(f"PassInfo name must be a str, got {name!r}")
        if required is None:
            required = ()
        elif not isinstance(required, (list, tuple)):
            raise PassTypeError(f"required of pass '{name}' must be a list or tuple of pass names, "
                                f"got {required!r}")
        for r in required:
            if not isinstance(r, str):
                raise PassTypeError(f"required of pass '{name}' holds pass names (str), got {r!r}")
        _set = object.__setattr__
        _set(self, "opt_level", opt_level)
        _set(self, "name", name)
        _set(self, "required", tuple(required))
        if not isinstance(preserves_types, bool):
            raise PassTypeError(f"preserves_types of pass '{name}' must be True or False, got {preserves_types!r}")
        _set(self, "preserves_types", preserves_types)
        if not isinstance(idempotent, bool):
            raise PassTypeError(f"idempotent of pass '{name}' must be True or False, got {idempotent!r}")
        _set(self, "idempotent", idempotent)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("PassInfo is immutable; build a new one")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PassInfo):
            return NotImplemented
        return ((self.opt_level, self.name, self.required, self.preserves_types, self.idempotent)
                == (other.opt_level, other.name, other.required, other.preserves_types, other.idempotent))

    def __hash__(self) -> int:
        return hash((self.opt_level, self.name, self.required))

    def __str__(self) -> str:
        head = f"The meta data of the pass - pass name: {self.name}, opt_level: {self.opt_level}, required passes: ["
        if not self.required:
            return head + "]\n"
        return head + "\n" + "".join(r + ", " for r in self.required) + "]\n"

    def __repr__(self) -> str:
        return f"PassInfo(opt_level={self.opt_level}, name={self.name!r}, required={self.required!r})"


# --------------------------------------------------------------------------------------
# resolving pass names (installed by passhost.registry)
# --------------------------------------------------------------------------------------
_resolver: Optional[Callable[[str], Any]] = None
_builtin_infer_type: Optional["ModulePass"] = None


def set_pass_resolver(fn: Optional[Callable[[str], "Pass"]]) -> Optional[Callable[[str], "Pass"]]:
    """Install ``fn(name) -> Pass`` used to build the passes named in ``PassInfo.required``
    and the ``InferType`` run after every function pass. Returns the previous resolver.

    ``fn`` should raise :class:`~passhost.errors.PassNotFound` (or return None) for an
    unknown name. Without a resolver, or when it cannot find ``"InferType"``, a host
    ``InferType`` pass calling :func:`passhost.ir.infer_type` is used.
    """
    global _resolver
    if fn is not None and not callable(fn):
        raise PassTypeError(f"the pass resolver must be callable, got {fn!r}")
    previous, _resolver = _resolver, fn
    return previous


def _infer_type_body(mod: IRModule, ctx: PassContext) -> IRModule:
    from .ir import infer_type

    return infer_type(mod)


def _host_infer_type() -> "ModulePass":
    global _builtin_infer_type
    if _builtin_infer_type is None:
        _builtin_infer_type = ModulePass(_infer_type_body, PassInfo(0, "InferType"))
    return _builtin_infer_type


def resolve_pass(name: str) -> "Pass":
    """Build the pass called ``name`` through the installed resolver.

    :raises PassNotFound: nobody provides ``name`` (``InferType`` always resolves).
    """
    if _resolver is not None:
        try:
            found = _resolver(name)
        except PassNotFound:
            if name != "InferType":
                raise
            found = None
        if found is not None:
            if not isinstance(found, Pass):
                raise PassError(f"the pass resolver returned {found!r} for '{name}', which is not a Pass", name)
            return found
    if name == "InferType":
        return _host_infer_type()
    if _resolver is None:
        raise PassNotFound(f"pass '{name}' cannot be resolved: no pass registry is installed; "
                           "import passhost.registry (or install the plugin that provides it)")
    raise PassNotFound(f"pass '{name}' is not installed; install the plugin that provides it")


# --------------------------------------------------------------------------------------
# the invocation wrapper
# --------------------------------------------------------------------------------------
def failed_pass(exc: BaseException) -> Optional[str]:
    """The name of the innermost pass whose body raised ``exc``, or None (e.g. the error
    came from an instrument hook or from outside any pass)."""
    path = getattr(exc, "passhost_pass_path", None)
    return path[0] if path else None


#: the ``reason`` given to ``on_pass_skipped(info, reason)``
SKIP_DISABLED = "disabled"
SKIP_OPT_LEVEL = "opt_level"
SKIP_VETO = "should_run"


def _notify_skipped(ctx: PassContext, info: PassInfo, reason: str) -> None:
    """Tell the instruments that define ``on_pass_skipped`` that a pass did not run.

    Called only on the skip paths and only when some instrument defines the method,
    so a pass manager without such instruments pays nothing for it.
    """
    try:
        for fn in ctx._skip_hooks:
            fn(info, reason)
    except Exception as exc:
        mark_hook(exc, "on_pass_skipped", getattr(fn, "__self__", None), info.name)
        raise


def _add_note(exc: BaseException, note: str) -> None:
    """``exc.add_note(note)`` where Python has it (3.11+); a no-op on 3.10."""
    add = getattr(exc, "add_note", None)
    if add is not None:
        add(note)


def _annotate(exc: BaseException, name: str) -> None:
    """Record that ``exc`` escaped from the body of pass ``name`` (innermost first)."""
    if getattr(exc, "passhost_hook", None) is not None:
        return
    path = getattr(exc, "passhost_pass_path", None)
    try:
        if path is None:
            exc.passhost_pass_path = [name]
            _add_note(exc, f"(raised while running pass '{name}')")
        else:
            path.append(name)
    except (AttributeError, TypeError):  # pragma: no cover - exotic exception types
        pass


def _contained(exc: BaseException, name: str) -> BaseException:
    """What to raise for a ``BaseException`` that is not an ``Exception`` escaping a pass:
    a real Ctrl-C or generator exit goes on; a ``SystemExit`` or a custom
    ``BaseException`` from plugin code becomes a :class:`PassError` naming the pass, so
    the run fails (exit 1) instead of ending the interpreter with a stale output file.
    (Instrument hooks: :func:`passhost._blame.contained_hook`.)"""
    if isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
        return exc
    err = PassError(not_an_exception(f"pass '{name}'", exc), name)
    err.passhost_pass_path = [name]
    return err


def _bad_result(out: Any, name: str) -> IRModule:
    if isinstance(out, IRModule):
        return out
    err = PassError(f"pass '{name}' returned {type(out).__name__}, not an IRModule; "
                    "a module pass must return the (new) module", name)
    err.passhost_pass_path = [name]
    raise err


def _run_immutable(body: Callable, mod: IRModule, ctx: PassContext, name: str) -> IRModule:
    from .ir import structural_hash

    before = structural_hash(mod)
    try:
        out = body(mod, ctx)
    except Exception as exc:
        _annotate(exc, name)
        raise
    except BaseException as exc:
        raise _contained(exc, name) from None
    if structural_hash(mod) != before:
        err = PassError(f"Immutable module has been modified in pass: {name}", name)
        err.passhost_pass_path = [name]
        raise err
    return out


def _invoke(p: "Pass", mod: IRModule, ctx: PassContext) -> IRModule:
    """Run ``p`` once on ``mod`` under ``ctx`` with the instrument protocol."""
    return _run_pass(p._info, p._body, mod, ctx)


def _run_pass(info: PassInfo, body: Callable, mod: IRModule, ctx: PassContext) -> IRModule:
    """The one pass-invocation path: ``body(mod, ctx)`` between the instruments' hooks.

    ``should_run`` (unless the pass is in ``required_pass``), ``run_before_pass``, the body
    (with the immutable-module check when configured), the result check, then
    ``run_after_pass``. With no instrument and no check (``plain``) it is the body and
    the result check alone. Gating by ``opt_level`` and ``disabled_pass`` is the caller's
    (:class:`Sequential`); a direct call is never gated.
    """
    _d, required, _l, should_run, before, after, immutable, plain = ctx._plan
    name = info.name
    if plain:
        try:
            out = body(mod, ctx)
        except Exception as exc:
            _annotate(exc, name)
            raise
        except BaseException as exc:
            raise _contained(exc, name) from None
        if out.__class__ is not IRModule:
            out = _bad_result(out, name)
        return out
    if should_run and name not in required:
        run = True
        try:
            for fn in should_run:
                if not fn(mod, info):
                    run = False
        except Exception as exc:
            mark_hook(exc, "should_run", getattr(fn, "__self__", None), name)
            raise
        except BaseException as exc:
            raise contained_hook(exc, "should_run", getattr(fn, "__self__", None), name) from None
        if not run:
            if ctx._skip_hooks:
                _notify_skipped(ctx, info, SKIP_VETO)
            return mod
    if before:
        try:
            for fn in before:
                fn(mod, info)
        except Exception as exc:
            mark_hook(exc, "run_before_pass", getattr(fn, "__self__", None), name)
            raise
        except BaseException as exc:
            raise contained_hook(exc, "run_before_pass", getattr(fn, "__self__", None), name) from None
    if immutable:
        out = _run_immutable(body, mod, ctx, name)
    else:
        try:
            out = body(mod, ctx)
        except Exception as exc:
            _annotate(exc, name)
            raise
        except BaseException as exc:
            raise _contained(exc, name) from None
    if out.__class__ is not IRModule:
        out = _bad_result(out, name)
    if after:
        try:
            for fn in after:
                fn(out, info)
        except Exception as exc:
            mark_hook(exc, "run_after_pass", getattr(fn, "__self__", None), name)
            raise
        except BaseException as exc:
            raise contained_hook(exc, "run_after_pass", getattr(fn, "__self__", None), name) from None
    return out


def _run_required(required: tuple, mod: IRModule, ctx: PassContext, owner: str) -> IRModule:
    for r in required:
        try:
            rp = resolve_pass(r)
        except PassNotFound as exc:
            # the requiring pass cannot run: report it as the failing one
            _add_note(exc, f"(required by pass '{owner}')")
            if getattr(exc, "passhost_pass_path", None) is None:
                exc.passhost_pass_path = [owner]
            raise
        mod = _invoke(rp, mod, ctx)
    return mod


# --------------------------------------------------------------------------------------
# pass classes
# --------------------------------------------------------------------------------------
class Pass:
    """Base class of every pass: ``info`` plus ``pass(mod, ctx=None) -> IRModule``.

    Create passes with :func:`module_pass`, :func:`function_pass` or :class:`Sequential`.
    """

    __slots__ = ("_info", "_body")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise PassTypeError("Pass is abstract; create passes with module_pass, function_pass or Sequential")

    @property
    def info(self) -> PassInfo:
        """The pass metadata."""
        return self._info

    def __call__(self, mod: IRModule, ctx: Optional[PassContext] = None) -> IRModule:
        """Run the pass on ``mod`` under ``ctx`` (default: the current context).

        Direct calls ignore ``opt_level``, ``disabled_pass`` and ``required``; only an
        instrument's ``should_run`` can skip the pass.

        Python's cyclic garbage collector is paused while the outermost pass runs (a
        whole pipeline, for a Sequential) and restored when it returns: IR graphs hold
        no cycles, and collections between the passes of a pipeline would traverse
        every node of every live graph again and again (see
        :func:`passhost.ir._gc.resume` for how it resumes). Nothing changes if the collector was already disabled.
        """
        if ctx is None:
            ctx = current_context()
        elif not isinstance(ctx, PassContext):
            raise PassTypeError(f"pass '{self._info.name}' needs a PassContext as ctx, got {type(ctx).__name__}")
        if not isinstance(mod, IRModule):
            raise PassTypeError(f"pass '{self._info.name}' runs on an IRModule, got {type(mod).__name__}; "
                                "wrap an expression with IRModule.from_expr")
        if not _gc_isenabled():
            return _invoke(self, mod, ctx)
        _gc_disable()
        try:
            return _invoke(self, mod, ctx)
        finally:
            _resume_gc()

    def _kind(self) -> str:
        return "Module"

    def __repr__(self) -> str:
        info = self._info
        return f"Run {self._kind()} pass: {info.name} at the optimization level {info.opt_level}"


class ModulePass(Pass):
    """A pass over the whole module: ``pass_func(mod, ctx) -> IRModule``."""

    __slots__ = ("pass_func",)

    def __init__(self, pass_func: Callable[[IRModule, PassContext], IRModule], info: PassInfo) -> None:
        if not callable(pass_func):
            raise PassTypeError("pass_func must be a callable for Module pass")
        if not isinstance(info, PassInfo):
            raise PassTypeError(f"ModulePass needs a PassInfo, got {info!r}")
        self._info = info
        self.pass_func = pass_func
        self._body = pass_func


def _optimizable(func: Any) -> bool:
    """TVM's rule: skip BYOC (``Compiler``), ``Extern`` and ``SkipOptimization`` functions."""
    if not isinstance(func, Function):
        return False
    attrs = func.attrs
    if not attrs:
        return True
    return not ("Compiler" in attrs or attrs.get("Extern") or attrs.get("SkipOptimization"))


class FunctionPass(Pass):
    """A pass applied to every optimizable function: ``pass_func(func, mod, ctx) -> Function``.

    Functions with a ``Compiler`` attribute, or a non-zero ``Extern`` or
    ``SkipOptimization`` attribute, are left alone (``Primitive`` ones are not: the pass
    decides). ``mod`` is the module being updated. Afterwards ``InferType`` runs on the
    whole module through the normal wrapper, so instruments see it nested in this pass.
    """

    __slots__ = ("pass_func",)

    def __init__(self, pass_func: Callable[[Function, IRModule, PassContext], Function], info: PassInfo) -> None:
        if not callable(pass_func):
            raise PassTypeError("pass_func must be a callable for Function pass")
        if not isinstance(info, PassInfo):
            raise PassTypeError(f"FunctionPass needs a PassInfo, got {info!r}")
        self._info = info
        self.pass_func = pass_func
        self._body = self._run

    def _run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        updated = mod.copy()
        func_pass = self.pass_func
        done = fixed_points(_pass_key(self._info.name, func_pass)) if self._info.idempotent else None
        new = []
        for gv, func in mod.items():
            if _optimizable(func):
                if done is not None and func in done:
                    continue  # its own typed output: idempotent, so nothing to do
                res = func_pass(func, updated, ctx)
                if not isinstance(res, Function):
                    raise PassError(f"function pass '{self._info.name}' returned {type(res).__name__} for "
                                    f"@{gv.name_hint}; a function pass must return a Function",
                                    self._info.name)
                if done is not None and res.has_type:
                    done.add(res)
                new.append((gv, res))
        for gv, res in new:
            updated[gv] = res
        return _invoke(resolve_pass("InferType"), updated, ctx)

    def _kind(self) -> str:
        return "Function"


def _pass_key(name: str, func: Callable) -> tuple:
    """What identifies a pass for its remembered fixed points: its name, its function (or
    class) and, for a class-based pass, its options (the instance's attributes, literals)."""
    owner = getattr(func, "__self__", None)
    if owner is None:
        return (name, getattr(func, "__module__", ""), getattr(func, "__qualname__", repr(func)))
    options = repr(sorted(vars(owner).items())) if hasattr(owner, "__dict__") else ""
    return (name, type(owner).__module__, type(owner).__qualname__, options)


class Sequential(Pass):
    """Run passes in order under the context's gating rules.

    For each pass: skip it if its name is in ``disabled_pass``; else run it if its name is
    in ``required_pass`` or its ``opt_level`` is at most the context's. Before running it,
    every name in its ``info.required`` is resolved and run (always, even when disabled or
    above the opt_level; not transitively; again for each pass that lists it). A nested
    Sequential is gated by its own ``opt_level`` and ``name`` like any pass.

    :param passes: list or tuple of passes
    :param opt_level: this Sequential's own level (when nested in another one)
    :param name: its name (``"sequential"``)
    :param required: names to run before it when it is nested
    """

    __slots__ = ("passes", "_entries")

    def __init__(self, passes: Optional[Sequence[Pass]] = None, opt_level: int = 0, name: str = "sequential",
                 required: Optional[Sequence[str]] = ()) -> None:
        if passes is None:
            passes = ()
        if not isinstance(passes, (list, tuple)):
            raise PassTypeError("passes must be a list of Pass objects.")
        for i, p in enumerate(passes):
            if not isinstance(p, Pass):
                raise PassTypeError(f"passes must be a list of Pass objects; element {i} of Sequential "
                                    f"'{name}' is {p!r}")
        self._info = PassInfo(opt_level, name, required)
        self.passes = tuple(passes)
        self._entries = tuple((p._info, p._info.name, p._info.opt_level, p._info.required, p._body)
                              for p in self.passes)
        self._body = self._run

    def _kind(self) -> str:
        return "Sequential"

    def __repr__(self) -> str:
        names = "".join(p._info.name + " " for p in self.passes)
        return f"{Pass.__repr__(self)}. The passes will be executed are: [{names}]"

    def _run(self, mod: IRModule, ctx: PassContext) -> IRModule:
        # gating here; everything else is the one invocation path, _run_pass
        run_pass = _run_pass
        plan = None
        for info, name, level, required, body in self._entries:
            if ctx._plan is not plan:  # a pass may enter a new context or override instruments
                plan = ctx._plan
                disabled, forced, opt_level = plan[0], plan[1], plan[2]
            if name in disabled or (level > opt_level and name not in forced):
                if ctx._skip_hooks:
                    _notify_skipped(ctx, info, SKIP_DISABLED if name in disabled else SKIP_OPT_LEVEL)
                continue
            if required:
                mod = _run_required(required, mod, ctx, name)
            mod = run_pass(info, body, mod, ctx)
        return mod
