"""Hook specifications and the records plugins hand to passhost.

This is the one file a plugin author reads. A plugin is a module (named by an entry
point in the group ``passhost``) holding one or more functions marked with
:data:`hookimpl` whose names are the hooks below. Every hook takes **no arguments**
and returns -- or yields -- an iterable of frozen records (``passhost.plugin(...)``, in
:mod:`passhost.plugin_api`, defines these functions from one call):

==================================  =====================
hook                                record
==================================  =====================
``passhost_register_passes``        :class:`PassEntry`
``passhost_register_instruments``   :class:`InstrumentEntry`
``passhost_register_ops``           :class:`OpEntry`
``passhost_register_configs``       :class:`ConfigEntry`
``passhost_register_formats``       :class:`FormatEntry`
``passhost_register_converters``    :class:`ConverterEntry`
``passhost_register_executors``     :class:`ExecutorEntry`
==================================  =====================

The records are declarations, not actions: the registry collects them, checks them
(names, types, clashes with other plugins) and attaches the distribution and version
of the plugin that yielded them. A hook that raises or yields something else makes its
plugin *broken*: it is listed with the error by ``passhost list`` and every other plugin
keeps working.
"""
from __future__ import annotations

import re

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

import pluggy

from .errors import PluginLoadError
from .ir.op import OpDef
from .options import Option

__all__ = [
    "PROJECT",
    "hookspec",
    "hookimpl",
    "PassEntry",
    "Option",
    "InstrumentEntry",
    "ConfigEntry",
    "OpEntry",
    "FormatEntry",
    "ConverterEntry",
    "passhost_register_passes",
    "passhost_register_instruments",
    "passhost_register_ops",
    "passhost_register_configs",
    "passhost_register_formats",
    "passhost_register_converters",
]

#: the pluggy project name and the entry-point group
PROJECT = "passhost"
#: marks the hook specifications below
hookspec = pluggy.HookspecMarker(PROJECT)
#: marks a plugin's hook implementations (re-exported as ``passhost.hookimpl``)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: an extra operator: the host's operator definition (:class:`passhost.ir.OpDef`)
OpEntry = OpDef


#: what a pass or instrument name may be: it is printed in tables, typed in pipelines and
#: shells, so no spaces, control characters or escape sequences
NAME_GRAMMAR = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")


def _check_name(record: str, name: str) -> None:
    if NAME_GRAMMAR.fullmatch(name) is None or len(name) > 128:
        raise PluginLoadError(f"{record}: name {name!r} is not a valid name (a letter or _, then letters, digits, "
                              "_, . or -; at most 128 characters)")


def _names(record: str, field_name: str, value: Any) -> tuple:
    """Validate a collection of pass names *before* converting it to a tuple."""
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise PluginLoadError(
            f"{record}: {field_name} must be a tuple or list of pass names, got {value!r}")
    for item in value:
        if not isinstance(item, str) or not item:
            raise PluginLoadError(f"{record}: {field_name} holds a non-name {item!r}")
    return tuple(value)


def _options(record: str, value: Any) -> Optional[tuple]:
    """Validate declared options: ``None``, or a tuple/list of distinct :class:`Option` records."""
    if value is None:
        return None
    if not isinstance(value, (tuple, list)):
        raise PluginLoadError(f"{record}: options must be a tuple of passhost.hookspecs.Option, got {value!r}")
    seen = set()
    for item in value:
        if not isinstance(item, Option):
            raise PluginLoadError(f"{record}: options holds {item!r}, not a passhost.hookspecs.Option")
        if item.name in seen:
            raise PluginLoadError(f"{record}: option {item.name!r} is declared twice")
        seen.add(item.name)
    return tuple(value)


