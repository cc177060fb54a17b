"""passhost plugin: the FoldConstant pass (see :mod:`.fold_constant`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .fold_constant import FoldConstant, fold_constant

__all__ = ["FoldConstant", "fold_constant", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("FoldConstant", FoldConstant, default=True,
                      summary="evaluate operator calls whose arguments are all constants")]
