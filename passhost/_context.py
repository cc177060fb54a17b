"""PassContext and the registered configuration options.

Private module: the public names are re-exported by :mod:`passhost.transform`.

The current context is kept per thread (and per asyncio task) in a
:class:`contextvars.ContextVar` holding the stack of entered contexts; with no context
entered, :meth:`PassContext.current` returns the thread's lazily created *default
context*, a real mutable object (``PassContext.current().override_instruments([...])``
installs instruments for that thread).

Every context keeps a precomputed *plan* tuple ``(disabled, required, opt_level,
should_run, before, after, immutable, plain)`` that the pass manager reads once per pass:
the name sets, and tuples of bound hook methods holding only the hooks the instruments
override. ``plain`` is true when there is nothing to call and nothing to check.
"""
from __future__ import annotations

import builtins
import contextvars
import logging
import threading
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Optional

from ._blame import blamed
from .errors import ConfigError, PasshostError
from .instrument import HOOK_NAMES, InstrumentTypeError, overridden_hook

__all__ = [
    "PassContext",
    "PassContextError",
    "ConfigOption",
    "register_config",
    "unregister_config",
    "lookup_config",
    "config_options",
    "set_config_loader",
]

_log = logging.getLogger("passhost.transform")


class PassContextError(PasshostError, RuntimeError):
    """A PassContext was used wrongly (e.g. exited while it is not the current one)."""


# --------------------------------------------------------------------------------------
# configuration options
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigOption:
    """A registered ``PassContext`` config option (the host side of ``ConfigEntry``)."""

    key: str
    type: type
    default: Any
    doc: str = ""
    #: ``check(value)`` returns ``None`` for a good value or says what is wrong with it
    check: Optional[Callable[[Any], Optional[str]]] = None


_OPTIONS: dict[str, ConfigOption] = {}
_BUILTIN_KEYS = frozenset({"relay.FuseOps.max_depth", "testing.immutable_module", "passhost.verify_each"})
_config_loader: Optional[Callable[[], None]] = None

#: the config key that makes every pass invocation check it did not mutate its input
IMMUTABLE_KEY = "testing.immutable_module"

#: the config key that verifies the module after every pass (MLIR's verify-each)
VERIFY_KEY = "passhost.verify_each"

#: optional instrument method ``on_pass_skipped(info, reason)`` called when a pass does not run
SKIP_HOOK = "on_pass_skipped"


def register_config(key: str, type: type, default: Any, doc: str = "",
                    check: Optional[Callable[[Any], Optional[str]]] = None) -> ConfigOption:
    """Register a config option that ``PassContext(config={key: value})`` accepts.

    Registering the same key again with the same type and default is a no-op (so a
    registry can be rebuilt); a different registration is an error.

    :param key: dotted option name, e.g. ``"relay.FuseOps.max_depth"``
    :param type: the value type (``int``, ``bool``, ``float``, ``str``, ``tuple`` or any class)
    :param default: the value passes use when the option is not set (``None`` = no default)
    :param check: ``check(value)`` is ``None`` for a good value, else a phrase saying what
        it must be (``"must be a non-negative int"``); ``PassContext(config=...)`` runs it,
        so a bad value is refused before any pass runs
    :raises ConfigError: bad arguments or a conflicting earlier registration.
    """
    if not isinstance(key, str) or not key:
        raise ConfigError(f"config option keys are non-empty strings, got {key!r}")
    if not isinstance(type, builtins.type):
        raise ConfigError(f"config option '{key}': type must be a class such as int or bool, got {type!r}")
    if check is not None and not callable(check):
        raise ConfigError(f"config option '{key}': check must be callable, got {check!r}")
    if default is not None:
        default = _coerce(key, type, default)
    option = ConfigOption(key, type, default, doc, check)
    old = _OPTIONS.get(key)
    if old is not None:
        if old.type is type and old.default == default:
            return old
        raise ConfigError(
            f"config option '{key}' is already registered with type {old.type.__name__} "
            f"(default {old.default!r}); choose another key or uninstall the plugin that registers it")
    _OPTIONS[key] = option
    return option



def unregister_config(key: str) -> None:
    """Remove a registered option (used when the registry unloads a plugin).

    :raises ConfigError: the key is unknown or is one of the host's built-in options.
    """
    if key in _BUILTIN_KEYS:
        raise ConfigError(f"config option '{key}' is built into passhost and cannot be removed")
    if _OPTIONS.pop(key, None) is None:
        raise ConfigError(_unknown_key_message(key))


def set_config_loader(loader: Optional[Callable[[], None]]) -> Optional[Callable[[], None]]:
    """Install a callable that registers plugin config options on demand.

    It is called (once per lookup miss) before an unknown key is rejected, so the
    registry can load plugins lazily. Returns the previous loader.
    """
    global _config_loader
    previous, _config_loader = _config_loader, loader
    return previous


