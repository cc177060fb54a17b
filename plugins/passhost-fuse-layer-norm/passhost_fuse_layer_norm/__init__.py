"""passhost plugin: the FuseLayerNorm pass (see :mod:`.fuse_layer_norm`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .fuse_layer_norm import FuseLayerNorm, LayerNormRule

__all__ = ["FuseLayerNorm", "LayerNormRule", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("FuseLayerNorm", FuseLayerNorm, default=True,
                      after=("SimplifyInference", "FoldConstant"),
                      before=("FoldScaleAxis", "EliminateCommonSubexpr", "FuseOps"),
                      summary="turn the decomposed layer normalisation back into nn.layer_norm")]
