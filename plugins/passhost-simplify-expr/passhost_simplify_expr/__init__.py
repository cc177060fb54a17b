"""passhost plugin: the SimplifyExpr pass (see :mod:`.simplify_expr`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .simplify_expr import SimplifyExpr, simplify_rules

__all__ = ["SimplifyExpr", "simplify_rules", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("SimplifyExpr", SimplifyExpr, default=True,
                      after=("SimplifyInference", "FoldConstant"),
                      before=("FuseLayerNorm", "FuseGelu", "FuseDenseBias", "FoldScaleAxis",
                              "EliminateCommonSubexpr", "FuseOps"),
                      summary="algebraic simplifications as rewrite rules (TVM SimplifyExpr)")]
