"""passhost plugin: the ``print-ir`` instrument (see :mod:`.print_ir`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import InstrumentEntry

from .print_ir import PrintIRError, PrintIRInstrument

__all__ = ["PrintIRInstrument", "PrintIRError", "passhost_register_instruments"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_instruments():
    yield InstrumentEntry("print-ir", PrintIRInstrument,
                          summary="print or dump the IR around passes (default: after each change; diff=True)")
