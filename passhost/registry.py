"""The plugin registry: pluggy hooks fed by the ``passhost`` entry-point group.

Nothing is loaded when this module is imported. :func:`get_registry` builds the
registry on first use and caches it. Entry points are loaded **one at a time**, sorted
by name, and every failure -- an import error, a misspelled hook, a hook that raises or
returns a bad record, a pass whose ``info.name`` differs from its entry -- is recorded
as a :class:`BrokenPlugin` attributed to that plugin, while every other plugin keeps
working. Two plugins registering the same name make the name unusable (a
:class:`~passhost.errors.PluginConflict` naming both) until one is removed.

Environment:

``PASSHOST_DISABLE_PLUGINS=fold-constant,timing``
    entry-point names that are not loaded
``PASSHOST_DISABLE_PLUGIN_AUTOLOAD=1``
    load no entry points at all

In-process use (tests)::

    reg = Registry(load_entrypoints=False)
    reg.register_plugin(MyPlugin(), "my-plugin")
    with use_registry(reg):
        passhost.passes.MyPass()
"""
from __future__ import annotations

import contextlib
import difflib
import io
import os
import sys
import threading
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Iterator, Optional

import pluggy

from . import _catalog, hookspecs, transform
from .compat import incompatibility
from ._records import (BrokenPlugin, ConfigRecord, Conflict, ConverterRecord, FormatRecord, InstrumentRecord, PassRecord,
                       PluginSource)
from .errors import (FormatError, InstrumentNotFound, IRError, PassNotFound, PasshostError, PipelineError,
                     PluginConflict, PluginLoadError, UsageError)
from .hookspecs import PROJECT, ConfigEntry, ConverterEntry, ExecutorEntry, FormatEntry, InstrumentEntry, OpEntry, PassEntry
from .ir import Op, register_op
from .ir.serialize import load_text, save_text

__all__ = [
    "Registry", "get_registry", "use_registry", "reset_registry",
    "PluginSource", "BrokenPlugin", "PassRecord", "InstrumentRecord", "ConfigRecord", "FormatRecord", "ExecutorRecord",
    "Conflict",
    "DISABLE_PLUGINS_ENV", "DISABLE_AUTOLOAD_ENV",
]

DISABLE_PLUGINS_ENV = "PASSHOST_DISABLE_PLUGINS"
DISABLE_AUTOLOAD_ENV = "PASSHOST_DISABLE_PLUGIN_AUTOLOAD"

#: hook name -> the record type it must yield
_RECORD_TYPES = {
    "passhost_register_passes": PassEntry,
    "passhost_register_instruments": InstrumentEntry,
    "passhost_register_ops": OpEntry,
    "passhost_register_configs": ConfigEntry,
    "passhost_register_formats": FormatEntry,
    "passhost_register_converters": ConverterEntry,
    "passhost_register_executors": ExecutorEntry,
}


def _reraise_interrupts(err: BaseException) -> None:
    """A real Ctrl-C (or a generator being closed) is not a plugin failure: let it go on."""
    if isinstance(err, (KeyboardInterrupt, GeneratorExit)):
        raise err


def _describe_base(err: BaseException, when: str) -> str:
    """One line for a ``SystemExit`` or a custom ``BaseException`` out of plugin code."""
    if isinstance(err, SystemExit):
        return f"ended the interpreter (SystemExit({err.code!r})) when {when}; plugin code must not call sys.exit"
    return f"raised {type(err).__name__} (a BaseException, not an Exception) when {when}: {err}"


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _first_doc_line(obj: Any) -> str:
    doc = getattr(obj, "__doc__", None)
    if not isinstance(doc, str):
        return ""
    for line in doc.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def _env_flag(value: Optional[str]) -> bool:
    return bool(value) and value.strip().lower() not in ("0", "false", "no", "off", "")


class _RejectPlugin(Exception):
    """Internal: a plugin's records are unusable; the message says why."""


