"""Every installed pass instrument, by name.

::

    import passhost

    timing = passhost.instruments.get("timing")
    passhost.instruments.names()                 # ['op-diff', 'print-ir', 'timing']
    passhost.instruments.info("timing").distribution

A name no plugin provides raises :class:`~passhost.errors.InstrumentNotFound`, naming
the distribution to install when it is a first-party instrument.
"""
from __future__ import annotations

from typing import Any

from ._records import InstrumentRecord
from .registry import get_registry

__all__ = ["get", "names", "info"]


def get(name: str, **options: Any) -> Any:
    """Build the instrument ``name`` with ``options``.

    :raises InstrumentNotFound: if no installed plugin provides ``name``
    :raises PluginConflict: if two plugins provide it
    :raises PipelineError: if the instrument rejects the options
    """
    return get_registry().build_instrument(name, **options)


def names() -> list:
    """The names of all installed instruments, sorted."""
    return get_registry().instrument_names()


def info(name: str) -> InstrumentRecord:
    """What is known about instrument ``name``: ``name``, ``distribution``, ``version``,
    ``summary`` (and ``entry``, ``source``)."""
    return get_registry().instrument_record(name)
