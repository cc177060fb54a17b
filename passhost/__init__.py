"""passhost: Relay-style graph-level compiler passes, every pass and instrument a plugin.

The public door (CONTRACT §1-§7)::

    import passhost
    from passhost import ir, transform, instrument

    mod = ir.parse(text)
    seq = passhost.pipeline("FoldConstant,EliminateCommonSubexpr,FuseOps(fuse_opt_level=2)")
    with transform.PassContext(opt_level=3):
        mod = seq(mod)

A plugin declares what it provides in one call (:mod:`passhost.plugin_api`)::

    passhost.plugin(FoldConstant, api=">=1.0,<2", default=True)

Importing passhost loads no plugin: the registry is built on first use of
:mod:`passhost.passes`, :mod:`passhost.instruments`, :func:`pipeline` or
:func:`default_pipeline`. :mod:`passhost.testing` (workloads, checks) is imported on first
use too: ``passhost.testing.example()`` works after a bare ``import passhost``.
"""
from __future__ import annotations

from typing import Any

from . import instrument, ir, transform
from . import instruments, passes
from . import formats as _formats  # noqa: F401  (installs ir.load/ir.save's dispatcher)
from .compat import API_VERSION
from .hookspecs import hookimpl
from .pipeline import default_pipeline, pipeline
from .plugin_api import pass_entry, plugin

__all__ = [
    "hookimpl",
    "plugin",
    "pass_entry",
    "ir",
    "transform",
    "instrument",
    "passes",
    "instruments",
    "pipeline",
    "default_pipeline",
    "__version__",
    "API_VERSION",
]


def __getattr__(name: str) -> Any:
    if name == "testing":  # the contract's passhost.testing.example(), without importing it first
        import importlib

        return importlib.import_module(".testing", __name__)
    if name == "__version__":
        # (read once: every ONNX save records it as the producer's version, and a metadata
        # lookup scans the installed distributions, 0.6 ms a time)
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("passhost")
        except PackageNotFoundError:  # running from a source tree that was never installed
            found = "0.0.0+unknown"
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module 'passhost' has no attribute {name!r}")
