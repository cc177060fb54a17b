"""Exceptions raised by passhost.

Every error is a :class:`PasshostError`; the CLI prints ``str(err)`` as one line
and exits 1 (a pass failed) or 2 (bad usage or input).
"""
from __future__ import annotations

__all__ = [
    "PasshostError",
    "IRError",
    "TypeInferenceError",
    "ParseError",
    "EvaluationError",
    "WellFormedError",
    "PassError",
    "PassNotFound",
    "InstrumentNotFound",
    "PluginConflict",
    "PluginLoadError",
    "ConfigError",
    "PassAttributeNotFound",
    "SourceTypeError",
    "PipelineError",
    "OptionError",
    "UsageError",
    "FormatError",
]


class PasshostError(Exception):
    """Base class of every error passhost raises on purpose."""

    #: exit status the CLI uses for this error (2: bad usage or input)
    exit_code = 2


class IRError(PasshostError):
    """Malformed IR, or an IR API used wrongly."""


class TypeInferenceError(IRError):
    """Type inference failed (shape or dtype mismatch, unknown type)."""


class WellFormedError(IRError):
    """:func:`passhost.ir.well_formed` found a malformed module."""


class EvaluationError(IRError):
    """The reference interpreter could not run the program (e.g. bad arguments)."""


class ParseError(IRError):
    """Malformed text-format input.

    :ivar line: 1-based line of the offending text
    :ivar column: 1-based column
    :ivar source_line: the text of that line
    """

    def __init__(self, message: str, line: int = 0, column: int = 0, source_line: str = "",
                 source_name: str = "<string>") -> None:
        self.message = message
        self.line = line
        self.column = column
        self.source_line = source_line
        self.source_name = source_name
        super().__init__(self._render())

    def _render(self) -> str:
        if not self.line:
            return self.message
        head = f"{self.source_name}:{self.line}:{self.column}: error: {self.message}"
        caret = " " * max(self.column - 1, 0) + "^"
        return f"{head}\n{self.source_line}\n{caret}"


class SourceTypeError(TypeInferenceError, ParseError):
    """A type error in parsed text: a :class:`TypeInferenceError` that also carries the
    :class:`ParseError` location (``line``, ``column``, ``source_name``) of the expression
    that failed, so it prints as ``file:line:col: error: ...``."""


class PassError(PasshostError):
    """A pass raised while running; names the pass."""

    exit_code = 1

    def __init__(self, message: str, pass_name: str = "") -> None:
        self.pass_name = pass_name
        super().__init__(message)


class PassNotFound(PasshostError, LookupError):
    """No installed plugin provides the requested pass."""


class PassAttributeNotFound(PassNotFound, AttributeError):
    """``passhost.passes.Nope``: a :class:`PassNotFound` that is also an ``AttributeError``,
    so ``hasattr``, ``getattr(..., default)``, ``inspect`` and IDEs treat the missing name
    as a missing attribute."""


class InstrumentNotFound(PasshostError, LookupError):
    """No installed plugin provides the requested instrument."""


class PluginConflict(PasshostError):
    """Two plugins register the same name."""


class PluginLoadError(PasshostError):
    """A plugin failed to load (raised only in strict mode)."""


class ConfigError(PasshostError, AttributeError):
    """Unknown or badly typed PassContext config option."""


class UsageError(PasshostError):
    """Bad command-line usage or unreadable input (exit 2): a missing file, a bad
    option value, an ``.npz`` without the arrays asked for."""


class PipelineError(PasshostError, ValueError):
    """A pipeline text could not be parsed or assembled."""


class OptionError(PipelineError, TypeError):
    """A pass or instrument option that is unknown, of the wrong type, or missing (exit 2).

    Raised before anything runs; the message lists the valid options with their types.
    """


class FormatError(PasshostError):
    """A model file no installed format reads or writes, or a malformed model (exit 2)."""
