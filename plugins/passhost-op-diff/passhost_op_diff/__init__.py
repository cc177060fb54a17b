from passhost import plugin
from .op_diff import OpDiffError, RelayCallNodeDiffer
plugin(RelayCallNodeDiffer, name="op-diff", api=">=1.0,<2",
       summary="per pass, the change in calls of each operator (get_pass_to_op_diff())")
