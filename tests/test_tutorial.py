"""The pass-infra tutorial, reproduced: every module it prints equals TVM's output.

The expected texts are the ``code-block:: none`` outputs of the seed tutorial
(``tests/seeds/tvm-use-pass-infra-tutorial.txt``, a copy of
``../shared/seeds/``), compared after collapsing whitespace (the seed's
whitespace was collapsed when it was saved).
"""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from passhost.testing.seeds import collapse, seed_code_blocks

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT / "tests" / "seeds" / "tvm-use-pass-infra-tutorial.txt"


def _load_example():
    spec = importlib.util.spec_from_file_location("use_pass_infra", ROOT / "examples" / "use_pass_infra.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BLOCKS = seed_code_blocks(SEED)
STEP_NAMES = [
    "manual_fold_constant",
    "manual_eliminate_common_subexpr",
    "manual_fuse_ops_level0",
    "sequential_default_context",
    "sequential_opt_level3",
    "sequential_disabled_cse",
    "custom_pipeline",
]


def test_seed_has_every_printed_block():
    assert len(BLOCKS) == len(STEP_NAMES) + 1


@pytest.mark.parametrize("index,step", list(enumerate(STEP_NAMES)))
def test_step_prints_like_tvm(index, step):
    tutorial = _load_example()
    got = collapse(str(getattr(tutorial, step)()))
    assert got == collapse(BLOCKS[index])


def test_instrument_sees_passes_in_the_seed_order():
    tutorial = _load_example()
    out = tutorial.debug_with_instrument()
    names = re.findall(r"pass name: (\w+)", out)
    assert names == re.findall(r"pass name: (\w+)", BLOCKS[-1])
    assert names == [
        "sequential", "FoldConstant", "InferType", "PrintIR", "InferType",
        "EliminateCommonSubexpr", "InferType", "InferType", "FuseOps", "InferType",
    ]


def test_instrument_run_prints_exactly_the_seed():
    tutorial = _load_example()
    assert collapse(tutorial.debug_with_instrument()) == collapse(BLOCKS[-1])


def test_example_prints_untyped_like_the_seed_first_module():
    # the first module the instrument prints is the untyped tutorial program
    from passhost import ir
    from passhost.testing import example

    first = BLOCKS[-1].split("required passes: [] ", 1)[1].split(" Running pass:")[0]
    assert collapse(str(ir.IRModule.from_expr(example()))) == collapse(first)


def test_forum_thread_sequential_gates_but_direct_calls_always_run():
    """tvm-default-passes-forum.txt: inside a Sequential at opt_level 2 the level-3
    EliminateCommonSubexpr is skipped; called one by one, all three passes run."""
    import passhost
    from passhost import ir, transform
    from passhost.testing import example

    ran = []

    class Recorder(passhost.instrument.PassInstrument):
        def run_before_pass(self, mod, info):
            ran.append(info.name)

    seq = transform.Sequential([
        passhost.passes.FoldConstant(),
        passhost.passes.EliminateCommonSubexpr(),
        passhost.passes.FuseOps(fuse_opt_level=2),
    ])
    mod = ir.IRModule.from_expr(example())
    with transform.PassContext(opt_level=2, instruments=[Recorder()]):
        seq(mod)
    assert "EliminateCommonSubexpr" not in ran and "FuseOps" in ran

    ran.clear()
    with transform.PassContext(opt_level=2, instruments=[Recorder()]):
        mod2 = passhost.passes.FoldConstant()(mod)
        mod3 = passhost.passes.EliminateCommonSubexpr()(mod2)
        passhost.passes.FuseOps(fuse_opt_level=2)(mod3)
    assert [n for n in ran if n != "InferType"] == ["FoldConstant", "EliminateCommonSubexpr", "FuseOps"]
