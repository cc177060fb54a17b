"""Every installed pass, by name: ``passhost.passes.FoldConstant(**options)``.

Attribute access looks the name up in the plugin registry (built on first use), so
what this module offers is exactly what the installed plugins register::

    import passhost

    fold = passhost.passes.FoldConstant()          # the same as passes.get("FoldConstant")
    fuse = passhost.passes.get("FuseOps", fuse_opt_level=2)
    passhost.passes.names()                        # ['DeadCodeElimination', 'FoldConstant', ...]
    passhost.passes.info("FoldConstant").distribution   # 'passhost-fold-constant'

A name no plugin provides raises :class:`~passhost.errors.PassNotFound`, naming the
distribution to install when it is a first-party pass; as an attribute
(``passhost.passes.Nope``) it is a :class:`~passhost.errors.PassAttributeNotFound`, which is
also an ``AttributeError`` (so ``hasattr(passhost.passes, "Nope")`` is ``False``).
"""
from __future__ import annotations

from typing import Any

from ._records import PassRecord
from .errors import PassAttributeNotFound, PassNotFound
from .registry import get_registry

__all__ = ["get", "names", "info", "rules"]


def get(name: str, **options: Any) -> Any:
    """Build the pass ``name`` with ``options``.

    :raises PassNotFound: if no installed plugin provides ``name``
    :raises PluginConflict: if two plugins provide it
    :raises PipelineError: if the pass rejects the options
    """
    return get_registry().build_pass(name, **options)


def names() -> list:
    """The names of all installed passes, sorted."""
    return get_registry().pass_names()


def info(name: str) -> PassRecord:
    """What is known about pass ``name``: ``name``, ``opt_level``, ``required``,
    ``distribution``, ``version``, ``summary`` (and ``entry``, ``source``)."""
    return get_registry().pass_record(name)


def rules(name: str) -> tuple:
    """The rules of pass ``name`` in the order they are tried, ``()`` if it is not made of
    rules (see :func:`passhost.transform.pattern_pass`). Needs none of the pass's options.

    :raises PassNotFound: if no installed plugin provides ``name``
    """
    built = get_registry().pass_record(name).prototype()
    found = getattr(getattr(built, "pass_func", None), "rules", None)
    return found if isinstance(found, tuple) else ()


def __getattr__(name: str) -> Any:
    if name.startswith("_"):
        raise AttributeError(f"module 'passhost.passes' has no attribute {name!r}")
    try:
        record = get_registry().pass_record(name)
    except PassNotFound as err:
        raise PassAttributeNotFound(str(err)) from None

    def factory(**options: Any) -> Any:
        return record.build(**options)

    factory.__name__ = factory.__qualname__ = record.name
    factory.__doc__ = getattr(record.entry.factory, "__doc__", None) or record.summary
    return factory


def __dir__() -> list:
    return sorted(set(__all__) | set(names()))
