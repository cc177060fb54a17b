"""passhost plugin: the FoldScaleAxis passes (see :mod:`.fold_scale_axis`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .backward import backward_fold_scale_axis
from .fold_scale_axis import BackwardFoldScaleAxis, FoldScaleAxis, ForwardFoldScaleAxis
from .forward import forward_fold_scale_axis

__all__ = ["FoldScaleAxis", "BackwardFoldScaleAxis", "ForwardFoldScaleAxis",
           "backward_fold_scale_axis", "forward_fold_scale_axis", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [
        PassEntry("FoldScaleAxis", FoldScaleAxis, default=True,
                  after=("FoldConstant", "SimplifyInference"), before=("EliminateCommonSubexpr",),
                  summary="fold per-channel scales into the weights of conv2d and dense "
                          "(Backward, Forward, then FoldConstant)"),
        PassEntry("BackwardFoldScaleAxis", BackwardFoldScaleAxis,
                  summary="fold a per-channel multiply after conv2d/dense into the weight"),
        PassEntry("ForwardFoldScaleAxis", ForwardFoldScaleAxis,
                  summary="fold a per-channel multiply before conv2d/dense into the weight"),
    ]
