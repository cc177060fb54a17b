"""What the ``passhost`` sub-commands share: exit codes, the usage error, reading the
input module, binding parameters, ``--config`` values and writing output files."""
from __future__ import annotations

import argparse
import ast
import os
import re
import shutil
import sys
from enum import IntEnum
from typing import Any, Optional, Sequence

from .. import ir
from ..errors import ParseError, PluginConflict, PluginLoadError, UsageError
from ..io import output_stream, write_text_atomic

__all__ = ["EXAMPLES", "ExitCode", "CommandError", "ArgumentParser", "registry", "one_line", "dash",
           "example", "load_input", "load_options", "parse_input_shapes", "parse_bind_dims", "bind_params", "parse_config", "write_atomic",
           "pass_names", "printable", "print_table", "shorten", "stdout", "MAX_MESSAGE", "opt_level", "OPT_LEVELS",
           "out_of_memory"]

#: the longest one-line message printed whole; longer ones (echoing a huge ``-p`` text,
#: say) keep their start and end, and say how much was cut
MAX_MESSAGE = 600
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


#: the -O values passhost accepts: TVM's pass opt_levels run from 0 to 4
OPT_LEVELS = range(0, 5)


def opt_level(text: str) -> int:
    """``-O N`` as an int from 0 to 4 (argparse ``type``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 4, got {text!r}") from None
    if value not in OPT_LEVELS:
        raise argparse.ArgumentTypeError(f"-O takes 0 to 4 (TVM's opt_levels; 3 runs every first-party "
                                         f"pass), got {value}")
    return value


def stdout():
    """Where the sub-commands print their results: the real standard output (plugin code
    that prints while a command runs goes to stderr; see :func:`passhost.io.plugin_output_to_stderr`)."""
    return output_stream()


def printable(text: Any) -> str:
    """``text`` with control characters (an ANSI escape, a carriage return) escaped as
    ``\\x1b``: names and summaries from plugins are untrusted text."""
    text = str(text)
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text) if _CONTROL.search(text) else text


def shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut in the middle to about ``limit`` characters, saying how many were cut."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[-(limit // 3):]
    return f"{head} ... [{len(text) - len(head) - len(tail):,} characters cut] ... {tail}"

#: the built-in workloads ``--example`` accepts
EXAMPLES = ("tutorial", "resnet18", "resnet50")


class ExitCode(IntEnum):
    """Exit status of the ``passhost`` command."""

    OK = 0
    PASS_FAILED = 1
    USAGE_ERROR = 2


class CommandError(UsageError):
    """Bad command-line usage or unreadable input (exit 2)."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with its usage errors raised as :class:`CommandError` (one line, exit 2)
    instead of printed by argparse itself."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CommandError(f"{message} (see `{self.prog} --help`)")


def registry(args: argparse.Namespace, announce: bool = True) -> Any:
    """The plugin registry; with ``--strict-plugins`` a broken or clashing plugin is an error.

    :param announce: warn, one line each, of every broken plugin and name clash (``list``
        and ``info`` show them in their output instead)
    """
    import warnings

    from ..registry import get_registry

    reg = get_registry()
    if getattr(args, "strict_plugins", False):
        if reg.broken:
            raise PluginLoadError(reg.broken[0].message + " (--strict-plugins)")
        if reg.conflicts:
            raise PluginConflict(reg.conflicts[0].message + " (--strict-plugins)")
    if announce:
        for broken in reg.broken:
            warnings.warn(f"{broken.message} (left out; see `passhost list`)", UserWarning, stacklevel=2)
        for conflict in reg.conflicts:
            warnings.warn(conflict.message, UserWarning, stacklevel=2)
    return reg


def one_line(err: BaseException) -> str:
    """The error as one line (a parse error as ``file:line:col: error: message``), control
    characters escaped and cut to :data:`MAX_MESSAGE` characters."""
    if isinstance(err, ParseError) and err.line:
        text = f"{err.source_name}:{err.line}:{err.column}: error: {' '.join(str(err.message).split())}"
    else:
        text = " ".join(str(err).split())
    return shorten(printable(text)) if text else type(err).__name__


