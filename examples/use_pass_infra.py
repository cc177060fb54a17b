"""How to use the passhost pass infra — TVM's ``use_pass_infra`` tutorial, in passhost.

Every step of the tutorial (``../shared/seeds/tvm-use-pass-infra-tutorial.txt``) is a
function returning what the tutorial prints; ``tests/test_tutorial.py`` compares each
with TVM's printed output. Run ``python examples/use_pass_infra.py`` to see them all.

Needs the passes InferType, FoldConstant, EliminateCommonSubexpr, FuseOps and PrintIR
installed (``bash scripts/dev-install.sh`` installs every first-party plugin).
"""
from __future__ import annotations

import contextlib
import io

import passhost
from passhost import instrument, ir, transform
from passhost.testing import example


def manual_fold_constant() -> ir.IRModule:
    """Apply FoldConstant by hand: the constants are folded."""
    mod = ir.IRModule.from_expr(example())
    fold_const = passhost.passes.FoldConstant()
    return fold_const(mod)


def manual_eliminate_common_subexpr() -> ir.IRModule:
    """Then EliminateCommonSubexpr: the two identical adds merge."""
    return passhost.passes.EliminateCommonSubexpr()(manual_fold_constant())


def manual_fuse_ops_level0() -> ir.IRModule:
    """FuseOps(fuse_opt_level=0): every operator becomes its own primitive function."""
    return passhost.passes.FuseOps(fuse_opt_level=0)(manual_eliminate_common_subexpr())


def tutorial_sequential() -> transform.Sequential:
    return transform.Sequential(
        [
            passhost.passes.FoldConstant(),
            passhost.passes.EliminateCommonSubexpr(),
            passhost.passes.FuseOps(fuse_opt_level=2),
        ]
    )


def sequential_default_context() -> ir.IRModule:
    """At the default opt_level 2 the level-3 EliminateCommonSubexpr is skipped."""
    mod = ir.IRModule.from_expr(example())
    return tutorial_sequential()(mod)


def sequential_opt_level3() -> ir.IRModule:
    mod = ir.IRModule.from_expr(example())
    with transform.PassContext(opt_level=3):
        return tutorial_sequential()(mod)


def sequential_disabled_cse() -> ir.IRModule:
    mod = ir.IRModule.from_expr(example())
    with transform.PassContext(opt_level=3, disabled_pass=["EliminateCommonSubexpr"]):
        return tutorial_sequential()(mod)


@transform.function_pass(opt_level=1)
class CustomPipeline:
    """Simple test function to replace one argument to another."""

    def __init__(self, multiplier):
        self.multiplier = multiplier

    # This function can define a pass.
    def transform_function(self, func, mod, ctx):
        obj = self

        class ReplaceConstant(ir.ExprMutator):
            def visit_constant(self, c):
                return ir.multiply(obj.multiplier, c)

        return ReplaceConstant().visit(func)


def custom_pipeline() -> ir.IRModule:
    mod = ir.IRModule.from_expr(example())
    custom_pass = CustomPipeline(multiplier=ir.const(3, "float32"))
    assert custom_pass.info.name == "CustomPipeline"
    return custom_pass(mod)


@instrument.pass_instrument
class PrintIR:
    """Print the name of the pass, the IR, only before passes execute."""

    def run_before_pass(self, mod, info):
        print("Running pass: {}", info)
        print(mod)


def debug_with_instrument() -> str:
    """The tutorial's last step: a PrintIR *instrument* around a pipeline that also
    holds the PrintIR *pass*; returns what it prints on stdout."""
    mod = ir.IRModule.from_expr(example())
    seq = transform.Sequential(
        [
            passhost.passes.FoldConstant(),
            passhost.passes.PrintIR(),
            passhost.passes.EliminateCommonSubexpr(),
            passhost.passes.FuseOps(),
        ]
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        with transform.PassContext(opt_level=3, instruments=[PrintIR()]):
            # Perform the optimizations.
            mod = seq(mod)
        print(mod)
        print("done")
    return out.getvalue()


STEPS = [
    ("FoldConstant", manual_fold_constant),
    ("EliminateCommonSubexpr", manual_eliminate_common_subexpr),
    ("FuseOps(fuse_opt_level=0)", manual_fuse_ops_level0),
    ("Sequential, default PassContext", sequential_default_context),
    ("Sequential, opt_level=3", sequential_opt_level3),
    ("Sequential, disabled_pass=['EliminateCommonSubexpr']", sequential_disabled_cse),
    ("CustomPipeline function pass", custom_pipeline),
]


def main() -> None:
    for title, step in STEPS:
        print(f"# {title}")
        print(step())
    print("# PassInstrument printing IR before every pass")
    print(debug_with_instrument(), end="")


if __name__ == "__main__":
    main()
