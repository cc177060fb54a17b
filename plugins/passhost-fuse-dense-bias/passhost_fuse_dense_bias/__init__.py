"""passhost plugin: the FuseDenseBias pass (see :mod:`.fuse_dense_bias`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .fuse_dense_bias import DenseBiasRule, FuseDenseBias

__all__ = ["FuseDenseBias", "DenseBiasRule", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("FuseDenseBias", FuseDenseBias, default=True,
                      after=("SimplifyInference", "FoldConstant"),
                      before=("FoldScaleAxis", "EliminateCommonSubexpr", "FuseOps"),
                      summary="turn a matrix product plus a bias along its last axis into nn.dense and nn.bias_add")]
