"""Choosing a model file format: by ``format=`` name, else by suffix, else by content.

:func:`passhost.ir.load` and :func:`passhost.ir.save` land here (this module installs
itself as their dispatcher), and so do ``passhost run``'s ``--from``/``--to``. Formats
are the built-in ``text`` and whatever plugins register with ``passhost_register_formats``.

Reading a file whose suffix no installed format claims falls back to the text format
when the file is UTF-8 text (so ``passhost run module`` keeps working without a
suffix); anything else is a :class:`~passhost.errors.FormatError` naming the installed
formats -- and, for a suffix a first-party plugin reads (``.onnx``), the distribution
to install. Writing to an unclaimed suffix writes text, unless a first-party plugin
owns that suffix.
"""
from __future__ import annotations

import inspect
import os
from typing import Any, Mapping, Optional

from . import _catalog
from ._records import FormatRecord
from .errors import FormatError, PasshostError, UsageError
from .ir import IRModule
from .ir.serialize import set_dispatcher
from .registry import get_registry

__all__ = ["load", "save", "format_for", "suffix_of", "converters"]

_SNIFF_BYTES = 4096


def converters(format: str) -> list:
    """The operator converters plugins registered for ``format``'s importer, as their
    :class:`~passhost.hookspecs.ConverterEntry` records, by key: what a format plugin asks
    for each time it imports a model (see ``passhost_register_converters``)."""
    return [record.entry for record in get_registry().converter_records(format)]


def suffix_of(path: str) -> str:
    """The lower-cased suffix of ``path`` (``""`` without one)."""
    return os.path.splitext(path)[1].lower()


def _looks_like_text(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
    except OSError:
        return True  # let the text loader report the OS error
    if b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        return err.start >= len(head) - 3  # a character cut by the sniff window
    return True


def format_for(path: str, format: Optional[str], mode: str) -> FormatRecord:
    """The format that reads (``mode="load"``) or writes (``"save"``) ``path``.

    :raises FormatError: no installed format does; the message names the installed
        formats and, when a first-party plugin would, the distribution to install
    """
    reg = get_registry()
    verb = "reads" if mode == "load" else "writes"
    if format is not None:
        record = reg.format_record(format)
    else:
        suffix = suffix_of(path)
        record = reg.format_for_suffix(suffix) if suffix else None
        if record is None:
            owner = _catalog.SUFFIXES.get(suffix)
            if owner is not None:
                dist = _catalog.FORMATS[owner]
                raise FormatError(
                    f"{path!r}: no installed format {verb} {suffix!r} files; the {owner!r} format is "
                    f"provided by the distribution {dist!r} (pip install {dist}); installed formats: "
                    f"{reg.describe_formats()}")
            if mode == "save" or _looks_like_text(path):
                record = reg.format_record("text")
            else:
                what = f"its suffix {suffix!r}" if suffix else "it has no suffix, and it"
                raise FormatError(
                    f"cannot read {path!r}: it is not a text-format module and {what} names no installed "
                    f"format; installed formats: {reg.describe_formats()} (name one with --from/format=)")
    if getattr(record.entry, mode) is None:
        raise FormatError(f"format {record.name!r} ({record.source.requirement}) cannot "
                          f"{'read' if mode == 'load' else 'write'} files; formats that can: "
                          + ", ".join(r.name for r in reg.format_records() if getattr(r.entry, mode)))
    return record


def _plugin_failed(record: FormatRecord, what: str, path: str, err: Exception) -> PasshostError:
    detail = " ".join(str(err).split()) or type(err).__name__
    return FormatError(f"format {record.name!r} ({record.source.requirement}) failed to {what} "
                       f"{path!r}: {type(err).__name__}: {detail}")


def _check_options(record: FormatRecord, fn: Any, options: Mapping, what: str) -> None:
    """Each of ``options`` must be a keyword ``fn`` takes (or ``fn`` takes ``**kwargs``)."""
    if not options:
        return
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin or C callable: let it decide
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    takes = [n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD) and n != "path"]
    unknown = sorted(set(options) - set(takes))
    if unknown:
        raise UsageError(f"format {record.name!r} ({record.source.requirement}) takes no {what} option "
                         f"{', '.join(repr(u) for u in unknown)}; its options: {', '.join(takes) or 'none'}")


def load(path: str, *, format: Optional[str] = None, input_shapes: Optional[Mapping] = None,
         keep_params: bool = False, **options: Any) -> Any:
    """:func:`passhost.ir.load`."""
    record = format_for(path, format, "load")
    kwargs: dict = {"keep_params": keep_params}
    if input_shapes:
        kwargs["input_shapes"] = dict(input_shapes)
    _check_options(record, record.entry.load, options, "read")
    kwargs.update(options)
    try:
        out = record.entry.load(path, **kwargs)
    except PasshostError:
        raise
    except Exception as err:  # a plugin's bug: one line naming the format and the file
        raise _plugin_failed(record, "read", path, err) from err
    mod = out[0] if keep_params and isinstance(out, tuple) else out
    if not isinstance(mod, IRModule):
        raise FormatError(f"format {record.name!r} ({record.source.requirement}) returned "
                          f"{type(mod).__name__}, not an IRModule, for {path!r}")
    return out


def save(mod: IRModule, path: str, *, format: Optional[str] = None, **options: Any) -> Any:
    """:func:`passhost.ir.save` (what the format's writer returns: notes, or ``None``)."""
    if not isinstance(mod, IRModule):
        raise FormatError(f"ir.save writes an IRModule, got {type(mod).__name__}")
    record = format_for(path, format, "save")
    try:
        return record.entry.save(mod, path, **options)
    except PasshostError:
        raise
    except TypeError as err:
        if "unexpected keyword" in str(err):
            raise FormatError(f"format {record.name!r} takes no option {str(err).rsplit(' ', 1)[-1]}") from None
        raise _plugin_failed(record, "write", path, err) from err
    except Exception as err:
        raise _plugin_failed(record, "write", path, err) from err


set_dispatcher(load, save)
