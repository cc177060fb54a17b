"""passhost plugin: the PrintIR pass (see :mod:`.print_ir`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .print_ir import PrintIR, print_ir

__all__ = ["PrintIR", "print_ir", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("PrintIR", PrintIR, summary="print the module to stderr and return it unchanged")]
