from passhost import plugin
from .fold_constant import FoldConstant, fold_constant
plugin(FoldConstant, api=">=1.0,<2", default=True,
       summary="evaluate operator calls whose arguments are all constants")