def out_of_memory(err: MemoryError, where: str = "") -> str:
    """The message for a :class:`MemoryError` the input caused (exit 2: a shape, an attribute
    or a constant of the input asks for more memory than there is), naming the size asked
    for when numpy says it::

        out of memory in pass 'FuseLayerNorm': the input asks for an array of shape
        (2000000000,) and dtype float32 (7.45 GiB), more than this machine can allocate; ...
    """
    shape, dtype, size = getattr(err, "shape", None), getattr(err, "dtype", None), getattr(err, "_total_size", None)
    if shape is not None and dtype is not None:
        asked = f"an array of shape {tuple(shape)} and dtype {dtype}"
        if isinstance(size, int):
            asked += f" ({_byte_size(size)})"
    elif str(err):
        asked = f"more memory than there is ({one_line(err)})"
    else:
        asked = "more memory than there is (the size asked for was not reported)"
    return (f"out of memory{where}: the input asks for {asked}, more than this machine can allocate; "
            "check the shapes, attributes and constants of the input")


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def byte_size(text: str) -> int:
    """A size in bytes from ``4096``, ``64K``, ``256M``, ``1.5G`` (``KB``/``KiB`` spellings
    too; every unit a power of 1024), for argparse."""
    import re

    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", text)
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size: give bytes, or a number with K, M or G "
                                         "(e.g. 1K, 256M)")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def _byte_size(n: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n} bytes" if unit == "bytes" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n} bytes"  # pragma: no cover


