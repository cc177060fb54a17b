"""passhost plugin: the InferType pass (see :mod:`.infer_type`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .infer_type import InferType, infer_type

__all__ = ["InferType", "infer_type", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("InferType", InferType, summary="infer the type of every expression")]
