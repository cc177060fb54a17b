"""passhost plugin: the DeadCodeElimination pass (see :mod:`.dead_code_elimination`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .dead_code_elimination import DeadCodeElimination, dead_code_elimination

__all__ = ["DeadCodeElimination", "dead_code_elimination", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("DeadCodeElimination", DeadCodeElimination, default=True,
                      after=("EliminateCommonSubexpr",),
                      summary="remove unused pure let-bindings")]
