from passhost import plugin
from .fuse_gelu import FuseGelu, gelu_rules
plugin(FuseGelu, api=">=1.0,<2", default=True, after=("SimplifyInference", "FoldConstant"),
       before=("FoldScaleAxis", "EliminateCommonSubexpr", "FuseOps"),
       summary="turn the erf-based GELU into nn.gelu")
