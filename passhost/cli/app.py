"""The ``passhost`` command's parser and entry point: it assembles the sub-commands
(:mod:`.listing`, :mod:`.run`, :mod:`.bisect`) and turns every error into one line on
stderr with the exit status of :class:`~passhost.cli.common.ExitCode`."""
from __future__ import annotations

import argparse
import errno
import os
import sys
import warnings
from typing import Optional, Sequence

from ..errors import PasshostError
from ..io import output_stream, plugin_output_to_stderr
from . import bisect, check_rules, completion, explain, listing, run
from .common import ArgumentParser, CommandError, ExitCode, one_line, out_of_memory, printable, shorten

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``passhost`` (also used to render docs/cli.md)."""
    parser = ArgumentParser(prog="passhost", description="Relay-style graph passes, every pass a plugin.")
    parser.add_argument("--strict-plugins", action="store_true",
                        help="fail when any plugin is broken or two plugins clash, instead of listing them")
    parser.add_argument("--traceback", action="store_true", help="show the Python traceback of an error")
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="print passhost's version and the installed plugins' versions, and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    listing.add_parsers(sub)
    run.add_parser(sub)
    bisect.add_parser(sub)
    explain.add_parser(sub)
    check_rules.add_parser(sub)
    completion.add_parser(sub)
    return parser


class _VersionAction(argparse.Action):
    """``passhost --version``: the host's version, then one line per installed plugin
    distribution with its version and what it registers (as ``pip list`` and ``llm
    plugins`` show them), then any broken plugin."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from ..io import plugin_output_to_stderr
        from ..registry import get_registry
        from .common import printable

        lines = [f"passhost {_version()}"]
        with plugin_output_to_stderr():
            reg = get_registry()
        provided: dict = {}
        for record in (*reg.pass_records(), *reg.instrument_records(), *reg.format_records()[1:]):
            if record.source.distribution:
                key = (record.source.distribution, record.source.version)
                provided.setdefault(key, []).append(record.name)
        for (dist, version), names in sorted(provided.items()):
            lines.append(printable(f"  {dist} {version}: {', '.join(names)}"))
        for broken in reg.broken:
            lines.append(printable(f"  {broken.source.requirement}: broken ({broken.error})"))
        print("\n".join(lines))
        parser.exit()


def _version() -> str:
    import passhost

    return passhost.__version__


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """Warnings (e.g. an ONNX input dimension bound to 1) as one ``passhost: warning:`` line."""
    text = shorten(printable(" ".join(str(message).split())))
    print(f"passhost: warning: {text}", file=sys.stderr if file is None else file)


_COLOURS = {"passhost: error:": "\x1b[1;31m", "passhost: warning:": "\x1b[1;35m", "passhost: note:": "\x1b[1;36m"}


class _ColouredStderr:
    """stderr with passhost's ``error:``/``warning:``/``note:`` labels in colour (bold
    red, magenta, cyan, as clang colours them); everything else passes through."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if text.startswith("passhost: "):
            for label, code in _COLOURS.items():
                if text.startswith(label):
                    text = code + label + "\x1b[0m" + text[len(label):]
                    break
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def _use_colour(stream) -> bool:
    """Colours only on a terminal, never with ``NO_COLOR`` set (no-color.org) or TERM=dumb."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``passhost`` command; returns the exit status."""
    if _use_colour(sys.stderr) and not isinstance(sys.stderr, _ColouredStderr):
        plain = sys.stderr
        sys.stderr = _ColouredStderr(plain)
        try:
            return main(argv)
        finally:
            sys.stderr = plain
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        warnings.simplefilter("default", UserWarning)  # printed, once per place, never raised
        return _main(argv)


def _main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    traceback = argv is not None and "--traceback" in argv or argv is None and "--traceback" in sys.argv
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            raise CommandError("choose a command: list, info, run, bisect, explain, check-rules or completion "
                               "(see `passhost --help`)")
        with plugin_output_to_stderr():  # what plugin code prints cannot corrupt our stdout
            code = int(args.func(args))
            output_stream().flush()
        return code
    except PasshostError as err:
        if traceback:
            raise
        print(f"passhost: error: {one_line(err)}", file=sys.stderr)
        return int(err.exit_code)
    except BrokenPipeError:
        # the reader went away (e.g. `passhost list | head`); exit quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return ExitCode.PASS_FAILED
    except KeyboardInterrupt:
        print("passhost: interrupted", file=sys.stderr)
        return 130
    except OSError as err:
        if traceback or getattr(err, "filename", None) or err.errno not in _OUTPUT_ERRNOS:
            if traceback:
                raise
            return _internal(err)
        # standard output is a full or broken device (`passhost run m.txt > /dev/full`)
        print(f"passhost: error: cannot write output: {err.strerror or err}", file=sys.stderr)
        return ExitCode.PASS_FAILED
    except MemoryError as err:  # reading or writing a module of a size no machine holds
        if traceback:
            raise
        print(f"passhost: error: {out_of_memory(err)}", file=sys.stderr)
        return ExitCode.USAGE_ERROR
    except Exception as err:  # a bug in passhost or a plugin outside any pass
        if traceback:
            raise
        return _internal(err)


#: write errors of standard output itself (a full disk or device, an I/O error)
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG})


def _internal(err: BaseException) -> int:
    print(f"passhost: error: internal error {type(err).__name__}: {one_line(err)} "
          "(rerun with --traceback and report it)", file=sys.stderr)
    return ExitCode.PASS_FAILED
