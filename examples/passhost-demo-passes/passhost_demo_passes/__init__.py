"""Three deliberately bad or idle passes, to try passhost's debugging tools on:
``passhost bisect`` (SignFlip changes the numbers), crash reproducers (Crash raises) and
the ``verify-numerics`` instrument (SignFlip, between Keeps).

Before and after SignFlip::

    def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(2, 3), float32]) {
      multiply(add(add(%x, %w), 1f), 2f)
    }

    def @main(%x: Tensor[(2, 3), float32], %w: Tensor[(2, 3), float32]) {
      negative(multiply(add(add(%x, %w), 1f), 2f))
    }
"""
from __future__ import annotations

import passhost
from passhost import ir
from passhost.transform import module_pass

__all__ = ["sign_flip", "crash", "keep"]


@module_pass(opt_level=0, name="SignFlip")
def sign_flip(mod, ctx):
    """Negate @main's result: a pass that silently computes the wrong numbers."""
    out = mod.copy()
    f = mod["main"]
    out["main"] = ir.Function(f.params, ir.negative(f.body), None, f.attrs)
    return out


@module_pass(opt_level=0, name="Crash")
def crash(mod, ctx):
    """Raise ValueError: a pass that fails, to see a crash reproducer."""
    raise ValueError("Crash cannot handle this module")


@module_pass(opt_level=0, name="Keep")
def keep(mod, ctx):
    """Return the module unchanged."""
    return mod


# the three passes, and the plugin API versions this pack works with (see passhost.compat)
passhost.plugin(sign_flip, crash, keep, api=">=1.0,<2")
