"""passhost plugin: the EliminateCommonSubexpr pass (see :mod:`.eliminate_common_subexpr`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .eliminate_common_subexpr import EliminateCommonSubexpr, eliminate_common_subexpr

__all__ = ["EliminateCommonSubexpr", "eliminate_common_subexpr", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("EliminateCommonSubexpr", EliminateCommonSubexpr, default=True,
                      after=("FoldConstant",),
                      summary="merge identical operator calls and tuple projections")]
