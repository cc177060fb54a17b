from passhost import plugin
from .fuse_layer_norm import FuseLayerNorm, LayerNormRule
plugin(FuseLayerNorm, api=">=1.0,<2", default=True, after=("SimplifyInference", "FoldConstant"),
       before=("FoldScaleAxis", "EliminateCommonSubexpr", "FuseOps"),
       summary="turn the decomposed layer normalisation back into nn.layer_norm")