def _check_schema(label: str, record: Any) -> None:
    """Read a *declared* option schema now, so a declaration its factory contradicts breaks
    the plugin. A schema read from the signature cannot contradict it: it is read when first
    asked for (an option to check, ``info``, ``list --json``), not on every start-up."""
    if record.entry.options is None:
        return
    try:
        _ = record.options
    except TypeError as err:
        raise _RejectPlugin(f"{label}: {err}") from None


class Registry:
    """Passes, instruments, ops and config options registered by plugins.

    :param load_entrypoints: load the ``passhost`` entry-point group now; ``False``
        gives an empty registry to fill with :meth:`register_plugin`
    :param strict: raise :class:`~passhost.errors.PluginLoadError` (or
        :class:`~passhost.errors.PluginConflict`) instead of recording a broken plugin
    :param environ: where to read ``PASSHOST_DISABLE_PLUGINS`` and
        ``PASSHOST_DISABLE_PLUGIN_AUTOLOAD`` (default ``os.environ``)
    """

    def __init__(self, load_entrypoints: bool = True, *, strict: bool = False,
                 environ: Optional[dict] = None) -> None:
        env = os.environ if environ is None else environ
        self.strict = strict
        self.autoload = not _env_flag(env.get(DISABLE_AUTOLOAD_ENV))
        self.blocked = frozenset(n.strip() for n in env.get(DISABLE_PLUGINS_ENV, "").split(",") if n.strip())
        self._pm = pluggy.PluginManager(PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._passes: dict = {}
        self._instruments: dict = {}
        self._configs: dict = {}
        self._formats: dict = {}
        self._converters: dict = {}
        self._executors: dict = {}
        self._ops: dict = {}
        self._conflicts: dict = {}
        self._conflict_records: dict = {}
        #: plugins that loaded, by name
        self.plugins: dict = {}
        #: plugins that failed to load, in load order
        self.broken: list = []
        #: entry points skipped because PASSHOST_DISABLE_PLUGINS names them
        self.disabled: list = []
        self.entrypoints_loaded = False
        if load_entrypoints and self.autoload:
            self.load_entrypoints()

    # -- loading ------------------------------------------------------------------
    def load_entrypoints(self) -> None:
        """Load every entry point of the group ``passhost``, one at a time, sorted by name."""
        eps = sorted(metadata.entry_points(group=PROJECT), key=lambda ep: (ep.name, ep.value))
        for ep in eps:
            dist = getattr(ep, "dist", None)
            source = PluginSource(ep.name, dist.name if dist else None, dist.version if dist else None)
            if ep.name in self.blocked:
                self.disabled.append(source)
                continue
            if ep.name in self.plugins:
                other = self.plugins[ep.name]
                self._broken(source, f"entry point name {ep.name!r} is also used by {other.describe()}; "
                                     "uninstall one of them")
                continue
            printed = io.StringIO()
            try:
                # what a plugin prints at import is held back: it goes to stderr if the import
                # succeeds (never to stdout, which carries passhost's output), and is dropped
                # if it fails (an argparse usage, say), since the broken-plugin line says why
                with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
                    obj = ep.load()
            except BaseException as err:  # any import-time failure isolates this plugin only
                _reraise_interrupts(err)
                self._broken(source, _one_line(err) if isinstance(err, Exception) else _describe_base(err, "imported"))
                continue
            if printed.getvalue():
                sys.stderr.write(printed.getvalue())
            with contextlib.redirect_stdout(sys.stderr):  # its hooks and factories print to stderr too
                self._add(obj, source)
        unknown = sorted(self.blocked - {ep.name for ep in eps})
        if unknown:
            import warnings

            close = {n: difflib.get_close_matches(n, [ep.name for ep in eps], n=1) for n in unknown}
            hints = ", ".join(f"{n!r}" + (f" (did you mean {close[n][0]!r}?)" if close[n] else "") for n in unknown)
            warnings.warn(f"{DISABLE_PLUGINS_ENV} names no installed plugin: {hints}; it takes entry-point "
                          "names as `passhost list` shows them", UserWarning, stacklevel=2)
        self.entrypoints_loaded = True

    def register_plugin(self, obj: Any, name: Optional[str] = None, *, distribution: Optional[str] = None,
                        version: Optional[str] = None) -> bool:
        """Register an object holding ``@hookimpl`` functions (a module, class or instance).

        Failures are recorded in :attr:`broken` (or raised when ``strict``).

        :param name: the plugin name shown in messages (default: the object's ``__name__``)
        :returns: whether the plugin loaded
        """
        if name is None:
            name = getattr(obj, "__name__", None) or type(obj).__name__
        source = PluginSource(name, distribution, version)
        if name in self.plugins:
            self._broken(source, f"a plugin named {name!r} is already registered ({self.plugins[name].describe()})")
            return False
        return self._add(obj, source)

    def _add(self, obj: Any, source: PluginSource) -> bool:
        pm = self._pm
        reason = incompatibility(obj)
        if reason is not None:
            self._broken(source, reason)
            return False
        try:
            pm.register(obj, name=source.name)
        except Exception as err:  # pluggy's PluginValidationError, or "already registered"
            self._broken(source, _one_line(err))
            return False
        try:
            pm.check_pending()
            records = self._collect(obj)
            staged = self._stage(records, source)
            self._commit(staged, source)
        except Exception as err:
            pm.unregister(obj)
            if isinstance(err, PluginConflict):  # strict mode
                raise
            if isinstance(err, _RejectPlugin):
                self._broken(source, str(err))
            else:
                self._broken(source, _one_line(err))
            return False
        self.plugins[source.name] = source
        return True

    def _broken(self, source: PluginSource, error: str) -> None:
        record = BrokenPlugin(source.name, source.distribution, source.version, error)
        if self.strict:
            raise PluginLoadError(record.message + " (strict plugin loading)")
        self.broken.append(record)

    def _collect(self, obj: Any) -> dict:
        """Call each hook this plugin implements, attributing any failure to it."""
        records: dict = {name: [] for name in _RECORD_TYPES}
        found = False
        for caller in self._pm.get_hookcallers(obj) or ():
            for impl in caller.get_hookimpls():
                if impl.plugin is not obj:
                    continue
                found = True
                if impl.hookwrapper or impl.wrapper:
                    raise _RejectPlugin(f"{caller.name} must not be a hook wrapper; return the records")
                try:
                    result = impl.function()
                    if result is None:
                        raise _RejectPlugin(f"{caller.name}() returned None; return or yield records")
                    items = list(result)
                except _RejectPlugin:
                    raise
                except Exception as err:
                    raise _RejectPlugin(f"{caller.name}() raised {_one_line(err)}") from err
                except BaseException as err:
                    _reraise_interrupts(err)
                    raise _RejectPlugin(f"{caller.name}() {_describe_base(err, 'called')}") from None
                want = _RECORD_TYPES[caller.name]
                for item in items:
                    if not isinstance(item, want):
                        raise _RejectPlugin(f"{caller.name}() yielded {item!r}; expected "
                                            f"passhost.hookspecs.{_record_name(want)} records")
                records[caller.name].extend(items)
        if not found:
            raise _RejectPlugin("defines no passhost hooks (functions named passhost_register_* "
                                "marked with @passhost.hookimpl)")
        return records

    def _stage(self, records: dict, source: PluginSource) -> dict:
        """Validate every record of one plugin before anything is registered."""
        passes = []
        seen: set = set()
        for entry in records["passhost_register_passes"]:
            if entry.name in seen:
                raise _RejectPlugin(f"registers pass {entry.name!r} twice")
            seen.add(entry.name)
            passes.append(self._pass_record(entry, source))
        instruments = []
        seen = set()
        for entry in records["passhost_register_instruments"]:
            if entry.name in seen:
                raise _RejectPlugin(f"registers instrument {entry.name!r} twice")
            seen.add(entry.name)
            summary = entry.summary or _first_doc_line(entry.factory)
            record = InstrumentRecord(entry, source, summary)
            _check_schema(f"InstrumentEntry {entry.name!r}", record)
            instruments.append(record)
        ops = []
        for entry in records["passhost_register_ops"]:
            owner = self._ops.get(entry.name)
            if owner is not None:
                raise _RejectPlugin(f"operator {entry.name!r} is already registered by {owner[1].describe()}")
            existing = _existing_op(entry.name)
            if existing is not None and existing.definition is not entry:
                raise _RejectPlugin(f"operator {entry.name!r} is already defined by passhost; pick another name")
            ops.append(entry)
        configs = [ConfigRecord(entry, source) for entry in records["passhost_register_configs"]]
        formats = []
        seen = set()
        for entry in records["passhost_register_formats"]:
            if entry.name in seen:
                raise _RejectPlugin(f"registers format {entry.name!r} twice")
            if entry.name == TEXT_FORMAT.name:
                raise _RejectPlugin(f"format {entry.name!r} is passhost's built-in text format; pick another name")
            seen.add(entry.name)
            formats.append(FormatRecord(entry, source))
        converters = []
        seen = set()
        for entry in records["passhost_register_converters"]:
            if entry.key in seen:
                raise _RejectPlugin(f"registers converter {entry.key!r} twice")
            seen.add(entry.key)
            converters.append(ConverterRecord(entry, source))
        executors = []
        seen = set()
        for entry in records["passhost_register_executors"]:
            if entry.name in seen:
                raise _RejectPlugin(f"registers executor {entry.name!r} twice")
            if entry.name == LOCAL_EXECUTOR.name:
                raise _RejectPlugin(f"executor {entry.name!r} is passhost's built-in process pool; pick another name")
            seen.add(entry.name)
            executors.append(ExecutorRecord(entry, source))
        return {"passes": passes, "instruments": instruments, "ops": ops, "configs": configs, "formats": formats,
                "converters": converters, "executors": executors}

    def _pass_record(self, entry: PassEntry, source: PluginSource) -> PassRecord:
        """Build the factory once without options to learn ``info``; reject what cannot be a pass."""
        label = f"PassEntry {entry.name!r}"
        try:
            built = entry.factory()
        except Exception as err:
            raise _RejectPlugin(f"{label}: factory() without options raised {_one_line(err)}") from err
        except BaseException as err:
            _reraise_interrupts(err)
            raise _RejectPlugin(f"{label}: factory() {_describe_base(err, 'called')}") from None
        info = getattr(built, "info", None)
        if info is None or not callable(built) or not isinstance(built, transform.Pass):
            shown = repr(built)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise _RejectPlugin(f"{label}: factory() returned {shown}, not a passhost.transform.Pass "
                                "(build passes with transform.module_pass/function_pass/pattern_pass or Sequential)")
        if info.name != entry.name:
            raise _RejectPlugin(f"{label}: factory() builds a pass named {info.name!r}; "
                                "the entry name must equal the pass's info.name")
        summary = (entry.summary or _first_doc_line(entry.factory)
                   or _first_doc_line(getattr(built, "pass_func", None)))
        if not summary and not type(built).__module__.startswith("passhost."):
            summary = _first_doc_line(type(built))
        record = PassRecord(entry, source, int(info.opt_level), tuple(info.required), summary)
        _check_schema(label, record)
        return record

    def _commit(self, staged: dict, source: PluginSource) -> None:
        for entry in staged["ops"]:
            if _existing_op(entry.name) is None:
                try:
                    register_op(entry)
                except IRError as err:
                    raise _RejectPlugin(f"passhost_register_ops(): {err}") from err
            self._ops[entry.name] = (entry, source)
        claimed = []
        for record in staged["configs"]:
            entry = record.entry
            if self._claim("config", self._configs, record.key, record, source):
                claimed.append(record.key)
                try:
                    transform.register_config(entry.key, entry.type, entry.default, entry.doc, entry.check)
                except PasshostError as err:
                    for key in claimed:
                        del self._configs[key]
                    for key in claimed[:-1]:
                        transform.unregister_config(key)
                    raise _RejectPlugin(f"passhost_register_configs(): {err}") from err
        for record in staged["passes"]:
            self._claim("pass", self._passes, record.name, record, source)
        for record in staged["instruments"]:
            self._claim("instrument", self._instruments, record.name, record, source)
        for record in staged["formats"]:
            self._claim("format", self._formats, record.name, record, source)
        for record in staged["converters"]:
            self._claim("converter", self._converters, record.name, record, source)
        for record in staged["executors"]:
            self._claim("executor", self._executors, record.name, record, source)

    def _claim(self, kind: str, table: dict, name: str, record: Any, source: PluginSource) -> bool:
        """Add ``record`` under ``name``. If another plugin has the name, it is a conflict:
        the first-party distribution that owns the name (see :mod:`passhost._catalog`) keeps
        it and the others are excluded; with no owner among them, nobody gets it.

        :returns: whether ``record`` is the one registered under ``name``
        """
        key = (kind, name)
        claimants = self._conflict_records.get(key)
        if claimants is None:
            if name not in table:
                table[name] = record
                return True
            claimants = self._conflict_records[key] = [table[name]]
        claimants.append(record)
        kept = next((r for r in claimants if _catalog.owns(kind, name, r.source.distribution)), None)
        conflict = Conflict(kind, name, tuple(r.source for r in claimants), kept.source if kept else None)
        self._conflicts[key] = conflict
        if self.strict:
            raise PluginConflict(conflict.message)
        if kept is not None:
            table[name] = kept
        else:
            table.pop(name, None)
        return kept is record

    # -- queries ------------------------------------------------------------------------
    @property
    def conflicts(self) -> list:
        """Every :class:`Conflict`, sorted by kind and name."""
        return [self._conflicts[k] for k in sorted(self._conflicts)]

    def conflict_is_default(self, name: str) -> bool:
        """Whether any of the clashing records of pass ``name`` joins the default pipeline."""
        return any(r.entry.default for r in self._conflict_records.get(("pass", name), ()))

    def unresolved_conflicts(self) -> list:
        """The conflicts that left their name unusable (no first-party owner among them)."""
        return [c for c in self.conflicts if c.kept is None]

    def pass_names(self) -> list:
        return sorted(self._passes)

    def instrument_names(self) -> list:
        return sorted(self._instruments)

    def pass_records(self) -> list:
        return [self._passes[n] for n in sorted(self._passes)]

    def instrument_records(self) -> list:
        return [self._instruments[n] for n in sorted(self._instruments)]

    def format_records(self) -> list:
        """Every usable format, the built-in ``text`` first, then by name."""
        return [_TEXT_RECORD] + [self._formats[n] for n in sorted(self._formats)]

    def converter_records(self, format: Optional[str] = None) -> list:
        """The registered converters (of ``format`` only, if given), by key."""
        return [self._converters[k] for k in sorted(self._converters)
                if format is None or self._converters[k].entry.format == format]

    def format_record(self, name: str) -> FormatRecord:
        """The record of format ``name``.

        :raises FormatError: naming the installed formats, or the distribution to install
        :raises PluginConflict: if two plugins register ``name``
        """
        if name == TEXT_FORMAT.name:
            return _TEXT_RECORD
        try:
            return self._formats[name]
        except (KeyError, TypeError):
            pass
        conflict = self._conflicts.get(("format", name))
        if conflict is not None:
            raise PluginConflict(conflict.message)
        dist = _catalog.FORMATS.get(name)
        if dist is not None:
            raise FormatError(self._why_missing("format", name, dist))
        raise FormatError(f"unknown format {name!r}; installed formats: {self.describe_formats()}")

    def format_for_suffix(self, suffix: str) -> Optional[FormatRecord]:
        """The format whose suffixes hold ``suffix`` (lower-cased), or ``None``.

        :raises PluginConflict: if two formats claim the suffix
        """
        suffix = suffix.lower()
        found = [r for r in self.format_records() if suffix in r.suffixes]
        if len(found) > 1:
            raise PluginConflict(
                f"suffix {suffix!r} is claimed by {len(found)} formats: "
                + " and ".join(f"{r.name!r} ({r.source.describe()})" for r in found)
                + "; choose one with --from/--to (format=...) or uninstall one of them")
        return found[0] if found else None

    def describe_formats(self) -> str:
        """``text (.txt, .relay), onnx (.onnx)``: for messages."""
        return ", ".join(f"{r.name} ({', '.join(r.suffixes)})" for r in self.format_records())

    def config_records(self) -> list:
        return [self._configs[k] for k in sorted(self._configs)]

    def executor_records(self) -> list:
        """Every usable executor, the built-in ``local`` first, then by name."""
        return [_LOCAL_RECORD] + [self._executors[n] for n in sorted(self._executors)]

    def executor_record(self, name: str) -> "ExecutorRecord":
        """The record of executor ``name``.

        :raises UsageError: naming the installed executors, or the distribution to install
        :raises PluginConflict: if two plugins register ``name``
        """
        if name == LOCAL_EXECUTOR.name:
            return _LOCAL_RECORD
        try:
            return self._executors[name]
        except (KeyError, TypeError):
            pass
        conflict = self._conflicts.get(("executor", name))
        if conflict is not None:
            raise PluginConflict(conflict.message)
        dist = _catalog.distribution_for("executor", name)
        if dist is not None:
            raise UsageError(self._why_missing("executor", name, dist))
        installed = ", ".join(r.name for r in self.executor_records())
        raise UsageError(f"unknown executor {name!r}; installed executors: {installed}")

    def pass_record(self, name: str) -> PassRecord:
        """The record of pass ``name``.

        :raises PassNotFound: with close names or the distribution to install
        :raises PluginConflict: if two plugins register ``name``
        """
        try:
            return self._passes[name]
        except (KeyError, TypeError):
            raise self._not_found("pass", name) from None

    def instrument_record(self, name: str) -> InstrumentRecord:
        """The record of instrument ``name`` (errors as :meth:`pass_record`)."""
        try:
            return self._instruments[name]
        except (KeyError, TypeError):
            raise self._not_found("instrument", name) from None

    def build_pass(self, name: str, **options: Any) -> Any:
        """Build pass ``name`` with ``options``."""
        return self.pass_record(name).build(**options)

    def build_instrument(self, name: str, **options: Any) -> Any:
        """Build instrument ``name`` with ``options``."""
        return self.instrument_record(name).build(**options)

    def _not_found(self, kind: str, name: Any) -> PasshostError:
        if not isinstance(name, str):
            return PipelineError(f"{kind} names are strings, got {name!r}")
        conflict = self._conflicts.get((kind, name))
        if conflict is not None:
            return PluginConflict(conflict.message)
        error = PassNotFound if kind == "pass" else InstrumentNotFound
        dist = _catalog.distribution_for(kind, name)
        if dist is not None:
            return error(self._why_missing(kind, name, dist))
        table = self._passes if kind == "pass" else self._instruments
        folded = {n.lower(): n for n in table}
        close = difflib.get_close_matches(name, list(table), n=3, cutoff=0.6)
        if name.lower() in folded and folded[name.lower()] not in close:
            close.insert(0, folded[name.lower()])
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        tail = "" if close else "; run `passhost list` to see the installed ones"
        broken = f" ({len(self.broken)} plugin(s) failed to load, see `passhost list`)" if self.broken else ""
        return error(f"unknown {kind} {name!r}{hint}{tail}{broken}")

    def _why_missing(self, kind: str, name: str, dist: str) -> str:
        head = f"{kind} {name!r} is not available"
        for source in self.disabled:
            if _catalog.owns(kind, name, source.distribution):
                return (f"{head}: its plugin {source.name!r} ({dist}) is disabled by "
                        f"{DISABLE_PLUGINS_ENV}; remove {source.name!r} from it")
        for broken in self.broken:
            if _catalog.owns(kind, name, broken.distribution):
                return f"{head}: {broken.message}"
        if not self.autoload:
            return f"{head}: plugin loading is disabled by {DISABLE_AUTOLOAD_ENV}; unset it"
        return (f"{kind} {name!r} is not installed; it is provided by the distribution {dist!r} "
                f"(pip install {dist})")


def _host_version() -> str:
    try:
        return metadata.version("passhost")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0.0.0+unknown"


#: the host's own text format, always available
TEXT_FORMAT = FormatEntry("text", (".txt", ".relay"), load=load_text, save=save_text,
                          summary="passhost's text format (TVM Relay's): def @main(%x: Tensor[...]) { ... }")
_TEXT_RECORD = FormatRecord(TEXT_FORMAT, PluginSource("passhost", "passhost", _host_version()))


@dataclass(frozen=True)
class ExecutorRecord:
    """One registered executor (:class:`~passhost.hookspecs.ExecutorEntry` plus its plugin)."""

    entry: ExecutorEntry
    source: PluginSource

    kind = "executor"

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def summary(self) -> str:
        return self.entry.summary or _first_doc_line(self.entry.factory)

    def as_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, **self.source.as_dict(), "summary": self.summary}


