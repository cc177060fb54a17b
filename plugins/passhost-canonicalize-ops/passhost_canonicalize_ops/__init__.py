from passhost import plugin
from .canonicalize_ops import BiasAddToAdd, CanonicalizeOps, canonicalize_ops
# not in the default pipeline: TVM runs it after FoldScaleAxis (docs/passes.md); ConvertLayout requires it
plugin(CanonicalizeOps, api=">=1.0,<2", summary="rewrite nn.bias_add into add with expand_dims")
