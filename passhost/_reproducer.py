"""Crash reproducers for ``passhost run`` (private; the command-line side is
:mod:`passhost.cli.reproduce`).

When a pass raises during ``passhost run``, the command writes a directory that replays
the failure with ``passhost run --reproduce DIR``:

``module.txt``
    the module just before the top-level pipeline element that failed (text format
    with its ``#[metadata]`` section, so constants are included)
``pipeline.txt``
    the rest of the pipeline text, starting with the failing element
``config.json``
    ``opt_level``, ``disabled``, ``required``, ``config`` (the ``PassContext``
    options), ``instruments`` (the ``--instrument`` texts), ``failed_pass`` and ``error``
``plugins.json``
    the host version and every loaded plugin: entry point, distribution, version

The module is tracked by :class:`CrashTracker`, an instrument the command installs
last (so a pass that another instrument fails in its ``run_after_pass``, e.g.
``verify-numerics(stop=True)``, counts as not completed). It keeps a reference to the
module after each completed top-level element (no copy: modules are immutable), so
tracking costs a counter update per pass and a gating check per top-level element.

The directory is written atomically: files go to a temporary sibling directory that
is renamed into place.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Optional

from . import ir
from .errors import PasshostError
from .options import jsonable
from .instrument import PassInstrument
from .transform import PassContext

__all__ = ["CrashTracker", "Reproducer", "write_reproducer", "load_reproducer", "default_crash_dir",
           "ReproducerError"]

FILES = ("module.txt", "pipeline.txt", "config.json", "plugins.json")


class ReproducerError(PasshostError):
    """A reproducer directory cannot be written or read (exit 2)."""


class CrashTracker(PassInstrument):
    """Remember the module before the first top-level pipeline element not yet completed.

    :param seq: the pipeline about to run (its ``passes`` are the top-level elements)
    :param mod: the input module
    """

    name = "passhost-crash-tracker"

    def __init__(self, seq: Any, mod: Any = None) -> None:
        self._infos = [p.info for p in getattr(seq, "passes", ())]
        self._depth = 0
        #: index of the first element that has not completed
        self.next_index = 0
        #: the module before that element
        self.module = mod

    def run_before_pass(self, mod: Any, info: Any) -> None:
        self._depth += 1

    def run_after_pass(self, mod: Any, info: Any) -> None:
        self._depth -= 1
        if self._depth != 1:
            return
        # a direct child of the pipeline finished: is it the element due to run next?
        # (a pass another element requires also finishes here; it is not that element)
        ctx = PassContext.current()
        infos = self._infos
        j = self.next_index
        while j < len(infos) and not ctx.pass_enabled(infos[j]):
            j += 1
        if j < len(infos) and infos[j] is info:
            self.next_index = j + 1
            self.module = mod


@dataclass
class Reproducer:
    """The contents of a reproducer directory."""

    module: Any
    pipeline: str
    opt_level: int
    disabled: list
    required: list
    config: dict
    instruments: list
    failed_pass: Optional[str] = None
    error: Optional[str] = None


def default_crash_dir(now: Optional[float] = None) -> str:
    """``<temp dir>/passhost-crash-<YYYYmmdd-HHMMSS>`` (with ``-2``, ``-3`` ... if taken):
    under the system's temporary directory (``$TMPDIR``, else ``/tmp``), as clang leaves
    its crash reproducers, so a failing run never writes into the working directory
    uninvited; ``--crash-dir`` chooses another place."""
    import tempfile

    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = os.path.join(tempfile.gettempdir(), f"passhost-crash-{stamp}")
    path, n = base, 1
    while os.path.lexists(path):
        n += 1
        path = f"{base}-{n}"
    return path


def plugin_listing(registry: Any) -> dict:
    """``{"passhost": version, "plugins": [...]}`` for ``plugins.json``."""
    from importlib import metadata

    try:
        host = metadata.version("passhost")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        host = None
    plugins = sorted((s.as_dict() for s in registry.plugins.values()), key=lambda d: d["plugin"])
    return {"passhost": host, "plugins": plugins}


def write_reproducer(path: str, *, module: Any, pipeline: str, ctx: PassContext, instruments: list,
                     registry: Any, failed_pass: Optional[str], error: str) -> str:
    """Write a reproducer directory at ``path`` (which must not exist or be empty).

    :returns: ``path``
    :raises ReproducerError: the directory cannot be created
    """
    config = {
        "opt_level": ctx.opt_level,
        "disabled": list(ctx.disabled_pass),
        "required": list(ctx.required_pass),
        "config": jsonable(dict(ctx.config)),
        "instruments": list(instruments),
        "failed_pass": failed_pass,
        "error": error,
    }
    texts = {
        "module.txt": ir.astext(module, show_meta_data=True).rstrip("\n") + "\n",
        "pipeline.txt": pipeline + "\n",
        "config.json": json.dumps(config, indent=2) + "\n",
        "plugins.json": json.dumps(plugin_listing(registry), indent=2) + "\n",
    }
    path = os.path.normpath(path)
    parent = os.path.dirname(os.path.abspath(path))
    try:
        if os.path.isdir(path) and not os.listdir(path):
            os.rmdir(path)
        elif os.path.lexists(path):
            raise ReproducerError(f"crash directory {path!r} already exists and is not empty; "
                                  "name a new one with --crash-dir")
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(path)}.", dir=parent)
    except OSError as err:
        raise ReproducerError(f"cannot create crash directory {path!r}: {err.strerror or err}") from None
    try:
        for name, text in texts.items():
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                f.write(text)
        os.chmod(tmp, 0o755)
        os.rename(tmp, path)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ReproducerError(f"cannot write crash directory {path!r}: {err.strerror or err}") from None
    return path


def _read(directory: str, name: str) -> str:
    try:
        with open(os.path.join(directory, name), encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as err:
        raise ReproducerError(f"--reproduce {directory!r}: cannot read {name}: "
                              f"{getattr(err, 'strerror', None) or err} (a reproducer holds "
                              f"{', '.join(FILES[:3])})") from None


def _names(doc: dict, key: str, directory: str) -> list:
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ReproducerError(f"--reproduce {directory!r}: config.json {key!r} must be a list of strings")
    return value


def load_reproducer(directory: str) -> Reproducer:
    """Read a reproducer directory written by :func:`write_reproducer`.

    :raises ReproducerError: a file is missing or malformed
    :raises ParseError: ``module.txt`` does not parse
    """
    if not os.path.isdir(directory):
        raise ReproducerError(f"--reproduce {directory!r} is not a directory; give the crash directory "
                              "`passhost run` reported")
    module = ir.parse(_read(directory, "module.txt"), source_name=os.path.join(directory, "module.txt"))
    pipeline = _read(directory, "pipeline.txt").strip()
    try:
        doc = json.loads(_read(directory, "config.json"))
    except ValueError as err:
        raise ReproducerError(f"--reproduce {directory!r}: config.json is not JSON: {err}") from None
    if not isinstance(doc, dict):
        raise ReproducerError(f"--reproduce {directory!r}: config.json must hold an object")
    opt_level = doc.get("opt_level", 2)
    if isinstance(opt_level, bool) or not isinstance(opt_level, int):
        raise ReproducerError(f"--reproduce {directory!r}: config.json opt_level must be an integer")
    config = doc.get("config", {})
    if not isinstance(config, dict):
        raise ReproducerError(f"--reproduce {directory!r}: config.json 'config' must be an object")
    return Reproducer(module, pipeline, opt_level, _names(doc, "disabled", directory),
                      _names(doc, "required", directory), config, _names(doc, "instruments", directory),
                      doc.get("failed_pass"), doc.get("error"))


def remaining_pipeline(seq: Any, start: int) -> str:
    """The pipeline text of ``seq``'s elements from ``start`` on."""
    spec = getattr(seq, "spec", None)
    if spec is not None:
        return ",".join(str(p) for p in spec.passes[start:])
    return ",".join(p.info.name for p in seq.passes[start:])
