"""The model zoo the onnx wheel ships (``onnx/backend/test/data/light``), made numeric.

Its nine CNNs hold constant weight fills (``ConstantOfShape``), so their outputs are
degenerate; :func:`reseed` gives every weight seeded random values (and BatchNorm sane
statistics). Tests and ``benchmarks/`` use it::

    model = reseed(onnx.load(light_path("resnet50")))
"""
from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import numpy_helper

__all__ = ["LIGHT", "MODELS", "light_path", "reseed"]

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet",
          "squeezenet", "vgg19", "zfnet512")


def light_path(name: str) -> str:
    """The path of model ``name`` (one of :data:`MODELS`) in the onnx wheel."""
    return os.path.join(LIGHT, f"light_{name}.onnx")


def reseed(model, seed: int = 0):
    """Every ``ConstantOfShape`` weight fill becomes a seeded random initializer (He-style
    scale, so activations neither vanish nor explode); BatchNorm gets positive variances."""
    rng = np.random.RandomState(seed)
    g = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    roles = {}
    for n in g.node:
        if n.op_type == "BatchNormalization":
            roles.update(zip(n.input[1:5], ("scale", "bias", "mean", "var")))
    keep, new = [], []
    for n in g.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in inits:
            shape = tuple(int(x) for x in inits[n.input[0]])
            role = roles.get(n.output[0])
            if role in ("scale", "var"):
                arr = rng.uniform(0.5, 1.5, shape)
            elif role in ("bias", "mean"):
                arr = rng.uniform(-0.1, 0.1, shape)
            else:
                fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
                arr = rng.normal(0.0, 1.0 / np.sqrt(max(fan_in, 1)), shape)
            new.append(numpy_helper.from_array(arr.astype(np.float32), n.output[0]))
        else:
            keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    g.initializer.extend(new)
    return model