def _local_executor(address: Optional[str] = None, **options: Any) -> Any:
    from .cli.batch import LocalExecutor  # the CLI's module: loaded only when a batch runs

    return LocalExecutor(address, **options)


#: the host's own executor, always available: a pool of processes on this machine (``-j N``)
LOCAL_EXECUTOR = ExecutorEntry("local", _local_executor,
                               summary="a pool of -j N processes on this machine (N=1: in this process)")
_LOCAL_RECORD = ExecutorRecord(LOCAL_EXECUTOR, PluginSource("passhost", "passhost", _host_version()))


def _existing_op(name: str) -> Optional[Op]:
    try:
        return Op.get(name)
    except IRError:
        return None


def _record_name(cls: type) -> str:
    return "OpEntry" if cls is OpEntry else cls.__name__


# -- the process-wide registry -------------------------------------------------------
_lock = threading.RLock()
_current: Optional[Registry] = None
_building = False


def get_registry() -> Registry:
    """The registry of this process, built from the installed entry points on first use.

    :raises PluginLoadError: when called while the registry is being built (a plugin
        that uses ``passhost.passes`` & co. at import time; that plugin is then broken)
    """
    global _current, _building
    reg = _current
    if reg is None:
        with _lock:
            if _current is None:
                if _building:
                    raise PluginLoadError(
                        "a plugin used the plugin registry (passhost.passes, passhost.pipeline, ...) "
                        "while plugins were loading; look passes up inside the pass, not at import time")
                _building = True
                try:
                    _current = Registry()
                finally:
                    _building = False
            reg = _current
    return reg


def reset_registry() -> None:
    """Forget the cached registry; the next :func:`get_registry` reloads the entry points."""
    global _current
    with _lock:
        _current = None


@contextlib.contextmanager
def use_registry(registry: Optional[Registry]) -> Iterator[Optional[Registry]]:
    """Make ``registry`` the process-wide registry inside a ``with`` block (tests);
    ``None`` makes the next :func:`get_registry` load the entry points afresh."""
    global _current
    with _lock:
        previous, _current = _current, registry
    try:
        yield registry
    finally:
        with _lock:
            _current = previous


def _resolve_pass(name: str) -> Any:
    """The pass resolver :mod:`passhost.transform` uses for ``required`` names."""
    return get_registry().build_pass(name)


def _load_configs() -> None:
    """Called by :mod:`passhost.transform` before it rejects an unknown config key."""
    if not _building:
        get_registry()


transform.set_pass_resolver(_resolve_pass)
transform.set_config_loader(_load_configs)
