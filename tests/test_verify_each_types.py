"""verify-each holds a pass that declares ``preserves_types`` to it (issue 16, "every expression
typed where the pass declares it preserves types"), and leaves passes that do not declare it alone."""
from __future__ import annotations

import pytest

import passhost
from passhost import ir
from passhost.errors import PassError
from passhost.transform import PassContext, Sequential, function_pass, module_pass

VERIFY = {"passhost.verify_each": True}


def _typed_module():
    x = ir.var("x", shape=(2, 3))
    return ir.infer_type(ir.IRModule.from_expr(ir.Function([x], ir.nn.relu(ir.add(x, ir.const(1.0))))))


def _untyping(mod, ctx):
    """Rebuild @main with a fresh (untyped) call: what a careless module pass does."""
    fn = mod["main"]
    out = mod.copy()
    out["main"] = ir.Function(fn.params, ir.negative(fn.body), fn.ret_type)
    return out


def test_a_pass_that_declares_preserves_types_and_leaves_untyped_nodes_is_named():
    liar = module_pass(_untyping, opt_level=0, name="Liar", preserves_types=True)
    assert liar.info.preserves_types
    with PassContext(config=VERIFY), pytest.raises(PassError) as err:
        Sequential([liar])(_typed_module())
    assert str(err.value).startswith("pass 'Liar' left a malformed module: a call of negative in @main has no "
                                     "type, although the pass declares it preserves types")
    # the same pass without the declaration, or without verify-each, is fine
    Sequential([module_pass(_untyping, opt_level=0, name="Honest")])(_typed_module())
    with PassContext(config=VERIFY):
        Sequential([module_pass(_untyping, opt_level=0, name="Honest")])(_typed_module())
    Sequential([liar])(_typed_module())


def test_an_untyped_input_is_not_blamed_on_the_pass():
    x = ir.var("x", shape=(2, 3))
    untyped = ir.IRModule.from_expr(ir.Function([x], ir.nn.relu(x)))
    keep = module_pass(lambda mod, ctx: mod, opt_level=0, name="Keep", preserves_types=True)
    with PassContext(config=VERIFY):
        Sequential([keep])(untyped)


def test_nesting_keeps_each_pass_to_its_own_declaration():
    liar = module_pass(_untyping, opt_level=0, name="Liar", preserves_types=True)
    inner = Sequential([module_pass(lambda m, c: m, opt_level=0, name="Keep"), liar], name="Inner")
    with PassContext(config=VERIFY), pytest.raises(PassError, match="pass 'Liar' left a malformed module"):
        Sequential([inner])(_typed_module())


def test_every_first_party_pass_but_to_a_normal_form_declares_it_and_keeps_it():
    """The first-party passes are held to it in the suite's property test (verify-each on)."""
    declared = {n for n in passhost.passes.names() if passhost.passes.rules(n) or
                passhost.passes.info(n).prototype().info.preserves_types}
    assert "ToANormalForm" not in declared
    assert {"FoldConstant", "EliminateCommonSubexpr", "FuseOps", "DeadCodeElimination", "SimplifyInference",
            "CanonicalizeOps", "Inline", "ToGraphNormalForm", "FuseLayerNorm"} <= declared
    mod = passhost.testing.resnet(18)[0]
    with PassContext(opt_level=3, config=VERIFY):
        passhost.default_pipeline(3)(ir.infer_type(mod))


@function_pass(opt_level=0, name="Fp", preserves_types=True)
def _fp(func, mod, ctx):
    return func


def test_the_decorators_take_the_declaration():
    assert _fp.info.preserves_types and not module_pass(lambda m, c: m, opt_level=0).info.preserves_types
    assert _fp.info != function_pass(lambda f, m, c: f, opt_level=0, name="Fp").info
