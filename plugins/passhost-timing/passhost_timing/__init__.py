"""passhost plugin: the ``timing`` instrument (see :mod:`.timing`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import InstrumentEntry

from .timing import PassTimingInstrument, TimingError

__all__ = ["PassTimingInstrument", "TimingError", "passhost_register_instruments"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_instruments():
    yield InstrumentEntry("timing", PassTimingInstrument,
                          summary="time every pass, nested; render() prints TVM's profile report")
