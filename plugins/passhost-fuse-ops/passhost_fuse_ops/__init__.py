"""passhost plugin: the FuseOps pass (see :mod:`.fuse_ops`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import ConfigEntry, PassEntry

from .fuse_ops import LINK_PARAMS_KEY, FuseOps, fuse_ops

__all__ = ["FuseOps", "fuse_ops", "passhost_register_passes", "passhost_register_configs"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    # FuseOps runs last in the default pipeline.
    yield PassEntry("FuseOps", FuseOps, default=True,
                    summary="fuse operator calls into Primitive functions",
                    after=("FoldConstant", "EliminateCommonSubexpr", "DeadCodeElimination",
                           "SimplifyInference", "FoldScaleAxis"))


@hookimpl
def passhost_register_configs():
    # relay.FuseOps.max_depth (int, default 256) is built into the host's PassContext.
    yield ConfigEntry(LINK_PARAMS_KEY, bool, False,
                      doc="FuseOps keeps constant arguments inside fused functions instead of passing them in")
