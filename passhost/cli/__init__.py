"""The ``passhost`` command: list the installed plugins, describe one, run a pipeline,
bisect one.

Exit status (:class:`ExitCode`): 0 success, 1 a pass (or instrument) failed, 2 bad
usage or bad input. Every error is one line on stderr, never a traceback (pass
``--traceback`` to see one when debugging a plugin).

Modules: :mod:`.app` (the parser and :func:`main`), :mod:`.common` (what the
sub-commands share: exit codes, input, output), one module per sub-command
(:mod:`.listing`, :mod:`.run`, :mod:`.bisect`) and :mod:`.reproduce` (crash
reproducers on the command line).
"""
from __future__ import annotations

from .app import build_parser, main
from .common import CommandError, ExitCode

__all__ = ["ExitCode", "CommandError", "main", "build_parser"]


if __name__ == "__main__":  # pragma: no cover
    import sys

    sys.exit(main())
