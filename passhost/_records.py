"""What the registry knows about each plugin and each name it registered.

Plugins never build these: the registry attaches the entry point, distribution and
version of the plugin that yielded a :mod:`passhost.hookspecs` record.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .errors import OptionError, PipelineError
from .hookspecs import ConfigEntry, ConverterEntry, FormatEntry, InstrumentEntry, PassEntry
from .options import OptionSchema, schema_of

__all__ = ["PluginSource", "BrokenPlugin", "PassRecord", "InstrumentRecord", "ConfigRecord", "FormatRecord",
           "ConverterRecord", "Conflict"]


@dataclass(frozen=True)
class PluginSource:
    """Where a plugin came from.

    :ivar name: the entry-point name (or the name given to ``register_plugin``)
    :ivar distribution: the installed distribution, ``None`` for in-process plugins
    :ivar version: the distribution's version
    """

    name: str
    distribution: Optional[str] = None
    version: Optional[str] = None

    @property
    def requirement(self) -> str:
        """``dist==version`` as ``passhost list`` shows it."""
        if self.distribution is None:
            return f"{self.name} (in-process)"
        return f"{self.distribution}=={self.version}"

    def describe(self) -> str:
        """``passhost-fold-constant 0.1.0 (entry point 'fold-constant')``."""
        if self.distribution is None:
            return f"in-process plugin {self.name!r}"
        return f"{self.distribution} {self.version} (entry point {self.name!r})"

    def as_dict(self) -> dict:
        return {"plugin": self.name, "distribution": self.distribution, "version": self.version,
                "requirement": self.requirement}


@dataclass(frozen=True)
class BrokenPlugin:
    """A plugin that failed to load; listed by ``passhost list``, otherwise ignored.

    :ivar error: one line: the exception type and message
    """

    name: str
    distribution: Optional[str]
    version: Optional[str]
    error: str

    @property
    def source(self) -> PluginSource:
        return PluginSource(self.name, self.distribution, self.version)

    @property
    def message(self) -> str:
        return f"plugin {self.source.describe()} failed to load: {self.error}"

    def as_dict(self) -> dict:
        return {**self.source.as_dict(), "error": self.error}


def _options_text(options: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in options.items())


class _EntryRecord:
    """``name`` / ``distribution`` / ``version`` / ``options`` of a record holding ``entry`` and ``source``."""

    entry: Any
    source: PluginSource

    @property
    def name(self) -> str:
        return self.entry.name

    @property
    def distribution(self) -> Optional[str]:
        return self.source.distribution

    @property
    def version(self) -> Optional[str]:
        return self.source.version

    @property
    def options(self) -> OptionSchema:
        """The declared options (read from the factory's signature unless the entry declares them)."""
        schema = self.__dict__.get("_schema")
        if schema is None:
            schema = schema_of(self.entry.factory, self.entry.options)
            object.__setattr__(self, "_schema", schema)
        return schema

    def check_options(self, options: dict) -> None:
        """Raise :class:`~passhost.errors.OptionError` unless ``options`` fit the schema."""
        self.options.validate(f"{self.kind} {self.name!r} ({self.source.requirement})", options)


@dataclass(frozen=True)
class PassRecord(_EntryRecord):
    """One registered pass: the plugin's entry plus what the registry learnt about it.

    ``opt_level`` and ``required`` come from ``entry.factory().info``.
    """

    entry: PassEntry
    source: PluginSource
    opt_level: int
    required: tuple
    summary: str

    kind = "pass"

    @property
    def after(self) -> tuple:
        return self.entry.after

    @property
    def before(self) -> tuple:
        return self.entry.before

    def build(self, **options: Any) -> Any:
        """Call the factory with ``options``.

        :raises OptionError: if an option is unknown, of the wrong type or missing
        :raises PipelineError: if the factory rejects the options
        """
        self.check_options(options)
        try:
            built = self.entry.factory(**options)
        except OptionError:
            raise
        except Exception as err:
            if options:
                raise PipelineError(
                    f"pass {self.name!r} ({self.source.requirement}) rejected the options "
                    f"({_options_text(options)}): {type(err).__name__}: {err}") from err
            raise PipelineError(f"pass {self.name!r} ({self.source.requirement}) could not be built: its "
                                f"factory raised {type(err).__name__}: {err}") from err
        except BaseException as err:
            if isinstance(err, (KeyboardInterrupt, GeneratorExit)):
                raise
            raise PipelineError(f"pass {self.name!r} ({self.source.requirement}) could not be built: its factory "
                                f"raised {type(err).__name__}, which is not an Exception") from None
        from .transform import Pass

        info = getattr(built, "info", None)
        if not isinstance(built, Pass) or getattr(info, "name", None) != self.name:
            shown = repr(built)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            what = (f"a pass named {info.name!r}" if isinstance(built, Pass) else f"{shown}, not a passhost Pass")
            raise PipelineError(f"pass {self.name!r} ({self.source.requirement}) could not be built: its "
                                f"factory returned {what}")
        return built

    def prototype(self) -> Any:
        """The pass as its factory builds it without options -- what the registry read
        ``info`` from when the plugin loaded. Not option-checked: for reading a pass's
        info and rules, not for running it (a pass with a required option may refuse to run)."""
        return self.entry.factory()

    def as_dict(self) -> dict:
        return {
            "name": self.name, "kind": self.kind, "opt_level": self.opt_level,
            "required": list(self.required), **self.source.as_dict(), "summary": self.summary,
            "default": self.entry.default, "after": list(self.entry.after),
            "before": list(self.entry.before), "options": self.options.as_list(),
            "options_open": self.options.open,
        }


@dataclass(frozen=True)
class InstrumentRecord(_EntryRecord):
    """One registered pass instrument."""

    entry: InstrumentEntry
    source: PluginSource
    summary: str

    kind = "instrument"

    def build(self, **options: Any) -> Any:
        """Call the factory with ``options``.

        :raises OptionError: if an option is unknown, of the wrong type or missing
        :raises PipelineError: if the factory rejects the options
        """
        self.check_options(options)
        try:
            return self.entry.factory(**options)
        except OptionError:
            raise
        except Exception as err:
            raise PipelineError(
                f"instrument {self.name!r} ({self.source.requirement}) could not be built"
                f"{' with ' + _options_text(options) if options else ''}: {type(err).__name__}: {err}"
            ) from err

    def as_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, **self.source.as_dict(), "summary": self.summary,
                "options": self.options.as_list(), "options_open": self.options.open}