@dataclass(frozen=True)
class PassEntry:
    """One pass a plugin provides.

    :param name: the pass name, CamelCase as in TVM; must equal ``factory().info.name``
    :param factory: ``factory(**options)`` returns the :class:`passhost.transform.Pass`;
        it must work without options (that builds the pass ``required`` lookups run)
    :param summary: one line for ``passhost list``; defaults to the first line of the
        factory's docstring
    :param default: the pass joins :func:`passhost.default_pipeline`
    :param after: passes this one runs after in the default pipeline (names that are not
        installed are ignored)
    :param before: passes this one runs before in the default pipeline
    :param options: the pass's options as :class:`Option` records; ``None`` (the default)
        reads them from the factory's signature and ``:param`` docs (see
        :mod:`passhost.options`). Declare them when the signature cannot say it: a required
        option, or a type narrower than the annotation.

    ``opt_level`` and ``required`` are not repeated here: the registry reads them from
    ``factory().info``, the one source of truth.
    """

    name: str
    factory: Callable[..., Any]
    summary: str = ""
    default: bool = False
    after: tuple = ()
    before: tuple = ()
    options: Optional[tuple] = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise PluginLoadError(f"PassEntry: name must be a non-empty string, got {self.name!r}")
        _check_name("PassEntry", self.name)
        label = f"PassEntry {self.name!r}"
        if not callable(self.factory):
            raise PluginLoadError(f"{label}: factory must be callable, got {self.factory!r}")
        if not isinstance(self.summary, str):
            raise PluginLoadError(f"{label}: summary must be a string, got {self.summary!r}")
        if not isinstance(self.default, bool):
            raise PluginLoadError(f"{label}: default must be True or False, got {self.default!r}")
        object.__setattr__(self, "after", _names(label, "after", self.after))
        object.__setattr__(self, "before", _names(label, "before", self.before))
        object.__setattr__(self, "options", _options(label, self.options))


@dataclass(frozen=True)
class InstrumentEntry:
    """One pass instrument a plugin provides.

    :param name: the instrument name, kebab-case (``timing``, ``print-ir``)
    :param factory: ``factory(**options)`` returns a :class:`passhost.instrument.PassInstrument`
    :param summary: one line for ``passhost list``; defaults to the factory's docstring
    :param options: its options as :class:`Option` records (``None``: read from the factory)
    """

    name: str
    factory: Callable[..., Any]
    summary: str = ""
    options: Optional[tuple] = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise PluginLoadError(f"InstrumentEntry: name must be a non-empty string, got {self.name!r}")
        _check_name("InstrumentEntry", self.name)
        if not callable(self.factory):
            raise PluginLoadError(
                f"InstrumentEntry {self.name!r}: factory must be callable, got {self.factory!r}")
        if not isinstance(self.summary, str):
            raise PluginLoadError(
                f"InstrumentEntry {self.name!r}: summary must be a string, got {self.summary!r}")
        object.__setattr__(self, "options", _options(f"InstrumentEntry {self.name!r}", self.options))


@dataclass(frozen=True)
class ConfigEntry:
    """One :class:`passhost.transform.PassContext` config option.

    :param key: dotted key, by convention ``"relay.<PassName>.<option>"``
    :param type: the value type (``int``, ``bool``, ``float``, ``str``, ``tuple`` ...);
        ``PassContext(config=...)`` rejects values of another type
    :param default: the value passes read when the option is not set
    :param doc: one line shown by ``passhost info`` and in the "known keys" error
    :param check: optional ``check(value) -> None | str``: ``None`` for a good value, else
        what it must be (``"must be a non-negative int"``); a bad value is then refused when
        the ``PassContext`` is built, before anything runs (``passhost run`` exits 2)
    """

    key: str
    type: type
    default: Any
    doc: str = ""
    check: Optional[Callable[[Any], Optional[str]]] = None

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise PluginLoadError(f"ConfigEntry: key must be a non-empty string, got {self.key!r}")
        if not isinstance(self.type, type):
            raise PluginLoadError(f"ConfigEntry {self.key!r}: type must be a class, got {self.type!r}")
        if not isinstance(self.doc, str):
            raise PluginLoadError(f"ConfigEntry {self.key!r}: doc must be a string, got {self.doc!r}")
        if self.check is not None and not callable(self.check):
            raise PluginLoadError(f"ConfigEntry {self.key!r}: check must be callable, got {self.check!r}")


def _suffixes(label: str, value: Any) -> tuple:
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise PluginLoadError(f"{label}: suffixes must be a tuple or list like ('.onnx',), got {value!r}")
    out = []
    for item in value:
        if not isinstance(item, str) or not item.startswith(".") or len(item) < 2 or "/" in item:
            raise PluginLoadError(f"{label}: a suffix is a string like '.onnx', got {item!r}")
        out.append(item.lower())
    return tuple(out)


