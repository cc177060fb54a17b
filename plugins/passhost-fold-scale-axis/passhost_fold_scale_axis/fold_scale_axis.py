"""FoldScaleAxis: fold per-channel scales into the weights of ``conv2d`` and ``dense``.

TVM's ``relay.transform.FoldScaleAxis`` (``fold_scale_axis.cc``) is a
``Sequential([BackwardFoldScaleAxis(), ForwardFoldScaleAxis(), FoldConstant()],
name="FoldScaleAxis")`` at ``opt_level`` 0 whose two fold passes are function passes at
``opt_level`` 3 requiring ``InferType`` -- so inside a pipeline they only run at
``PassContext(opt_level=3)``. The folds only *move* the scale onto the weight
(``multiply(w, expand_dims(s, ...))``); the trailing ``FoldConstant`` computes the new
weights when ``w`` and ``s`` are constants (e.g. parameters bound with
``bind_params_by_name``).

* :func:`~.backward.backward_fold_scale_axis`: ``multiply(chain(conv2d(x, w)), s)``
  (e.g. BatchNorm after a convolution, once SimplifyInference has run);
* :func:`~.forward.forward_fold_scale_axis`: ``conv2d(chain(multiply(x, s)), w)``
  (e.g. a pre-activation BatchNorm feeding a convolution).

Before (ResNet's ``conv -> batch_norm -> relu`` after SimplifyInference and
FoldConstant, parameters bound)::

    %0 = nn.conv2d(%data, meta[relay.Constant][0], padding=[1, 1, 1, 1], channels=64, kernel_size=[3, 3]);
    %1 = multiply(%0, meta[relay.Constant][1] /* (64, 1, 1) */);
    %2 = add(%1, meta[relay.Constant][2] /* (64, 1, 1) */);
    nn.relu(%2)

After ``FoldScaleAxis()`` at ``opt_level`` 3::

    %0 = nn.conv2d(%data, meta[relay.Constant][0] /* the scaled weight */, padding=[1, 1, 1, 1], channels=64, kernel_size=[3, 3]);
    %1 = add(%0, meta[relay.Constant][1] /* (64, 1, 1) */);
    nn.relu(%1)
"""
from __future__ import annotations

from typing import Any

from passhost import ir
from passhost.errors import PassNotFound, PluginLoadError
from passhost.ir import Function
from passhost.transform import Sequential, function_pass, module_pass

from .backward import backward_fold_scale_axis
from .forward import forward_fold_scale_axis

__all__ = ["BackwardFoldScaleAxis", "ForwardFoldScaleAxis", "FoldScaleAxis"]


@function_pass(opt_level=3, name="BackwardFoldScaleAxis", required=["InferType"], preserves_types=True)
class BackwardFoldScaleAxis:
    """Fold a per-channel ``multiply`` after ``conv2d``/``dense`` into the weight."""

    def transform_function(self, func: Function, mod: Any, ctx: Any) -> Function:
        if not func.has_type:  # called directly, without its required InferType
            ir.infer_type(mod)
        return backward_fold_scale_axis(func)


@function_pass(opt_level=3, name="ForwardFoldScaleAxis", required=["InferType"], preserves_types=True)
class ForwardFoldScaleAxis:
    """Fold a per-channel ``multiply`` before ``conv2d``/``dense`` into the weight."""

    def transform_function(self, func: Function, mod: Any, ctx: Any) -> Function:
        if not func.has_type:  # called directly, without its required InferType
            ir.infer_type(mod)
        return forward_fold_scale_axis(func)


def _fold_constant() -> Any:
    """The installed ``FoldConstant`` pass, looked up by name (no plugin imports another).

    While the plugin registry is being built (it builds every entry once to check it) the
    registry cannot be asked; and when ``passhost-fold-constant`` is not installed there is
    nothing to find. In both cases the Sequential gets a stand-in that looks
    ``FoldConstant`` up when it runs — so pipelines holding FoldScaleAxis can still be
    built and printed, and running it without FoldConstant fails with the registry's
    "install passhost-fold-constant" error.
    """
    import passhost

    try:
        return passhost.passes.get("FoldConstant")
    except (PluginLoadError, PassNotFound):
        @module_pass(opt_level=2, name="FoldConstant")
        def fold_constant_by_name(mod: Any, ctx: Any) -> Any:
            return passhost.passes.get("FoldConstant")(mod, ctx)

        return fold_constant_by_name


def FoldScaleAxis() -> Sequential:
    """``Sequential([BackwardFoldScaleAxis(), ForwardFoldScaleAxis(), FoldConstant()],
    opt_level=0, name="FoldScaleAxis")``. It takes no options.

    Running it raises :class:`~passhost.errors.PassNotFound` if no installed plugin
    provides ``FoldConstant``.
    """
    return Sequential([BackwardFoldScaleAxis(), ForwardFoldScaleAxis(), _fold_constant()],
                      opt_level=0, name="FoldScaleAxis")
