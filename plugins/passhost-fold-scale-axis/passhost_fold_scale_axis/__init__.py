from passhost import pass_entry, plugin
from .backward import backward_fold_scale_axis
from .fold_scale_axis import BackwardFoldScaleAxis, FoldScaleAxis, ForwardFoldScaleAxis
from .forward import forward_fold_scale_axis
plugin(pass_entry(FoldScaleAxis, default=True, after=("FoldConstant", "SimplifyInference"),
                  before=("EliminateCommonSubexpr",), summary="fold per-channel scales into the weights of "
                  "conv2d and dense (Backward, Forward, then FoldConstant)"),
       pass_entry(BackwardFoldScaleAxis,
                  summary="fold a per-channel multiply after conv2d/dense into the weight"),
       pass_entry(ForwardFoldScaleAxis,
                  summary="fold a per-channel multiply before conv2d/dense into the weight"), api=">=1.0,<2")