def _unknown_key_message(key: str) -> str:
    known = sorted(_OPTIONS)
    listing = " ".join([known[0]] + [f",{k}" for k in known[1:]]) if known else "(none)"
    return (f"Invalid config option '{key}' candidates are: {listing} "
            "(a plugin can add options with the passhost_register_configs hook)")


def lookup_config(key: str) -> ConfigOption:
    """The registered option ``key``.

    :raises ConfigError: unknown key; the message lists every known key.
    """
    option = _OPTIONS.get(key)
    if option is None and _config_loader is not None:
        _config_loader()
        option = _OPTIONS.get(key)
    if option is None:
        raise ConfigError(_unknown_key_message(key))
    return option


def config_options() -> dict[str, ConfigOption]:
    """Every registered option, sorted by key."""
    if _config_loader is not None:
        _config_loader()
    return {k: _OPTIONS[k] for k in sorted(_OPTIONS)}


def _coerce(key: str, typ: type, value: Any) -> Any:
    """Check ``value`` against the option type, converting the lossless cases."""
    if value is None:
        raise ConfigError(f"{key} is None; give a {typ.__name__} value or leave the option out")
    if typ is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
    elif typ is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif typ in (tuple, list):
        if isinstance(value, (tuple, list)):
            return typ(value)
    elif isinstance(value, dict) and not issubclass(typ, Mapping):
        try:
            return typ(**value)
        except TypeError as err:
            raise ConfigError(f"config {key}: cannot build a {typ.__name__} from {value!r}: {err}") from None
    elif isinstance(value, typ):
        return value
    raise ConfigError(f"expect config {key} to have type {typ.__name__} but get {type(value).__name__} "
                      f"({value!r})")


def _legalize(config: Optional[Mapping[str, Any]]) -> dict:
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ConfigError(f"PassContext config must be a dict of option -> value, got {type(config).__name__}")
    out = {}
    for key, value in config.items():
        option = lookup_config(key)
        value = out[key] = _coerce(key, option.type, value)
        if option.check is not None:
            problem = option.check(value)
            if problem:
                raise ConfigError(f"PassContext config {key} {problem}, got {value!r}")
    return out


def _non_negative(value: int) -> Optional[str]:
    return None if value >= 0 else "must be a non-negative int"


register_config("relay.FuseOps.max_depth", int, 256,
                "maximum number of operators fused into one primitive function", check=_non_negative)
register_config(IMMUTABLE_KEY, bool, False,
                "check that no pass modifies its input module (structural hash before and after)")
register_config("passhost.verify_each", bool, False,
                "verify the module after every pass (well formed; each function the pass changed); "
                "passhost run turns it on")


class _Verifier:
    """verify-each: after every pass, the functions of its output that are not known to be
    well formed are checked with :func:`passhost.ir.well_formed_function`; a failure is a
    :class:`~passhost.errors.PassError` naming the pass that broke the IR. Functions a pass
    left alone are the same objects, remembered (weakly, for the context's life) and not
    checked again, so a pass that changes nothing costs a dict lookup per function.
    ``InferType`` is not followed by a check (see :meth:`run_after_pass`)."""

    __slots__ = ("verified", "typed_input")
    name = "verify-each"

    def __init__(self) -> None:
        import weakref

        self.verified = weakref.WeakSet()
        self.typed_input = []  # a stack: passes nest (a Sequential's passes run inside it)

    def run_before_pass(self, mod: Any, info: Any) -> None:
        # a pass that declares preserves_types is held to it only when its input was typed:
        # every function typed (a typed node has typed children, so the function says it all)
        self.typed_input.append(info.preserves_types and all(f._checked_type is not None
                                                             for f in mod.functions.values()))

    def run_after_pass(self, mod: Any, info: Any) -> None:
        from .errors import PassError, WellFormedError
        from .ir.well_formed import well_formed_function

        if info.name == "InferType":
            # it only types in place; and run inside a function pass (on its result) it would
            # be blamed for that pass's output: the pass's own check, right after, names it
            if self.typed_input:
                self.typed_input.pop()
            return
        verified = self.verified
        typed = self.typed_input.pop() if self.typed_input else False
        for gv, fn in mod.functions.items():
            if fn in verified:
                continue
            try:
                well_formed_function(fn, mod, f"@{gv.name_hint}", typed=typed)
            except WellFormedError as err:
                failure = PassError(f"pass '{info.name}' left a malformed module: {err} (verify-each; "
                                    f"switch it off with --no-verify-each or config {VERIFY_KEY}=False)", info.name)
                failure.passhost_pass_path = [info.name]
                raise failure from None
            verified.add(fn)