@dataclass(frozen=True)
class FormatRecord(_EntryRecord):
    """One registered model file format."""

    entry: FormatEntry
    source: PluginSource

    kind = "format"

    @property
    def suffixes(self) -> tuple:
        return self.entry.suffixes

    @property
    def summary(self) -> str:
        return self.entry.summary

    @property
    def modes(self) -> str:
        """``read``, ``write`` or ``read/write``."""
        return "/".join(m for m, f in (("read", self.entry.load), ("write", self.entry.save)) if f)

    def as_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "suffixes": list(self.suffixes), "modes": self.modes,
                **self.source.as_dict(), "summary": self.summary}


@dataclass(frozen=True)
class ConverterRecord:
    """One registered operator converter."""

    entry: ConverterEntry
    source: PluginSource

    kind = "converter"

    @property
    def name(self) -> str:
        return self.entry.key

    def as_dict(self) -> dict:
        e = self.entry
        return {"name": e.key, "kind": self.kind, "format": e.format, "domain": e.domain, "op_type": e.op_type,
                "since": e.since, **self.source.as_dict(), "summary": e.summary}


@dataclass(frozen=True)
class ConfigRecord:
    """One registered PassContext config option."""

    entry: ConfigEntry
    source: PluginSource

    @property
    def key(self) -> str:
        return self.entry.key

    def as_dict(self) -> dict:
        return {"key": self.key, "type": self.entry.type.__name__, "default": repr(self.entry.default),
                "doc": self.entry.doc, **self.source.as_dict()}


@dataclass(frozen=True)
class Conflict:
    """Two or more plugins registered the same name.

    When one of them is the first-party distribution that owns the name (``FoldConstant``
    is ``passhost-fold-constant``'s), it keeps the name (``kept``) and the others are
    excluded; otherwise the name is unusable until all but one are removed.
    """

    kind: str
    name: str
    sources: tuple
    kept: Optional[PluginSource] = None

    @property
    def excluded(self) -> tuple:
        """The sources whose record is not used."""
        return tuple(s for s in self.sources if s != self.kept)

    @property
    def message(self) -> str:
        if self.kept is not None:
            who = " and ".join(s.describe() for s in self.excluded)
            return (f"{self.kind} {self.name!r} from {who} is excluded: the name belongs to "
                    f"{self.kept.describe()}; the third-party {self.kind} must be renamed")
        who = " and ".join(f"by {s.describe()}" for s in self.sources)
        return (f"{self.kind} {self.name!r} is registered {len(self.sources)} times: {who}; "
                "uninstall (or disable with PASSHOST_DISABLE_PLUGINS) all but one of them")

    def as_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "plugins": [s.as_dict() for s in self.sources],
                "kept": self.kept.as_dict() if self.kept is not None else None,
                "excluded": [s.as_dict() for s in self.excluded], "error": self.message}
