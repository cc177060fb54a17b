"""passhost plugin: the RemoveUnusedFunctions pass (see :mod:`.remove_unused_functions`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .remove_unused_functions import RemoveUnusedFunctions, reachable_functions, remove_unused_functions

__all__ = ["RemoveUnusedFunctions", "reachable_functions", "remove_unused_functions", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("RemoveUnusedFunctions", RemoveUnusedFunctions,
                      summary="drop global functions not reachable from the entry functions")]
