from passhost import plugin
from .dead_code_elimination import DeadCodeElimination, dead_code_elimination
plugin(DeadCodeElimination, api=">=1.0,<2", default=True, after=("EliminateCommonSubexpr",),
       summary="remove unused pure let-bindings")
