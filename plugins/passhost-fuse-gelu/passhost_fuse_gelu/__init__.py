"""passhost plugin: the FuseGelu pass (see :mod:`.fuse_gelu`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .fuse_gelu import FuseGelu, gelu_rules

__all__ = ["FuseGelu", "gelu_rules", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("FuseGelu", FuseGelu, default=True,
                      after=("SimplifyInference", "FoldConstant"),
                      before=("FoldScaleAxis", "EliminateCommonSubexpr", "FuseOps"),
                      summary="turn the erf-based GELU into nn.gelu")]
