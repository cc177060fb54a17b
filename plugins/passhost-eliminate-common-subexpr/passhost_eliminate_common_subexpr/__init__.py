from passhost import plugin
from .eliminate_common_subexpr import EliminateCommonSubexpr, eliminate_common_subexpr
plugin(EliminateCommonSubexpr, api=">=1.0,<2", default=True, after=("FoldConstant",),
       summary="merge identical operator calls and tuple projections")
