"""passhost plugin: the ``op-diff`` instrument (see :mod:`.op_diff`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import InstrumentEntry

from .op_diff import OpDiffError, RelayCallNodeDiffer

__all__ = ["RelayCallNodeDiffer", "OpDiffError", "passhost_register_instruments"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_instruments():
    yield InstrumentEntry("op-diff", RelayCallNodeDiffer,
                          summary="per pass, the change in calls of each operator (get_pass_to_op_diff())")
