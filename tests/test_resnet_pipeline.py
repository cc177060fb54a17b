"""ResNet-18 and ResNet-50 through the ``-O3`` default pipeline, end to end.

With parameters bound (``ir.bind_params_by_name``), ``passhost.default_pipeline(3)``
inside ``PassContext(opt_level=3)`` must: remove every ``nn.batch_norm``
(SimplifyInference), fold every BN scale that follows or precedes a convolution into
the convolution's weights (FoldScaleAxis + FoldConstant), fuse ``conv2d + add + relu``
into ``Primitive`` functions (FuseOps), and keep the network's numbers: the logits of a
fixed random input match the unoptimised network's (max error <= 1e-4 relative to the
largest logit) in the reference interpreter.
"""
from __future__ import annotations

import numpy as np
import pytest

import passhost
from passhost import ir, testing
from passhost.cli import main
from passhost.transform import PassContext

O3_ORDER = ["SimplifyInference", "FoldConstant", "FoldScaleAxis", "EliminateCommonSubexpr",
            "DeadCodeElimination", "FuseOps"]

#: residual units per network (each has a conv -> BN -> relu -> conv chain)
UNITS = {18: 8, 50: 16}


def _logits_module(num_layers: int) -> ir.IRModule:
    """The bound network without its final softmax (its body is ``softmax(logits)``)."""
    mod, params = testing.resnet(num_layers)
    main_fn = ir.bind_params_by_name(mod["main"], params)
    assert main_fn.body.op.name == "nn.softmax"
    return ir.IRModule.from_expr(ir.Function(main_fn.params, main_fn.body.args[0]))


def _ops_everywhere(func: ir.Function) -> dict:
    """Op counts over the whole function, inside fused functions too."""
    return ir.count_ops(func)


def _primitive_functions(func: ir.Function) -> list:
    return [n for n in ir.post_order(func)
            if isinstance(n, ir.Function) and n.attrs and n.attrs.get("Primitive")]


class _Net:
    def __init__(self, num_layers: int) -> None:
        self.num_layers = num_layers
        self.before = _logits_module(num_layers)
        with PassContext(opt_level=3):
            self.after = passhost.default_pipeline(3)(self.before)
        with PassContext(opt_level=3, disabled_pass=["FuseOps"]):
            self.unfused = passhost.default_pipeline(3)(self.before)


_NETS: dict = {}


@pytest.fixture(params=[18, 50], ids=["resnet18", "resnet50"])
def net(request) -> _Net:
    n = request.param
    if n not in _NETS:
        _NETS[n] = _Net(n)
    return _NETS[n]


def test_o3_default_pipeline_order():
    seq = passhost.default_pipeline(3)
    names = [p.info.name for p in seq.passes]
    assert [n for n in names if n in O3_ORDER] == O3_ORDER
    fsa = seq.passes[names.index("FoldScaleAxis")]
    # "FoldConstant again after FoldScaleAxis": the FoldScaleAxis Sequential ends with it
    assert [p.info.name for p in fsa.passes] == ["BackwardFoldScaleAxis", "ForwardFoldScaleAxis", "FoldConstant"]
    # SimplifyInference needs InferType, which therefore runs first
    assert tuple(seq.passes[names.index("SimplifyInference")].info.required) == ("InferType",)
    assert "CanonicalizeOps" not in names


def test_o3_pipeline_runs_infer_type_first_and_each_pass_once():
    seen = []

    @passhost.instrument.pass_instrument
    class Record:
        def run_before_pass(self, mod, info):
            seen.append(info.name)

    x = ir.var("x", shape=(1, 2, 4, 4))
    g = ir.var("g", shape=(2,))
    mod = ir.IRModule.from_expr(ir.Function([x, g], ir.nn.batch_norm(x, g, g, g, g)[0]))
    with PassContext(opt_level=3, instruments=[Record()]):
        passhost.default_pipeline(3)(mod)
    top = [n for n in seen if n != "InferType"]
    assert seen[1:3] == ["InferType", "SimplifyInference"]
    for name in ("BackwardFoldScaleAxis", "ForwardFoldScaleAxis"):
        assert top.count(name) == 1
    assert top.index("FoldScaleAxis") < top.index("BackwardFoldScaleAxis") < top.index("ForwardFoldScaleAxis")
    assert top.count("FoldConstant") == 2  # the pipeline's own and the one inside FoldScaleAxis


