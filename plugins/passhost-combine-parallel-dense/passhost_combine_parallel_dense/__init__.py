from passhost import plugin
from .combine_parallel_dense import CombineParallelDense, combine_parallel_dense
plugin(CombineParallelDense, api=">=1.0,<2", default=True,
       after=("EliminateCommonSubexpr",), before=("FuseOps",))