def print_table(rows: list) -> None:
    """Columns padded to their widest cell; the last column is cut to the terminal's width
    when standard output is a terminal (a pipe or file gets it whole)."""
    rows = [tuple(printable(cell) for cell in row) for row in rows]  # plugin metadata is untrusted text
    n = len(rows[0]) - 1
    widths = [max(len(row[i]) for row in rows) for i in range(n)]
    out = stdout()
    room = None
    if getattr(out, "isatty", lambda: False)():
        room = shutil.get_terminal_size().columns - sum(widths) - 2 * n
    for row in rows:
        last = row[n]
        if room is not None and len(last) > max(room, 10):
            last = last[:max(room, 10) - 3] + "..."
        print(("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + last).rstrip(), file=out)


def dash(value: Any) -> str:
    """``-`` for an empty table cell."""
    return "-" if value in (None, "", ()) else str(value)


def example(name: str) -> ir.IRModule:
    """The built-in workload ``name`` (one of :data:`EXAMPLES`), parameters bound."""
    from .. import testing

    if name == "tutorial":
        return ir.IRModule.from_expr(testing.example())
    mod, params = testing.resnet(int(name[len("resnet"):]))
    out = mod.copy()
    out["main"] = ir.bind_params_by_name(mod["main"], params)
    return out


def load_input(path: str, fmt: Optional[str] = None, input_shapes: Optional[dict] = None,
               options: Optional[dict] = None) -> ir.IRModule:
    """Read the module in ``path`` (``-``: text on stdin) in the format its suffix or
    ``fmt`` (``--from``) names; ``options`` go to the format's reader (``--keep-op``)."""
    if path == "-":
        if fmt not in (None, "text"):
            raise CommandError(f"stdin ('-') holds a text-format module; --from {fmt} needs a file")
        try:
            text = sys.stdin.read()
        except (OSError, UnicodeDecodeError) as err:
            raise CommandError(f"cannot read stdin: {getattr(err, 'strerror', None) or err}") from None
        if not text.strip():
            raise CommandError("stdin is empty: give INPUT or --example, or pipe a text-format module into it")
        return ir.parse(text, source_name="<stdin>")
    if not os.path.exists(path):
        raise CommandError(f"cannot read INPUT {path!r}: No such file or directory")
    if os.path.isdir(path):
        raise CommandError(f"cannot read INPUT {path!r}: it is a directory")
    return ir.load(path, format=fmt, input_shapes=input_shapes, **(options or {}))


def comma_names(items: Sequence[str]) -> list:
    """The names in repeatable comma-list options (``--keep-op LSTM,GRU --keep-op RNN``),
    blanks skipped, each once, in order of first mention."""
    names: list = []
    for item in items:
        for name in (n.strip() for n in str(item).split(",")):
            if name and name not in names:
                names.append(name)
    return names


def load_options(keep_op: Sequence[str], bind_dim: Sequence[str] = (), inline_functions: bool = False) -> dict:
    """``--keep-op`` values (repeatable, each a comma list), ``--bind-dim NAME=VALUE``
    (repeatable) and ``--inline-functions`` as the reader's options."""
    names = comma_names(keep_op)
    options: dict = {"keep_ops": tuple(names)} if names else {}
    bindings = parse_bind_dims(bind_dim)
    if bindings:
        options["bind_dims"] = bindings
    if inline_functions:
        options["inline_functions"] = True
    return options


def parse_bind_dims(items: Sequence[str]) -> dict:
    """``--bind-dim batch=1`` (repeatable) as ``{"batch": 1}``."""
    out: dict = {}
    for item in items:
        name, eq, value = item.rpartition("=")
        try:
            if not eq or not name.strip():
                raise ValueError
            size = int(value)
            if size < 0:
                raise ValueError
        except ValueError:
            raise CommandError(f"--bind-dim {item!r}: expected NAME=VALUE with a non-negative integer, "
                               "e.g. --bind-dim batch=1") from None
        if name in out and out[name] != size:
            raise CommandError(f"--bind-dim gives {name!r} twice")
        out[name.strip()] = size
    return out


def pass_names(reg: Any, items: Sequence[str], flag: str, installed: bool) -> list:
    """``--disable``/``--require`` values (repeatable, each a comma list) as pass names, each
    checked: an unknown name is a usage error with the registry's "did you mean" (a
    first-party pass that is not installed is accepted by ``--disable``, which then has
    nothing to do, and refused by ``--require``, which names what to install)."""
    from ..errors import PassNotFound, PluginConflict
    from .. import _catalog

    names = comma_names(items)
    for name in names:
        try:
            reg.pass_record(name)
        except PluginConflict:
            pass
        except PassNotFound as err:
            if installed or _catalog.distribution_for("pass", name) is None:
                raise CommandError(f"{flag} {name}: {one_line(err)}") from None
    return names


def parse_input_shapes(items: Sequence[str]) -> dict:
    """``--input-shape NAME=1,3,224,224`` (repeatable) as ``{NAME: (1, 3, 224, 224)}``."""
    shapes: dict = {}
    for item in items:
        name, eq, dims = item.rpartition("=")
        try:
            if not eq or not name:
                raise ValueError
            shape = tuple(int(d) for d in dims.split(",")) if dims.strip() else ()
            if any(d < 0 for d in shape):
                raise ValueError
        except ValueError:
            raise CommandError(f"--input-shape {item!r}: expected NAME=D1,D2,... with non-negative integers, "
                               "e.g. --input-shape data=1,3,224,224") from None
        if name in shapes:
            raise CommandError(f"--input-shape gives {name!r} twice")
        shapes[name] = shape
    return shapes


def bind_params(mod: ir.IRModule, path: str) -> ir.IRModule:
    """``mod`` with the arrays of the ``.npz`` at ``path`` bound to ``@main``'s parameters by name."""
    from ..numerics import load_npz

    params = load_npz(path, "--params", CommandError)
    if "main" not in {gv.name_hint for gv in mod.functions}:
        raise CommandError("--params binds parameters of @main, but the module has no @main")
    known = {p.name_hint for p in mod["main"].params}
    unknown = sorted(set(params) - known)
    if unknown:
        raise CommandError(f"--params {path!r}: @main has no parameter named {', '.join(unknown)} "
                           f"(its parameters: {', '.join(sorted(known)) or 'none'})")
    out = mod.copy()
    out["main"] = ir.bind_params_by_name(mod["main"], params)
    return out


def parse_config(items: Sequence[str]) -> dict:
    """``--config KEY=VALUE`` items as a dict; VALUE is a Python literal, or else a string."""
    config = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--config needs KEY=VALUE, got {item!r}")
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            value = text
        config[key.strip()] = value
    return config


def write_atomic(path: str, text: str) -> None:
    """:func:`passhost.io.write_text_atomic`, with a failure as a :class:`CommandError`."""
    try:
        write_text_atomic(path, text)
    except OSError as err:
        raise CommandError(f"cannot write {path!r}: {err.strerror or err}") from None
