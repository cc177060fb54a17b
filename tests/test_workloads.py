"""passhost.testing workloads: the tutorial example, ResNet and benchmark chains."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from passhost import ir, testing
from passhost.errors import IRError

SEEDS = Path(__file__).parent / "seeds"


def _seed_text(name: str) -> str:
    return (SEEDS / name).read_text(encoding="utf-8")


# --------------------------------------------------------------------------- example()


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_example_prints_as_the_tutorials_first_untyped_module():
    seed = _seed_text("tvm-use-pass-infra-tutorial.txt")
    # the PrintIR instrument shows the module before the first pass runs
    marker = "pass name: sequential, opt_level: 0, required passes: [] "
    start = seed.index(marker) + len(marker)
    end = seed.index("Running pass:", start)
    expected = _normalise(seed[start:end])
    assert expected.startswith("def @main(%x: Tensor[(1, 64, 56, 56), float32], %weight:")
    got = _normalise(str(ir.IRModule.from_expr(testing.example())))
    assert got == expected


def test_example_is_deterministic_and_typed_as_in_the_tutorial():
    a, b = testing.example(), testing.example()
    assert a is not b
    assert ir.structural_equal(a, b)
    mod = ir.infer_type(ir.IRModule.from_expr(a))
    assert mod["main"].ret_type == ir.TensorType((1, 64, 54, 54), "float32")
    assert [p.name_hint for p in mod["main"].params] == ["x", "weight"]
    assert ir.count_ops(mod["main"]) == {"add": 5, "multiply": 1, "nn.conv2d": 1}
    consts = {id(n): n for n in ir.post_order(mod["main"]) if type(n) is ir.Constant}
    big = [c for c in consts.values() if c.data.shape == (1, 64, 54, 54)]
    assert len(big) == 1  # one constant object, shared by three uses
    assert big[0].dtype == "float32" and np.all(np.abs(big[0].data) <= 1.0)


# --------------------------------------------------------------------------- resnet()


@pytest.fixture(scope="module")
def resnet18():
    return testing.resnet(num_layers=18, batch_size=1, image_shape=(3, 224, 224))


def test_resnet18_params_and_ops(resnet18):
    mod, params = resnet18
    main = mod["main"]
    assert len(main.params) == 100
    assert len(params) == 99
    assert main.params[0].name_hint == "data"
    assert "data" not in params
    assert list(params) == [p.name_hint for p in main.params[1:]]
    assert ir.count_ops(main) == {
        "nn.conv2d": 21, "nn.batch_norm": 19, "nn.relu": 18, "nn.max_pool2d": 1, "add": 8,
        "nn.global_avg_pool2d": 1, "nn.batch_flatten": 1, "nn.dense": 1, "nn.bias_add": 1,
        "nn.softmax": 1,
    }
    assert main.ret_type == ir.TensorType((1, 1000), "float32")
    names = [p.name_hint for p in main.params]
    assert names[:11] == [
        "data", "bn_data_gamma", "bn_data_beta", "bn_data_moving_mean", "bn_data_moving_var",
        "conv0_weight", "bn0_gamma", "bn0_beta", "bn0_moving_mean", "bn0_moving_var",
        "stage1_unit1_bn1_gamma",
    ]
    assert names[-6:] == ["bn1_gamma", "bn1_beta", "bn1_moving_mean", "bn1_moving_var",
                          "fc1_weight", "fc1_bias"]


def test_resnet18_weight_shapes(resnet18):
    mod, params = resnet18
    shapes = {k: v.shape for k, v in params.items()}
    assert shapes["conv0_weight"] == (64, 3, 7, 7)
    assert shapes["bn_data_gamma"] == (3,)
    assert shapes["stage1_unit1_sc_weight"] == (64, 64, 1, 1)
    assert shapes["stage2_unit1_conv1_weight"] == (128, 64, 3, 3)
    assert shapes["stage2_unit1_conv2_weight"] == (128, 128, 3, 3)
    assert shapes["stage2_unit1_sc_weight"] == (128, 64, 1, 1)
    assert shapes["stage3_unit1_bn1_gamma"] == (128,)
    assert shapes["stage3_unit1_bn2_gamma"] == (256,)
    assert shapes["stage4_unit2_conv2_weight"] == (512, 512, 3, 3)
    assert shapes["bn1_moving_var"] == (512,)
    assert shapes["fc1_weight"] == (1000, 512)
    assert shapes["fc1_bias"] == (1000,)
    assert "stage1_unit2_sc_weight" not in shapes
    for p in mod["main"].params:
        if p.name_hint != "data":
            assert p.checked_type == ir.TensorType(params[p.name_hint].shape, "float32")
            assert params[p.name_hint].dtype == np.float32


def test_resnet18_xavier_initialisation(resnet18):
    _, params = resnet18
    for name, arr in params.items():
        if name.endswith("weight"):
            shape = arr.shape
            hw = float(np.prod(shape[2:])) if len(shape) > 2 else 1.0
            scale = np.sqrt(3.0 / ((shape[0] * hw + shape[1] * hw) / 2.0))
            assert np.abs(arr).max() <= scale
            assert np.abs(arr).max() > 0.5 * scale
        elif name.endswith(("gamma", "var")):
            assert np.all(arr == 1.0), name
        else:
            assert np.all(arr == 0.0), name
    # RandomState(0), drawn in parameter order: the first weight is conv0's
    rng = np.random.RandomState(0)
    scale = np.sqrt(3.0 / ((3 * 49 + 64 * 49) / 2.0))
    np.testing.assert_array_equal(params["conv0_weight"],
                                  rng.uniform(-scale, scale, (64, 3, 7, 7)).astype("float32"))
    _, again = testing.resnet(18)
    for k in params:
        np.testing.assert_array_equal(params[k], again[k])


def _seed_resnet_print() -> list:
    lines = _seed_text("tvm-pass-instrument-tutorial-zh.txt").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("fn (%data"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("} /* ty=fn"))
    return [line.strip() for line in lines[start:end + 1]]


def test_resnet18_prints_as_the_seed_line_for_line(resnet18):
    mod, _ = resnet18
    expected = _seed_resnet_print()
    got = [line.strip() for line in str(mod["main"]).splitlines()]
    assert len(expected) == 93
    assert got[:8] == expected[:8]
    assert got[-8:] == expected[-8:]
    assert got == expected


def test_resnet50_structure():
    mod, params = testing.resnet(num_layers=50)
    main = mod["main"]
    assert len(main.params) == 260 and len(params) == 259
    ops = ir.count_ops(main)
    assert ops["nn.conv2d"] == 53 and ops["nn.batch_norm"] == 51 and ops["add"] == 16
    assert params["fc1_weight"].shape == (1000, 2048)
    assert params["stage1_unit1_conv1_weight"].shape == (64, 64, 1, 1)
    assert params["stage1_unit1_conv3_weight"].shape == (256, 64, 1, 1)
    assert params["stage1_unit1_sc_weight"].shape == (256, 64, 1, 1)
    assert params["stage2_unit1_conv1_weight"].shape == (128, 256, 1, 1)
    assert params["stage4_unit3_bn3_gamma"].shape == (512,)
    text = str(main)
    # the stride sits on the first 1x1 conv of a bottleneck unit
    assert ("nn.conv2d(%" in text and
            re.search(r"%stage2_unit1_conv1_weight, strides=\[2, 2\], padding=\[0, 0, 0, 0\], "
                      r"channels=128, kernel_size=\[1, 1\]", text))


@pytest.mark.parametrize("layers,units", [(34, 16), (101, 33), (152, 50)])
def test_deeper_resnets(layers, units):
    mod, params = testing.resnet(num_layers=layers, batch_size=2, num_classes=10)
    assert ir.count_ops(mod["main"])["add"] == units
    assert mod["main"].ret_type == ir.TensorType((2, 10), "float32")
    assert len(params) == len(mod["main"].params) - 1


def test_resnet_cifar_branches():
    # height <= 28: three stages of (n-2)/6 basic units, filters 16/16/32/64, no bn0/pool
    mod, params = testing.resnet(num_layers=20, image_shape=(3, 28, 28), num_classes=10)
    ops = ir.count_ops(mod["main"])
    assert ops["add"] == 9 and "nn.max_pool2d" not in ops
    assert params["conv0_weight"].shape == (16, 3, 3, 3)
    assert params["stage3_unit3_conv2_weight"].shape == (64, 64, 3, 3)
    assert "bn0_gamma" not in params
    # >= 164 layers: bottleneck units, filters 16/64/128/256
    mod, params = testing.resnet(num_layers=164, image_shape=(3, 28, 28), num_classes=10)
    assert ir.count_ops(mod["main"])["add"] == 54
    assert params["fc1_weight"].shape == (10, 256)
    # height 32: the ImageNet configuration with the CIFAR stem (3x3 conv, no pooling)
    mod, params = testing.resnet(num_layers=18, image_shape=(3, 32, 32))
    assert params["conv0_weight"].shape == (64, 3, 3, 3)
    assert "nn.max_pool2d" not in ir.count_ops(mod["main"])
    assert mod["main"].ret_type == ir.TensorType((1, 1000), "float32")


def test_resnet_nhwc():
    mod, params = testing.resnet(num_layers=18, image_shape=(224, 224, 3), layout="NHWC")
    assert params["conv0_weight"].shape == (7, 7, 3, 64)  # HWIO
    assert params["bn0_gamma"].shape == (64,)
    assert mod["main"].ret_type == ir.TensorType((1, 1000), "float32")
    assert 'data_layout="NHWC"' in str(mod["main"])


def test_resnet_bad_configurations():
    with pytest.raises(IRError, match="num_layers=19"):
        testing.resnet(num_layers=19)
    with pytest.raises(IRError, match="CIFAR"):
        testing.resnet(num_layers=18, image_shape=(3, 28, 28))
    with pytest.raises(IRError, match="layout"):
        testing.resnet(layout="NCWH")


def test_resnet_small_runs_in_the_interpreter():
    mod, params = testing.resnet(num_layers=20, image_shape=(3, 8, 8), num_classes=5)
    func = ir.bind_params_by_name(mod["main"], params)
    assert [p.name_hint for p in func.params] == ["data"]
    x = np.random.RandomState(1).uniform(-1, 1, (1, 3, 8, 8)).astype("float32")
    out = ir.evaluate(func, x)
    assert out.shape == (1, 5)
    np.testing.assert_allclose(out.sum(), 1.0, rtol=1e-5)


# --------------------------------------------------------------------------- chain()


def test_chain_builds_deep_programs():
    mod = testing.chain(100_000)
    main = mod["main"]
    assert ir.count_ops(main) == {"add": 100_000}
    assert len(main.params) == 1
    small = testing.chain(3, op="multiply")
    assert "multiply(%1, 1f)" in str(small)
    x = np.array([1.0, 2.0], "float32")
    np.testing.assert_allclose(ir.evaluate(testing.chain(4), x), x + 2.0)
    np.testing.assert_allclose(ir.evaluate(testing.chain(3, op="negative"), x), -x)
    np.testing.assert_allclose(ir.evaluate(testing.chain(2, op="add", const=False), x), 3 * x)
    assert ir.structural_equal(testing.chain(50), testing.chain(50))


def test_chain_errors():
    with pytest.raises(IRError, match="not found"):
        testing.chain(3, op="no_such_op")
    with pytest.raises(IRError, match="n must be"):
        testing.chain(-1)