@dataclass(frozen=True)
class FormatEntry:
    """One model file format a plugin reads and/or writes.

    :param name: the format name, lower-case (``onnx``); ``--from``/``--to`` and the
        ``format=`` argument of :func:`passhost.ir.load`/:func:`passhost.ir.save` take it
    :param suffixes: the file suffixes that select this format (``(".onnx",)``)
    :param load: ``load(path, *, input_shapes=None, keep_params=False)`` returns an
        :class:`~passhost.ir.IRModule` (with ``keep_params``: ``(IRModule, params)``,
        params a dict name -> ndarray); bad input raises
        :class:`~passhost.errors.PasshostError` with one clear line
    :param save: ``save(mod, path, **options)`` writes ``mod`` to ``path`` atomically
        (:func:`passhost.io.write_bytes_atomic`); an unknown option raises
        :class:`~passhost.errors.UsageError`
    :param summary: one line for ``passhost list``

    A format needs ``load``, ``save`` or both. The host's own text format (``text``:
    ``.txt``, ``.relay``) is built in.
    """

    name: str
    suffixes: tuple
    load: Optional[Callable[..., Any]] = None
    save: Optional[Callable[..., Any]] = None
    summary: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name != self.name.lower() \
                or not self.name.replace("-", "").replace("_", "").isalnum():
            raise PluginLoadError(f"FormatEntry: name must be a lower-case word like 'onnx', got {self.name!r}")
        label = f"FormatEntry {self.name!r}"
        object.__setattr__(self, "suffixes", _suffixes(label, self.suffixes))
        for field_name in ("load", "save"):
            value = getattr(self, field_name)
            if value is not None and not callable(value):
                raise PluginLoadError(f"{label}: {field_name} must be callable or None, got {value!r}")
        if self.load is None and self.save is None:
            raise PluginLoadError(f"{label}: give load, save or both")
        if not isinstance(self.summary, str):
            raise PluginLoadError(f"{label}: summary must be a string, got {self.summary!r}")


@dataclass(frozen=True)
class ConverterEntry:
    """One operator converter for a model format's importer (e.g. ONNX ``MyOp`` -> IR).

    :param format: the format whose importer uses it (``"onnx"``)
    :param op_type: the operator name in that format (``"MyRelu"``)
    :param convert: ``convert(node)`` returns the IR expression (or a tuple, one per
        output); for ``onnx`` the node is a ``passhost_onnx.Node`` (inputs as typed
        expressions, ``node.attr(name)``, ``node.const(i)``, ``node.shape(i)``)
    :param domain: the operator's domain (``""`` for the standard ONNX domain)
    :param since: the first opset this converter applies to; the importer picks, per
        node, the converter with the largest ``since`` not above the model's opset
    :param summary: one line for ``passhost list --json``

    A plugin's converter replaces the format plugin's own for the same
    ``(domain, op_type, since)``; two plugins converting the same one are a conflict.
    """

    format: str
    op_type: str
    convert: Callable[..., Any]
    domain: str = ""
    since: int = 1
    summary: str = ""

    def __post_init__(self) -> None:
        for field_name in ("format", "op_type"):
            value = getattr(self, field_name)
            if not isinstance(value, str) or not value:
                raise PluginLoadError(f"ConverterEntry: {field_name} must be a non-empty string, got {value!r}")
        label = f"ConverterEntry {self.format}:{self.domain + '.' if self.domain else ''}{self.op_type}"
        if not callable(self.convert):
            raise PluginLoadError(f"{label}: convert must be callable, got {self.convert!r}")
        if not isinstance(self.domain, str):
            raise PluginLoadError(f"{label}: domain must be a string, got {self.domain!r}")
        if isinstance(self.since, bool) or not isinstance(self.since, int) or self.since < 1:
            raise PluginLoadError(f"{label}: since must be an opset number >= 1, got {self.since!r}")
        if not isinstance(self.summary, str):
            raise PluginLoadError(f"{label}: summary must be a string, got {self.summary!r}")

    @property
    def key(self) -> str:
        """``onnx:com.example.MyRelu@1``: the name conflicts are reported under."""
        return f"{self.format}:{self.domain + '.' if self.domain else ''}{self.op_type}@{self.since}"


# --------------------------------------------------------------------------------------
# hook specifications
# --------------------------------------------------------------------------------------