# --------------------------------------------------------------------------------------
# the current context
# --------------------------------------------------------------------------------------
_STACK: contextvars.ContextVar[tuple] = contextvars.ContextVar("passhost_pass_contexts", default=())
_THREAD = threading.local()


def current_context() -> "PassContext":
    """The innermost entered context, or this thread's default context."""
    stack = _STACK.get()
    if stack:
        return stack[-1]
    try:
        return _THREAD.default
    except AttributeError:
        ctx = _THREAD.default = PassContext()
        return ctx


def _names(value: Any, what: str) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise ConfigError(f"PassContext {what} must be a list, tuple or set of pass names, "
                          f"got {type(value).__name__} {value!r}")
    items = sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    for n in items:
        if not isinstance(n, str):
            raise ConfigError(f"PassContext {what} holds pass names (str), got {n!r}")
    return tuple(items)


def _check_instruments(instruments: Any) -> tuple:
    if instruments is None:
        return ()
    if isinstance(instruments, (str, bytes)) or not isinstance(instruments, Iterable):
        raise InstrumentTypeError(f"instruments must be a list of PassInstrument objects, got {instruments!r}")
    out = tuple(instruments)
    for inst in out:
        if isinstance(inst, type):
            raise InstrumentTypeError(f"instrument {inst.__name__} is a class; pass an instance, "
                                      f"e.g. {inst.__name__}()")
        if not any(hasattr(inst, h) for h in HOOK_NAMES):
            raise InstrumentTypeError(f"{inst!r} is not a pass instrument: it has none of the hooks "
                                      f"{', '.join(HOOK_NAMES)}; derive it from PassInstrument")
    return out


