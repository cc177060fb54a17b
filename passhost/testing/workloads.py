"""Reference workloads: the pass-infra tutorial's program and TVM's ResNet.

:func:`example` is ``def example()`` of TVM's *How to Use TVM Pass Infra* tutorial;
:func:`resnet` re-creates ``tvm.relay.testing.resnet.get_workload`` node for node (same
construction order, so the printed module matches TVM's print line for line), with the
same Xavier initialisation of the parameters.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .. import ir
from ..errors import IRError
from ..ir._gc import gc_paused

__all__ = ["example", "resnet", "resnet_net", "xavier_init", "chain"]


def example() -> ir.Function:
    """The tutorial's example program (untyped; wrap it with ``IRModule.from_expr``)::

        def @main(%x: Tensor[(1, 64, 56, 56), float32], %weight: Tensor[(64, 64, 3, 3), float32]) {
          %0 = add(meta[relay.Constant][0], meta[relay.Constant][0]);
          %1 = nn.conv2d(%x, %weight, padding=[0, 0, 0, 0]);
          %2 = multiply(%0, 2f);
          %3 = add(%1, %2);
          %4 = add(%3, meta[relay.Constant][0]);
          %5 = add(%3, meta[relay.Constant][0]);
          add(%4, %5)
        }

    The tutorial fills the constant with ``np.empty`` (arbitrary memory); here it holds
    seeded uniform values in ``[-1, 1)`` so every call builds the same program.
    """
    shape = (1, 64, 54, 54)
    c_data = np.random.RandomState(0).uniform(-1.0, 1.0, size=shape).astype("float32")
    c = ir.const(c_data)
    weight = ir.var("weight", shape=(64, 64, 3, 3))
    x = ir.var("x", ir.TensorType((1, 64, 56, 56), "float32"))
    conv = ir.nn.conv2d(x, weight)
    y = ir.add(c, c)
    y = ir.multiply(y, ir.const(2, "float32"))
    y = ir.add(conv, y)
    z = ir.add(y, c)
    z1 = ir.add(y, c)
    z2 = ir.add(z, z1)
    return ir.Function([x, weight], z2)


# --------------------------------------------------------------------------- ResNet layers


def _bn(data: ir.Expr, name: str, axis: int, scale: bool = True) -> ir.Expr:
    """``layers.batch_norm_infer``: untyped parameter vars, output 0 of the tuple."""
    kwargs = {"epsilon": 2e-5}
    if axis != 1:
        kwargs["axis"] = axis
    if not scale:
        kwargs["scale"] = False
    out = ir.nn.batch_norm(data, ir.var(name + "_gamma"), ir.var(name + "_beta"),
                           ir.var(name + "_moving_mean"), ir.var(name + "_moving_var"), **kwargs)
    return out[0]


def _conv(data: ir.Expr, name: str, channels: int, kernel_size: tuple, strides: tuple,
          padding: tuple, data_layout: str, kernel_layout: str) -> ir.Expr:
    """``layers.conv2d``: an untyped ``{name}_weight`` var."""
    kwargs = {}
    if data_layout != "NCHW":
        kwargs = {"data_layout": data_layout, "kernel_layout": kernel_layout}
    return ir.nn.conv2d(data, ir.var(name + "_weight"), strides=strides, padding=padding,
                        channels=channels, kernel_size=kernel_size, **kwargs)


def _residual_unit(data: ir.Expr, num_filter: int, stride: int, dim_match: bool, name: str,
                   bottle_neck: bool, data_layout: str, kernel_layout: str) -> ir.Expr:
    axis = data_layout.index("C")
    s = (stride, stride)
    if bottle_neck:
        mid = int(num_filter * 0.25)
        act1 = ir.nn.relu(_bn(data, name + "_bn1", axis))
        conv1 = _conv(act1, name + "_conv1", mid, (1, 1), s, (0, 0), data_layout, kernel_layout)
        act2 = ir.nn.relu(_bn(conv1, name + "_bn2", axis))
        conv2 = _conv(act2, name + "_conv2", mid, (3, 3), (1, 1), (1, 1), data_layout, kernel_layout)
        act3 = ir.nn.relu(_bn(conv2, name + "_bn3", axis))
        last = _conv(act3, name + "_conv3", num_filter, (1, 1), (1, 1), (0, 0), data_layout, kernel_layout)
    else:
        act1 = ir.nn.relu(_bn(data, name + "_bn1", axis))
        conv1 = _conv(act1, name + "_conv1", num_filter, (3, 3), s, (1, 1), data_layout, kernel_layout)
        act2 = ir.nn.relu(_bn(conv1, name + "_bn2", axis))
        last = _conv(act2, name + "_conv2", num_filter, (3, 3), (1, 1), (1, 1), data_layout, kernel_layout)
    if dim_match:
        shortcut = data
    else:
        shortcut = _conv(act1, name + "_sc", num_filter, (1, 1), s, (0, 0), data_layout, kernel_layout)
    return ir.add(last, shortcut)


def _config(num_layers: int, height: int) -> tuple:
    """``get_net``: (units per stage, filter_list, bottle_neck)."""
    if height <= 28:
        if (num_layers - 2) % 9 == 0 and num_layers >= 164:
            return [(num_layers - 2) // 9] * 3, [16, 64, 128, 256], True
        if (num_layers - 2) % 6 == 0 and num_layers < 164:
            return [(num_layers - 2) // 6] * 3, [16, 16, 32, 64], False
        raise IRError(f"resnet: no CIFAR-style configuration for num_layers={num_layers}: use "
                      "6n+2 layers (< 164, basic units) or 9n+2 layers (>= 164, bottleneck units)")
    units = {18: [2, 2, 2, 2], 34: [3, 4, 6, 3], 50: [3, 4, 6, 3], 101: [3, 4, 23, 3],
             152: [3, 8, 36, 3], 200: [3, 24, 36, 3], 269: [3, 30, 48, 8]}.get(num_layers)
    if units is None:
        raise IRError(f"resnet: no configuration for num_layers={num_layers}: use one of "
                      "18, 34, 50, 101, 152, 200, 269")
    if num_layers >= 50:
        return units, [64, 256, 512, 1024, 2048], True
    return units, [64, 64, 128, 256, 512], False


def resnet_net(num_layers: int = 18, batch_size: int = 1, image_shape: tuple = (3, 224, 224),
               num_classes: int = 1000, layout: str = "NCHW", dtype: str = "float32") -> ir.Function:
    """The untyped ResNet function (``get_net``); parameters are its free variables in
    order of first occurrence (``data`` first)."""
    if layout not in ("NCHW", "NHWC"):
        raise IRError(f"resnet: layout must be 'NCHW' or 'NHWC', got {layout!r}")
    image_shape = tuple(int(d) for d in image_shape)
    if len(image_shape) != 3:
        raise IRError(f"resnet: image_shape must have 3 dimensions (C, H, W), got {image_shape}")
    height = image_shape[0] if layout == "NHWC" else image_shape[1]
    units, filter_list, bottle_neck = _config(num_layers, height)
    data_shape = (int(batch_size),) + image_shape
    kernel_layout = "OIHW" if layout == "NCHW" else "HWIO"
    axis = layout.index("C")

    data = ir.var("data", shape=data_shape, dtype=dtype)
    body = _bn(data, "bn_data", axis, scale=False)
    data_height = data_shape[1] if layout == "NHWC" else data_shape[2]
    if data_height <= 32:  # CIFAR-style stem
        body = _conv(body, "conv0", filter_list[0], (3, 3), (1, 1), (1, 1), layout, kernel_layout)
    else:
        body = _conv(body, "conv0", filter_list[0], (7, 7), (2, 2), (3, 3), layout, kernel_layout)
        body = ir.nn.relu(_bn(body, "bn0", axis))
        pool_kwargs = {} if layout == "NCHW" else {"layout": layout}
        body = ir.nn.max_pool2d(body, pool_size=(3, 3), strides=(2, 2), padding=(1, 1), **pool_kwargs)
    for i, n in enumerate(units):
        stride = 1 if i == 0 else 2
        body = _residual_unit(body, filter_list[i + 1], stride, False, f"stage{i + 1}_unit1",
                              bottle_neck, layout, kernel_layout)
        for j in range(n - 1):
            body = _residual_unit(body, filter_list[i + 1], 1, True, f"stage{i + 1}_unit{j + 2}",
                                  bottle_neck, layout, kernel_layout)
    body = ir.nn.relu(_bn(body, "bn1", axis))
    pool_kwargs = {} if layout == "NCHW" else {"layout": layout}
    body = ir.nn.global_avg_pool2d(body, **pool_kwargs)
    body = ir.nn.batch_flatten(body)
    body = ir.nn.dense(body, ir.var("fc1_weight"), units=num_classes)
    body = ir.nn.bias_add(body, ir.var("fc1_bias"), axis=-1)
    net = ir.nn.softmax(body)
    return ir.Function(ir.free_vars(net), net)


def xavier_init(name: str, shape: tuple, dtype: str, rng: np.random.RandomState) -> np.ndarray:
    """TVM's ``Xavier(rnd_type="uniform", factor_type="avg", magnitude=3)`` by name suffix:
    ``*weight`` uniform in ``±sqrt(3 / ((fan_in + fan_out) / 2))``, ``*bias``/``*beta``/
    ``*mean`` zeros, ``*gamma``/``*var`` ones."""
    arr = np.zeros(shape, dtype=dtype)
    if name.endswith("weight"):
        if len(shape) < 2:
            raise IRError(f"Xavier initialisation of {name} needs at least 2 dimensions, got {shape}")
        hw_scale = float(np.prod(shape[2:])) if len(shape) > 2 else 1.0
        fan_in, fan_out = shape[1] * hw_scale, shape[0] * hw_scale
        scale = np.sqrt(3.0 / ((fan_in + fan_out) / 2.0))
        arr[:] = rng.uniform(-scale, scale, size=shape)
    elif name.endswith("gamma") or name.endswith("var"):
        arr[:] = 1.0
    # bias, beta, mean (and anything else): zeros
    return arr


def resnet(num_layers: int = 18, batch_size: int = 1, image_shape: tuple = (3, 224, 224),
           num_classes: int = 1000, layout: str = "NCHW", dtype: str = "float32",
           seed: Optional[int] = 0) -> tuple:
    """``tvm.relay.testing.resnet.get_workload``: ``(mod, params)``.

    ``mod`` holds the type-inferred ``main``; ``params`` maps every parameter name except
    ``data`` to a numpy array (Xavier-initialised with ``RandomState(seed)``, i.e. what
    ``np.random.seed(0)`` gives TVM). The params stay free parameters of ``main``; bind
    them with :func:`passhost.ir.bind_params_by_name` if wanted.

    :param num_layers: 18, 34, 50, 101, 152, 200, 269 (ImageNet); 6n+2 / 9n+2 for
        images of height <= 28 (CIFAR style)
    """
    func = resnet_net(num_layers, batch_size, image_shape, num_classes, layout, dtype)
    mod = ir.infer_type(ir.IRModule.from_expr(func))
    rng = np.random.RandomState(seed)
    params = {}
    for p in mod["main"].params:
        if p.name_hint == "data":
            continue
        t = p.checked_type
        params[p.name_hint] = xavier_init(p.name_hint, t.shape, t.dtype, rng)
    return mod, params


_CHAIN_VALUES = {"multiply": 1.0, "divide": 1.0, "power": 1.0}


@gc_paused
def chain(n: int, op: str = "add", const: bool = True, shape: tuple = (2,),
          dtype: str = "float32", value: Optional[float] = None) -> ir.IRModule:
    """A ``main`` that applies ``op`` ``n`` times in a row, for benchmarks (built
    iteratively; 1,000,000 nodes take a few seconds)::

        def @main(%x: Tensor[(2), float32]) {
          %0 = add(%x, 1f);
          %1 = add(%0, 1f);
          ...
        }

    :param op: any registered operator taking one or two tensors (``"add"``,
        ``"multiply"``, ``"negative"``, ``"nn.relu"``, ...)
    :param const: the second operand of a binary op is one shared scalar constant;
        otherwise it is the parameter ``%x`` itself
    :param value: the constant (default 1 for multiply/divide/power, 0.5 otherwise)
    """
    if n < 0:
        raise IRError(f"chain: n must be >= 0, got {n}")
    operator = ir.Op.get(op)
    arity = operator.num_inputs
    if arity not in (1, 2):
        raise IRError(f"chain: operator {op} takes {arity} arguments; use a unary or binary operator")
    x = ir.var("x", ir.TensorType(shape, dtype))
    if value is None:
        value = _CHAIN_VALUES.get(op, 0.5)
    other = ir.const(value, dtype) if const else x
    Call = ir.Call
    e: ir.Expr = x
    if arity == 1:
        for _ in range(n):
            e = Call(operator, (e,))
    else:
        for _ in range(n):
            e = Call(operator, (e, other))
    return ir.IRModule.from_expr(ir.Function([x], e))