@hookspec
def passhost_register_passes() -> Iterable[PassEntry]:
    """Register passes.

    Called once per plugin when the registry is first used (``passhost.passes``,
    ``passhost.pipeline``, ``passhost list`` ...). Return or yield one
    :class:`PassEntry` per pass; each name becomes ``passhost.passes.<name>``, a
    ``-p`` pipeline element and a name ``required`` lists can use.

    Example:

    .. code-block:: python

        from passhost import hookimpl
        from passhost.hookspecs import PassEntry
        from passhost.transform import module_pass


        @module_pass(opt_level=0, name="Identity")
        def identity(mod, ctx):
            \"\"\"Return the module unchanged.\"\"\"
            return mod


        @hookimpl
        def passhost_register_passes():
            yield PassEntry("Identity", lambda: identity, summary="return the module unchanged")
    """


@hookspec
def passhost_register_instruments() -> Iterable[InstrumentEntry]:
    """Register pass instruments.

    Called once per plugin when the registry is first used. Return or yield one
    :class:`InstrumentEntry` per instrument; each becomes available as
    ``passhost.instruments.get(name, **options)`` and ``passhost run --instrument NAME``.

    Example:

    .. code-block:: python

        from passhost import hookimpl
        from passhost.hookspecs import InstrumentEntry
        from passhost.instrument import pass_instrument


        @pass_instrument
        class CountPasses:
            \"\"\"Count the passes that ran.\"\"\"

            def __init__(self):
                self.count = 0

            def run_after_pass(self, mod, info):
                self.count += 1


        @hookimpl
        def passhost_register_instruments():
            yield InstrumentEntry("count-passes", CountPasses)
    """


@hookspec
def passhost_register_ops() -> Iterable[OpEntry]:
    """Register extra operators.

    Core operators (``add``, ``nn.conv2d`` ...) are built in and can be looked up with
    ``ir.Op.get`` at import time. Operators from this hook exist only once the registry
    has loaded, so a plugin looks them up lazily (inside its pass), never at import.
    An :class:`OpEntry` is the host's :class:`passhost.ir.OpDef`.

    Example:

    .. code-block:: python

        import numpy as np

        from passhost import hookimpl
        from passhost.hookspecs import OpEntry
        from passhost.ir import OpPattern


        def _same_type(arg_types, attrs):
            return arg_types[0]


        @hookimpl
        def passhost_register_ops():
            yield OpEntry(
                name="my.square",
                num_inputs=1,
                type_rel=_same_type,
                compute=lambda args, attrs: np.square(args[0]),
                pattern=OpPattern.ELEMWISE,
                summary="elementwise x * x",
            )
    """


@hookspec
def passhost_register_configs() -> Iterable[ConfigEntry]:
    """Register :class:`~passhost.transform.PassContext` config options.

    ``PassContext(config={...})`` accepts only registered keys and values of the
    registered type; an unknown key is rejected with the list of known keys. A pass
    reads its option with ``ctx.config.get(key, default)``.

    Example:

    .. code-block:: python

        from passhost import hookimpl
        from passhost.hookspecs import ConfigEntry


        @hookimpl
        def passhost_register_configs():
            yield ConfigEntry("relay.MyPass.max_depth", int, 16, doc="deepest chain MyPass rewrites")
    """


@hookspec
def passhost_register_formats() -> Iterable[FormatEntry]:
    """Register model file formats.

    Called once per plugin when the registry is first used. Return or yield one
    :class:`FormatEntry` per format; its suffixes then select it in
    :func:`passhost.ir.load`, :func:`passhost.ir.save` and ``passhost run``.

    Example:

    .. code-block:: python

        import json

        from passhost import hookimpl, ir
        from passhost.hookspecs import FormatEntry
        from passhost.io import write_text_atomic


        def save_json(mod, path, **options):
            write_text_atomic(path, json.dumps({"text": ir.astext(mod)}))


        @hookimpl
        def passhost_register_formats():
            yield FormatEntry("relay-json", (".rjson",), save=save_json, summary="text in JSON")
    """


