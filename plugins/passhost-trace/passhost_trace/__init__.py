"""passhost plugin: the ``trace`` instrument (see :mod:`.trace`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import InstrumentEntry

from .trace import PassTraceInstrument, TraceError

__all__ = ["PassTraceInstrument", "TraceError", "passhost_register_instruments"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_instruments():
    yield InstrumentEntry("trace", PassTraceInstrument,
                          summary="Chrome trace-event JSON of every pass, nested (path=FILE; open in Perfetto)")
