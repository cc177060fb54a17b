"""The plugin API: declaring a plugin in one call, and the host modules a plugin may use.

A pass is declared once, where it is written: the ``module_pass``/``function_pass``
decorator gives its name, ``opt_level`` and ``required`` passes, and the class's fields
(a frozen dataclass, as xDSL declares passes) or keyword parameters are its options::

    from dataclasses import dataclass

    from passhost.transform import function_pass


    @function_pass(opt_level=1, name="Scale", required=["InferType"])
    @dataclass(frozen=True)
    class Scale:
        '''Multiply the weights by a factor.

        :param factor: what to multiply by
        '''

        factor: float = 2.0

        def transform_function(self, func, mod, ctx):
            ...

The plugin module -- the one its ``passhost`` entry point names -- then says what it
provides with one call, :func:`plugin`, which defines the module's hooks
(``passhost_register_passes`` and the others it needs) and its ``PASSHOST_API``::

    import passhost

    passhost.plugin(Scale, api=">=1.0,<2", default=True, after=("FoldConstant",))

The hooks it defines are ordinary ``@hookimpl`` functions yielding the records of
:mod:`passhost.hookspecs`, so the registry sees nothing new: a plugin written with
``@hookimpl`` by hand (CONTRACT §6) and one declared with :func:`plugin` load, list,
order, validate options and uninstall the same way.

:data:`PUBLIC_MODULES` lists the host modules a plugin may import; from each, the names
its ``__all__`` lists. Everything else in ``passhost`` is the host's own business and may
change in any release; ``tests/test_plugin_boundary.py`` holds every first-party plugin
to the list, and ruff's banned-api (``pyproject.toml``) bans the rest as you type.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .errors import PluginLoadError
from .hookspecs import NAME_GRAMMAR, InstrumentEntry, PassEntry, hookimpl

__all__ = ["plugin", "pass_entry", "Plugin", "PassDeclaration", "PUBLIC_MODULES"]

#: The host modules a plugin may import (``import M``, ``from M import name``, ``M.name``),
#: each offering the names its ``__all__`` lists. The rest of ``passhost`` is private to the
#: host, underscore or not.
PUBLIC_MODULES = (
    "passhost",             # hookimpl, plugin, pass_entry, ir, transform, passes, pipeline, API_VERSION, ...
    "passhost.ir",          # the IR: nodes, types, builders, visitors, analysis, text, evaluate, layouts, DTYPES
    "passhost.ir.nn",       # nn.* builders
    "passhost.ir.image",    # image.* builders
    "passhost.ir.vision",   # vision.* builders
    "passhost.ir.pattern",  # dataflow patterns and rules (CONTRACT §9)
    "passhost.ir.rewrite",  # the rewrite engine: rule tables, the walk, typing policies, the use analysis
    "passhost.ir.dims",     # symbolic dimensions: size variables and their arithmetic
    "passhost.transform",   # passes, Sequential, PassContext, the pass decorators (CONTRACT §3)
    "passhost.instrument",  # PassInstrument, pass_instrument (CONTRACT §4)
    "passhost.hookspecs",   # the hooks and their records (CONTRACT §6)
    "passhost.plugin_api",  # this module
    "passhost.options",     # Option and option schemas
    "passhost.errors",      # PasshostError and its subclasses
    "passhost.compat",      # API_VERSION and version ranges
    "passhost.passes",      # the installed passes by name (CONTRACT §5)
    "passhost.instruments",  # the installed instruments by name
    "passhost.formats",     # model formats and the converters plugins registered for them
    "passhost.jobs",        # one job of a batch: Job, run_job, lost_row (what executors handle)
    "passhost.io",          # atomic file writes, streaming and copying weights to files
    "passhost.weights",     # weights mapped from files, their identity, new weights past a budget
    "passhost.progress",    # progress of long steps (reading, a pass, writing)
    "passhost.numerics",    # random inputs and output comparison
    "passhost.testing",     # workloads and test helpers
)


def _record_hooks() -> dict:
    """Record type -> the hook that yields it, in the registry's order (one table, the registry's)."""
    from .registry import _RECORD_TYPES

    return {record_type: hook for hook, record_type in _RECORD_TYPES.items()}


@dataclass(frozen=True)
class PassDeclaration:
    """A pass as :func:`plugin` registers it: :class:`~passhost.hookspecs.PassEntry`'s
    fields without the name, which is read from the pass (its ``info.name``).

    Build it with :func:`pass_entry`.
    """

    factory: Callable[..., Any]
    name: Optional[str] = None
    summary: str = ""
    default: bool = False
    after: tuple = ()
    before: tuple = ()
    options: Optional[tuple] = None

    def __post_init__(self) -> None:
        # the record's own checks, now, so a bad declaration fails when the plugin is imported
        label = self.name or _declared_name(self.factory) or _label(self.factory)
        if self.name is None and NAME_GRAMMAR.fullmatch(label) is None:
            label = "pass"  # a lambda's '<lambda>': its real name is read later
        checked = PassEntry(label, self.factory, self.summary, self.default, self.after, self.before, self.options)
        object.__setattr__(self, "after", checked.after)
        object.__setattr__(self, "before", checked.before)
        object.__setattr__(self, "options", checked.options)

    def entry(self) -> PassEntry:
        """The :class:`~passhost.hookspecs.PassEntry`, the name read from the pass.

        :raises PluginLoadError: if the factory cannot be built without options to read it
        """
        factory = self.factory
        name = self.name or _declared_name(factory)
        if name is None:
            try:
                built = factory()
            except Exception as err:
                raise PluginLoadError(f"pass {_label(factory)}: factory() without options raised "
                                      f"{type(err).__name__}: {err} (needed to read the pass's name)") from err
            name = getattr(getattr(built, "info", None), "name", None)
            if not isinstance(name, str):
                raise PluginLoadError(f"pass {_label(factory)}: factory() returned {built!r}, not a passhost "
                                      "Pass; give its name with pass_entry(..., name=...) or build it with "
                                      "module_pass/function_pass/pattern_pass or Sequential")
        return PassEntry(name, factory, self.summary, self.default, self.after, self.before, self.options)


def pass_entry(factory: Any, *, name: Optional[str] = None, summary: str = "", default: bool = False,
               after: tuple = (), before: tuple = (), options: Optional[tuple] = None) -> PassDeclaration:
    """Declare one pass of a plugin that provides several (see :func:`plugin`).

    :param factory: the pass: a class made by ``module_pass``/``function_pass``, a pass
        object, or a function returning a pass (``pattern_pass``, ``Sequential``)
    :param name: the pass's name; by default its ``info.name``, read without building it
        where the decorator says it, else from ``factory()``
    :param summary: the line ``passhost list`` shows; default: the factory's docstring
    :param default: the pass joins :func:`passhost.default_pipeline`
    :param after: passes it runs after in the default pipeline
    :param before: passes it runs before in the default pipeline
    :param options: :class:`~passhost.hookspecs.Option` records, when the factory's
        signature or dataclass fields cannot say them (a required option)
    """
    if _is_pass_object(factory):
        name = name or factory.info.name
        factory = _constant_factory(factory)
    return PassDeclaration(factory, name, summary, default, after, before, options)


class Plugin:
    """What :func:`plugin` declared: records by hook, as an object with ``@hookimpl`` methods.

    Register it in-process with ``Registry.register_plugin(plugin_object, "name")``.

    :ivar PASSHOST_API: the plugin API range the plugin declared, or ``None``
    """

    def __init__(self, declarations: dict, api: Optional[str]) -> None:
        self._declarations = declarations
        self.PASSHOST_API = api
        for hook in declarations:
            setattr(self, hook, self._hook(hook))

    @property
    def hooks(self) -> tuple:
        """The names of the hooks the plugin implements."""
        return tuple(h for h in _record_hooks().values() if h in self._declarations)

    def records(self, hook: str) -> list:
        """The records ``hook`` yields (passes' names read now)."""
        return [d.entry() if isinstance(d, PassDeclaration) else d for d in self._declarations.get(hook, ())]

    def _hook(self, hook: str) -> Callable[[], list]:
        def implementation() -> list:
            return self.records(hook)

        implementation.__name__ = implementation.__qualname__ = hook
        implementation.__doc__ = f"Yield the records declared with passhost.plugin() ({hook})."
        return hookimpl(implementation)

    def describe(self) -> str:
        """``passhost plugin: the FoldConstant pass.``: the docstring of a plugin module without one."""
        named = {"passes": [d.name or _declared_name(d.factory) or _label(d.factory)
                            for d in self._declarations.get("passhost_register_passes", ())]}
        for hook in self.hooks:
            kind = hook.rsplit("_", 1)[1]
            if kind != "passes":
                named[kind] = [getattr(r, "name", None) or getattr(r, "key", "?") for r in self._declarations[hook]]
        what = [f"the {names[0]} {kind[:-2] if kind.endswith('sses') else kind[:-1]}" if len(names) == 1 else f"the {kind} {', '.join(names)}"
                for kind, names in named.items() if names]
        return f"passhost plugin: {'; '.join(what) or 'nothing'} (declared with passhost.plugin)."

    def __repr__(self) -> str:
        counts = ", ".join(f"{h.rsplit('_', 1)[1]}={len(self._declarations[h])}" for h in self.hooks)
        return f"<passhost plugin {counts}>"


def plugin(*items: Any, api: Optional[str] = None, name: Optional[str] = None, summary: str = "",
           default: bool = False, after: tuple = (), before: tuple = (), options: Optional[tuple] = None,
           module: Any = None) -> Plugin:
    """Declare what a plugin provides, in one call, in its entry-point module.

    Called at module level, it defines that module's hooks (``passhost_register_passes``
    and any other it needs) and ``PASSHOST_API``, so the module is a complete plugin::

        import passhost
        from .fold_constant import FoldConstant

        passhost.plugin(FoldConstant, api=">=1.0,<2", default=True,
                        summary="evaluate operator calls whose arguments are all constants")

    Each item is one of:

    * a pass -- a class made by ``module_pass``/``function_pass``, a pass object, or a
      function returning a pass; its name is its ``info.name``;
    * :func:`pass_entry` (a pass with its own summary and pipeline placement);
    * a :class:`~passhost.instrument.PassInstrument` class (give ``name``);
    * any record of :mod:`passhost.hookspecs`: ``PassEntry``, ``InstrumentEntry``,
      ``ConfigEntry``, ``OpEntry``, ``FormatEntry``, ``ConverterEntry``.

    The keywords ``name``, ``summary``, ``default``, ``after``, ``before`` and ``options``
    describe the one pass or instrument when there is exactly one (as :func:`pass_entry`'s;
    an instrument takes ``name``, ``summary`` and ``options``).

    :param api: the plugin API versions the plugin works with (``">=1.0,<2"``), set as
        the module's ``PASSHOST_API`` (see :mod:`passhost.compat`); ``None`` declares none
    :param module: the module (or its ``globals()``) to define the hooks in; default: the
        calling module when called at module level, none otherwise (use the returned object)
    :returns: the :class:`Plugin`, which ``Registry.register_plugin`` also accepts
    :raises PluginLoadError: for an item that is none of the above, keywords that have no
        single pass or instrument to describe, or a module that already defines a hook
        or ``PASSHOST_API`` of its own
    """
    given = {"name": name is not None, "summary": summary != "", "default": default is not False,
             "after": after != (), "before": before != (), "options": options is not None}
    meta = {k: v for k, v in (("name", name), ("summary", summary), ("default", default), ("after", after),
                              ("before", before), ("options", options)) if given[k]}
    if meta and (len(items) != 1 or isinstance(items[0], (PassDeclaration, *_record_hooks()))):
        raise PluginLoadError(f"passhost.plugin(): {', '.join(meta)} describe a single pass or instrument, "
                              f"but {len(items)} item(s) were given; use pass_entry(pass, ...) for each pass")
    if api is not None and not isinstance(api, str):
        raise PluginLoadError(f"passhost.plugin(): api must be a version range such as '>=1.0,<2', got {api!r}")
    declarations: dict = {}
    for item in items:
        hook, record = _classify(item, meta)
        declarations.setdefault(hook, []).append(record)
    made = Plugin(declarations, api)
    target = _target(module)
    if target is not None:
        _define(target, made)
    return made


def _classify(item: Any, meta: dict) -> tuple:
    """The hook ``item`` belongs to, and its record or declaration."""
    for record_type, hook in _record_hooks().items():
        if isinstance(item, record_type):
            return hook, item
    if isinstance(item, PassDeclaration):
        return "passhost_register_passes", item
    from .instrument import PassInstrument

    if isinstance(item, type) and issubclass(item, PassInstrument):
        extra = sorted(set(meta) - {"name", "summary", "options"})
        if "name" not in meta or extra:
            raise PluginLoadError(f"passhost.plugin(): instrument {item.__name__} needs name='kebab-name'"
                                  + (f" and takes no {', '.join(extra)}" if extra else ""))
        return "passhost_register_instruments", InstrumentEntry(meta["name"], item, meta.get("summary", ""),
                                                                 meta.get("options"))
    if isinstance(item, PassInstrument):
        raise PluginLoadError(f"passhost.plugin(): {item!r} is an instrument object; pass its class (a factory)")
    if callable(item) or _is_pass_object(item):
        return "passhost_register_passes", pass_entry(item, **meta)
    raise PluginLoadError(f"passhost.plugin(): cannot declare {item!r}: give a pass, pass_entry(...), an "
                          "instrument class or a passhost.hookspecs record")


def _target(module: Any) -> Optional[dict]:
    """The namespace to define the hooks in: ``module``'s, or the calling module's."""
    if module is None:
        frame = sys._getframe(2)
        return frame.f_globals if frame.f_globals is frame.f_locals else None
    if isinstance(module, dict):
        return module
    if isinstance(module, str):
        return vars(sys.modules[module])
    return vars(module)


def _define(namespace: dict, made: Plugin) -> None:
    where = namespace.get("__name__", "the module")
    taken = [h for h in made.hooks if h in namespace]
    if made.PASSHOST_API is not None and namespace.get("PASSHOST_API", made.PASSHOST_API) != made.PASSHOST_API:
        taken.append("PASSHOST_API")
    if "__passhost_plugin__" in namespace:
        raise PluginLoadError(f"{where} calls passhost.plugin() twice; declare everything in one call")
    if taken:
        raise PluginLoadError(f"{where} defines {', '.join(taken)} itself and declares the same with "
                              "passhost.plugin(); use one or the other")
    for hook in made.hooks:
        namespace[hook] = getattr(made, hook)
    if made.PASSHOST_API is not None:
        namespace["PASSHOST_API"] = made.PASSHOST_API
    if not namespace.get("__doc__"):
        namespace["__doc__"] = made.describe()
    namespace["__passhost_plugin__"] = made


def _is_pass_object(obj: Any) -> bool:
    from .transform import Pass

    return isinstance(obj, Pass)


def _declared_name(factory: Any) -> Optional[str]:
    from .transform import declared_info

    info = declared_info(factory)
    return None if info is None else info.name


def _constant_factory(built: Any) -> Callable[[], Any]:
    """A factory, taking no options, for a pass object (a decorated function)."""
    def factory() -> Any:
        return built

    factory.__name__ = factory.__qualname__ = built.info.name
    factory.__doc__ = getattr(getattr(built, "pass_func", None), "__doc__", None)
    return factory


def _label(factory: Any) -> str:
    return getattr(factory, "__name__", None) or type(factory).__name__