def test_batch_norm_is_gone_and_scales_are_in_the_conv_weights(net):
    before = _ops_everywhere(net.before["main"])
    assert before["nn.batch_norm"] > 2 * UNITS[net.num_layers]
    unfused = net.unfused["main"]
    ops = _ops_everywhere(unfused)
    assert "nn.batch_norm" not in ops
    assert ops["nn.conv2d"] == before["nn.conv2d"]
    # no per-channel multiply between a conv and its add/relu: the only multiply left is
    # the final BN after the last residual add (it feeds the global pool, not a conv)
    multiplies = [n for n in ir.post_order(unfused) if isinstance(n, ir.Call) and n.op.name == "multiply"]
    assert len(multiplies) == 1
    assert multiplies[0].args[0].op.name == "add" and isinstance(multiplies[0].args[1], ir.Constant)
    for n in ir.post_order(unfused):
        if isinstance(n, ir.Call) and n.op.name in ("add", "nn.relu"):
            assert not any(isinstance(a, ir.Call) and a.op.name == "multiply" and
                           isinstance(a.args[0], ir.Call) and a.args[0].op.name == "nn.conv2d" for a in n.args)
    # every conv weight is a single folded constant
    for n in ir.post_order(unfused):
        if isinstance(n, ir.Call) and n.op.name == "nn.conv2d":
            assert isinstance(n.args[1], ir.Constant)


def test_conv_add_relu_are_fused(net):
    func = net.after["main"]
    prims = _primitive_functions(func)
    # the workload's batch norms have zero shifts: SimplifyExpr removes those adds, so a
    # unit's conv is fused with its relu (and with the residual add where there is one)
    fused = [f for f in prims if {"nn.conv2d", "nn.relu"} <= set(ir.count_ops(f.body))]
    assert len(fused) >= UNITS[net.num_layers]
    # every operator call of main sits inside a fused function
    top = [n for n in ir.post_order(func.body, skip=lambda e: isinstance(e, ir.Function))
           if isinstance(n, ir.Call) and isinstance(n.op, ir.Op)]
    assert top == []
    convs = sum(ir.count_ops(f.body).get("nn.conv2d", 0) for f in prims)
    assert convs == _ops_everywhere(net.before["main"])["nn.conv2d"]


def test_logits_match_the_unoptimised_network(net):
    x = np.random.RandomState(42).uniform(-1, 1, size=(1, 3, 224, 224)).astype("float32")
    want = ir.evaluate(net.before, x)
    got = ir.evaluate(net.after, x)
    assert got.shape == want.shape == (1, 1000)
    assert np.std(want) > 0
    err = np.max(np.abs(got - want)) / np.max(np.abs(want))
    assert err <= 1e-4, f"max error {err:.3g} relative to the largest logit"


def test_cli_runs_resnet50_at_o3_with_timing(tmp_path, capsys):
    out = tmp_path / "resnet50.txt"
    code = main(["run", "--example", "resnet50", "-O3", "--instrument", "timing", "-o", str(out)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report = captured.out + captured.err
    for name in ("SimplifyInference", "FoldScaleAxis", "BackwardFoldScaleAxis", "ForwardFoldScaleAxis", "FuseOps"):
        assert name in report
    text = out.read_text(encoding="utf-8")
    assert "nn.batch_norm" not in text and "Primitive=1" in text


def test_nhwc_resnet18_folds_along_the_last_axis():
    """The NHWC/HWIO network: BN scales sit on axis 3 and fold into HWIO weights (``O``
    last for the backward fold, ``I`` for the forward one)."""
    mod, params = testing.resnet(18, layout="NHWC", image_shape=(224, 224, 3))
    main_fn = ir.bind_params_by_name(mod["main"], params)
    before = ir.IRModule.from_expr(ir.Function(main_fn.params, main_fn.body.args[0]))
    with PassContext(opt_level=3, disabled_pass=["FuseOps"]):
        unfused = passhost.default_pipeline(3)(before)
    ops = ir.count_ops(unfused["main"])
    assert "nn.batch_norm" not in ops and ops["multiply"] == 1 and ops["nn.conv2d"] == 21
    with PassContext(opt_level=3):
        after = passhost.default_pipeline(3)(before)
    x = np.random.RandomState(1).uniform(-1, 1, size=(1, 224, 224, 3)).astype("float32")
    want = ir.evaluate(before, x)
    got = ir.evaluate(after, x)
    assert np.max(np.abs(got - want)) / np.max(np.abs(want)) <= 1e-4
