"""passhost plugin: the ``report`` instrument (see :mod:`.report`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import InstrumentEntry

from .report import PassReport, ReportInstrument

__all__ = ["PassReport", "ReportInstrument", "passhost_register_instruments"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_instruments():
    return [InstrumentEntry("report", ReportInstrument,
                            summary="per pass: ran or skipped and why, changed?, wall time, op-count delta")]
