"""passhost plugin: the SimplifyInference pass (see :mod:`.simplify_inference`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .simplify_inference import SimplifyInference, simplify_inference

__all__ = ["SimplifyInference", "simplify_inference", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("SimplifyInference", SimplifyInference, default=True, before=("FoldConstant",),
                      summary="replace batch_norm, dropout, layer_norm and instance_norm by inference arithmetic")]
