"""passhost plugin: the CanonicalizeOps pass (see :mod:`.canonicalize_ops`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .canonicalize_ops import BiasAddToAdd, CanonicalizeOps, canonicalize_ops

__all__ = ["BiasAddToAdd", "CanonicalizeOps", "canonicalize_ops", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    # Not in the default pipeline: TVM runs it after FoldScaleAxis, which folds scales
    # through bias_add itself (see docs/passes.md); ConvertLayout requires it by name.
    return [PassEntry("CanonicalizeOps", CanonicalizeOps,
                      summary="rewrite nn.bias_add into add with expand_dims")]
