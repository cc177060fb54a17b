from passhost import pass_entry, plugin
from passhost.hookspecs import ConfigEntry
from .fuse_ops import LINK_PARAMS_KEY, FuseOps, fuse_ops
plugin(pass_entry(FuseOps, default=True, summary="fuse operator calls into Primitive functions",
                  after=("FoldConstant", "EliminateCommonSubexpr", "DeadCodeElimination", "SimplifyInference",
                         "FoldScaleAxis")),
       ConfigEntry(LINK_PARAMS_KEY, bool, False,
                   doc="FuseOps keeps constant arguments inside fused functions instead of passing them in"),
       api=">=1.0,<2")