class PassContext:
    """The settings passes run under: opt_level, forced/disabled passes, instruments, config.

    ``with PassContext(opt_level=3): seq(mod)`` makes the context current for the
    ``with`` body (per thread). Inside a :class:`~passhost.transform.Sequential`, a pass
    runs when its name is not in ``disabled_pass`` and either its ``opt_level`` is at most
    the context's or its name is in ``required_pass``; passes in ``required_pass`` are
    also never vetoed by an instrument's ``should_run``.

    ``config`` maps registered option keys to values; an entered context also sees the
    options of the context it is nested in unless it sets them itself.

    :raises ConfigError: unknown config key (the message lists the known keys), wrongly
        typed value, or malformed ``required_pass``/``disabled_pass``.
    """

    __slots__ = ("_opt_level", "_required", "_disabled", "_instruments", "_own_config",
                 "_config", "_saved_configs", "_plan", "_skip_hooks", "_rule_stats", "_verifier", "__weakref__")

    def __init__(self, opt_level: int = 2, required_pass: Optional[Iterable[str]] = None,
                 disabled_pass: Optional[Iterable[str]] = None, instruments: Optional[Iterable[Any]] = None,
                 config: Optional[Mapping[str, Any]] = None) -> None:
        if not isinstance(opt_level, int) or isinstance(opt_level, bool):
            raise ConfigError(f"PassContext opt_level must be an int, got {opt_level!r}")
        self._opt_level = opt_level
        self._required = _names(required_pass, "required_pass")
        self._disabled = _names(disabled_pass, "disabled_pass")
        self._instruments = _check_instruments(instruments)
        self._own_config = _legalize(config)
        self._config = dict(self._own_config)
        self._saved_configs: list = []
        self._rule_stats: dict = {}
        self._verifier: Optional[_Verifier] = None
        self._rebuild_plan()

    # -- read-only settings ---------------------------------------------------------
    @property
    def opt_level(self) -> int:
        return self._opt_level

    @property
    def required_pass(self) -> tuple:
        return self._required

    @property
    def disabled_pass(self) -> tuple:
        return self._disabled

    @property
    def instruments(self) -> tuple:
        """The installed instruments, in call order."""
        return self._instruments

    @property
    def rule_stats(self) -> dict:
        """``{pass name: {rule name: {"tried", "matched", "rewritten"}}}``, summed over every
        run in this context of a pass made of rules (``transform.pattern_pass``). The
        ``report`` instrument shows each run's share; nothing in the passes reads it."""
        return self._rule_stats

    @property
    def config(self) -> Mapping[str, Any]:
        """The options in effect (read-only view)."""
        return MappingProxyType(self._config)

    def get_config(self, key: str, default: Any = None) -> Any:
        """The value of option ``key``: set in this context, else its registered default,
        else ``default``."""
        if key in self._config:
            return self._config[key]
        option = _OPTIONS.get(key)
        if option is not None and option.default is not None:
            return option.default
        return default

    @staticmethod
    def current() -> "PassContext":
        """The innermost entered context of this thread, or the thread's default context."""
        return current_context()

    @staticmethod
    def list_configs() -> dict:
        """``{key: {"type": type name, "default": value, "doc": text}}`` for every registered option."""
        return {k: {"type": o.type.__name__, "default": o.default, "doc": o.doc}
                for k, o in config_options().items()}

    def pass_enabled(self, info: Any) -> bool:
        """Whether a Sequential runs a pass with this ``PassInfo`` under this context."""
        name = info.name
        if name in self._plan[0]:
            return False
        return name in self._plan[1] or info.opt_level <= self._opt_level

    # -- the plan read by the pass manager -----------------------------------------------
    def _rebuild_plan(self) -> None:
        should_run, before, after = [], [], []
        for inst in self._instruments:
            for hook, out in (("should_run", should_run), ("run_before_pass", before),
                              ("run_after_pass", after)):
                fn = overridden_hook(inst, hook)
                if fn is not None:
                    out.append(fn)
        immutable = bool(self._config.get(IMMUTABLE_KEY, False))
        if self._config.get(VERIFY_KEY, False):
            if self._verifier is None:
                self._verifier = _Verifier()
            after.insert(0, self._verifier.run_after_pass)  # before instruments see the output
            before.append(self._verifier.run_before_pass)
        plain = not (should_run or before or after or immutable)
        # optional, outside the plan: read by the pass manager only when it skips a pass
        self._skip_hooks = tuple(fn for fn in (getattr(inst, SKIP_HOOK, None) for inst in self._instruments)
                                 if callable(fn))
        self._plan = (frozenset(self._disabled), frozenset(self._required), self._opt_level,
                      tuple(should_run), tuple(before), tuple(after), immutable, plain)

    # -- instruments --------------------------------------------------------------------
    def _clear_instruments(self, why: str) -> None:
        _log.info("Pass instrumentation %s failed; disabling pass instrumentation.", why)
        self._instruments = ()
        self._rebuild_plan()

    def _enter_instruments(self) -> None:
        entered = []
        inst = None
        try:
            for inst in self._instruments:
                fn = getattr(inst, "enter_pass_ctx", None)
                if fn is not None:
                    fn()
                entered.append(inst)
        except BaseException as exc:
            self._clear_instruments("entering pass context")
            for done in reversed(entered):
                fn = getattr(done, "exit_pass_ctx", None)
                if fn is not None:
                    fn()
            raise blamed(exc, "enter_pass_ctx", inst) from None

    def _exit_instruments(self) -> None:
        inst = None
        try:
            for inst in self._instruments:
                fn = getattr(inst, "exit_pass_ctx", None)
                if fn is not None:
                    fn()
        except BaseException as exc:
            self._clear_instruments("exiting pass context")
            raise blamed(exc, "exit_pass_ctx", inst) from None

    def override_instruments(self, instruments: Optional[Iterable[Any]]) -> None:
        """Replace the instruments: ``exit_pass_ctx`` of the current ones, then
        ``enter_pass_ctx`` of the new ones (``None`` or ``[]`` clears them).

        Works on any context, entered or not (including the default context). A hook
        that raises leaves the context without instruments and the exception propagates.
        """
        new = _check_instruments(instruments)
        self._exit_instruments()
        self._instruments = new
        self._rebuild_plan()
        self._enter_instruments()

    # -- with ---------------------------------------------------------------------------
    def __enter__(self) -> "PassContext":
        self._enter_instruments()
        stack = _STACK.get()
        outer = stack[-1] if stack else current_context()
        self._saved_configs.append(self._config)
        if outer is not self and outer._config:
            merged = dict(outer._config)
            merged.update(self._own_config)
            self._config = merged
            self._rebuild_plan()
        _STACK.set(stack + (self,))
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        stack = _STACK.get()
        if not stack or stack[-1] is not self:
            raise PassContextError("PassContext exited while it is not the current context; "
                                   "exit nested contexts in reverse order of entering them")
        _STACK.set(stack[:-1])
        config = self._saved_configs.pop()
        if config is not self._config:
            self._config = config
            self._rebuild_plan()
        self._exit_instruments()

    def __repr__(self) -> str:
        names = ", ".join(getattr(i, "name", type(i).__name__) for i in self._instruments)
        return ("Pass context information: \n"
                f"\topt_level: {self._opt_level}\n"
                f"\trequired passes: [{', '.join(self._required)}]\n"
                f"\tdisabled passes: [{', '.join(self._disabled)}]\n"
                f"\tinstruments: [{names}]\n"
                f"\tconfig: {self._config}\n"
                "\ttrace stack: []")
