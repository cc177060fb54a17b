from passhost import plugin
from .fuse_dense_bias import DenseBiasRule, FuseDenseBias
plugin(FuseDenseBias, api=">=1.0,<2", default=True, after=("SimplifyInference", "FoldConstant"),
       before=("FoldScaleAxis", "EliminateCommonSubexpr", "FuseOps"),
       summary="turn a matrix product plus a bias along its last axis into nn.dense and nn.bias_add")