@hookspec
def passhost_register_converters() -> Iterable[ConverterEntry]:
    """Register operator converters for a format's importer.

    Called once per plugin when the registry is first used. The ``onnx`` format
    (``passhost-onnx``) asks for its converters each time it imports a model, so a
    plugin can teach it new operators -- a custom domain's included -- without
    touching ``passhost-onnx`` (and without importing it).

    Example:

    .. code-block:: python

        from passhost import hookimpl, ir
        from passhost.hookspecs import ConverterEntry


        def my_relu(node):
            # com.example.MyRelu(x, alpha=...) as max(x, alpha * x)
            x = node.inputs[0]
            alpha = ir.const(float(node.attr("alpha", 0.1)), node.dtype(0))
            return ir.maximum(x, ir.multiply(x, alpha))


        @hookimpl
        def passhost_register_converters():
            yield ConverterEntry("onnx", "MyRelu", my_relu, domain="com.example")
    """


# --------------------------------------------------------------------------------------
# executors: where ``passhost run A B C -o DIR/`` runs its jobs
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecutorEntry:
    """One way to run the jobs of a batch (``passhost run A.onnx B.onnx -o out/``).

    :param name: lower-case word (``dask``); ``--executor NAME`` and
        ``--executor NAME://ADDRESS`` select it. ``local`` (a pool of processes on this
        machine, ``-j N``) is built in
    :param factory: ``factory(address=None, *, workers=None, transfer="auto")`` returns
        an executor: ``address`` is what followed ``NAME://`` (``None`` without it),
        ``workers`` is ``-j`` (``None`` when not given), ``transfer`` is ``--transfer``
        (``auto``, ``paths`` or ``bytes``: whether jobs send file paths or file contents)
    :param summary: one line for ``passhost list``

    The executor is a context manager with a submit/as-completed interface:

    - ``__enter__`` starts or connects (a problem there raises
      :class:`~passhost.errors.UsageError` with one line: exit 2); ``__exit__`` stops
      what it started, also after an error or Ctrl-C;
    - ``description``: one line, said on stderr before the jobs run: where they run and
      how the models get there;
    - ``submit(fn, job)`` returns a handle; ``fn`` is a top-level function (picklable by
      reference) that takes the job, a :class:`passhost.jobs.Job`, and returns its
      row (a dict; it never raises). The executor may hold the job back until
      ``as_completed`` asks for it;
    - ``as_completed(handles)`` yields ``(handle, row)`` once per handle, as each job
      finishes. A job the executor lost (its worker died for good) gets
      :func:`passhost.jobs.lost_row`; a row may carry a ``"note"`` (a job run again
      after its worker died), which the summary table shows.

    Outputs are written atomically (the job's ``ir.save`` does it, or the executor with
    :func:`passhost.io.write_bytes_atomic` when it brings the bytes back).
    """

    name: str
    factory: Callable[..., Any]
    summary: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name != self.name.lower() \
                or not self.name.replace("-", "").replace("_", "").isalnum():
            raise PluginLoadError(f"ExecutorEntry: name must be a lower-case word like 'dask', got {self.name!r}")
        if not callable(self.factory):
            raise PluginLoadError(f"ExecutorEntry {self.name!r}: factory must be callable, got {self.factory!r}")
        if not isinstance(self.summary, str):
            raise PluginLoadError(f"ExecutorEntry {self.name!r}: summary must be a string, got {self.summary!r}")


@hookspec
def passhost_register_executors() -> Iterable[ExecutorEntry]:
    """Register executors: ways to run a batch of models (``passhost run --executor NAME``).

    Called once per plugin when the registry is first used. Return or yield one
    :class:`ExecutorEntry` per executor. Each job is one model: read, optimised, written,
    checked; the executor decides where it runs.

    Example:

    .. code-block:: python

        from concurrent.futures import ThreadPoolExecutor, as_completed

        from passhost import hookimpl
        from passhost.hookspecs import ExecutorEntry


        class Threads:
            \"\"\"Run the jobs in threads of this process.\"\"\"

            def __init__(self, address=None, *, workers=None, transfer="auto"):
                self.workers = workers or 4
                self.description = f"{self.workers} threads of this process"

            def __enter__(self):
                self.pool = ThreadPoolExecutor(self.workers)
                return self

            def __exit__(self, *exc):
                self.pool.shutdown(cancel_futures=True)

            def submit(self, fn, job):
                return self.pool.submit(fn, job)

            def as_completed(self, handles):
                for future in as_completed(handles):
                    yield future, future.result()


        @hookimpl
        def passhost_register_executors():
            yield ExecutorEntry("threads", Threads, summary="jobs in threads of this process")
    """


__all__ += ["ExecutorEntry", "passhost_register_executors"]
