"""passhost plugin: the ``trace`` instrument (see :mod:`.trace`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import InstrumentEntry

from .trace import PassTraceInstrument, TraceError

__all__ = ["PassTraceInstrument", "TraceError", "passhost_register_instruments"]


@hookimpl
def passhost_register_instruments():
    yield InstrumentEntry("trace", PassTraceInstrument,
                          summary="Chrome trace-event JSON of every pass, nested (path=FILE; open in Perfetto)")
