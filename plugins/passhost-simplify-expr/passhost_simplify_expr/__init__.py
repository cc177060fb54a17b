from passhost import plugin
from .simplify_expr import SimplifyExpr, simplify_rules
plugin(SimplifyExpr, api=">=1.0,<2", default=True, after=("SimplifyInference", "FoldConstant"),
       before=("FuseLayerNorm", "FuseGelu", "FuseDenseBias", "FoldScaleAxis", "EliminateCommonSubexpr",
               "FuseOps"), summary="algebraic simplifications as rewrite rules (TVM SimplifyExpr)")
