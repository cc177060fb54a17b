"""Export the PyTorch models the tests import (``test_torch_exports.py``) to this directory.

Real exports, not hand-built graphs: each model is plain PyTorch (no torchvision), exported
twice, by the TorchScript exporter at opset 17 (``NAME.ts17.onnx``) and by the dynamo exporter
at opset 18 (``NAME.dynamo.onnx``, its weights in ``NAME.dynamo.onnx.data``). The files are
committed, so the tests need neither PyTorch nor this script; run it again only to change
the set (``python export_models.py --dynamic`` writes the dynamic-axes variants into
``dynamic/`` instead: see :func:`main_dynamic`, which says how and with what versions)::

    pip install torch==2.13.0 onnx onnxscript    # the CPU build
    then, from this directory:
    python export_models.py

Weights are seeded
batch-norm statistics and the affine parameters of the layer and group
norms are made non-trivial (as in a trained model), except in ``vitish``, whose layer norm
keeps PyTorch's initial ones and zeros (a freshly initialised or ``elementwise_affine=False``
norm).
"""
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

warnings.filterwarnings("ignore")
torch.manual_seed(0)
torch.backends.mha.set_fastpath_enabled(False)  # (else the TorchScript exporter meets _transformer_encoder_layer_fwd)
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


class SmallResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU())
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.c1 = nn.Conv2d(16, 16, 3, 1, 1, bias=False)
        self.b1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 16, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(16)
        self.down = nn.Sequential(nn.Conv2d(16, 32, 1, 2, bias=False), nn.BatchNorm2d(32))
        self.c3 = nn.Conv2d(16, 32, 3, 2, 1, bias=False)
        self.b3 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(self.stem(x))
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        x = F.relu(x + y)
        x = F.relu(self.b3(self.c3(x)) + self.down(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class MobileBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, 2, 1)
        self.dw = nn.Conv2d(16, 16, 3, 1, 1, groups=16)
        self.bn = nn.BatchNorm2d(16)
        self.se1 = nn.Conv2d(16, 4, 1)
        self.se2 = nn.Conv2d(4, 16, 1)
        self.pw = nn.Conv2d(16, 24, 1)
        self.bn2 = nn.BatchNorm2d(24)
        self.head = nn.Linear(24, 5)

    def forward(self, x):
        x = F.hardswish(self.stem(x))
        y = F.relu6(self.bn(self.dw(x)))
        s = F.adaptive_avg_pool2d(y, 1)
        s = F.hardsigmoid(self.se2(F.relu(self.se1(s))))
        y = y * s
        y = self.bn2(self.pw(y))
        y = y.mean((2, 3))
        return F.log_softmax(self.head(F.dropout(y, 0.2, self.training)), -1)


class TinyTransformer(nn.Module):
    def __init__(self, vocab=100, d=32, heads=4, layers=2, seq=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, 64, dropout=0.0, batch_first=True, activation="gelu")
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab)

    def forward(self, ids):
        x = self.emb(ids) + self.pos
        return self.out(self.norm(self.enc(x)))


class CausalLM(nn.Module):
    """A GPT-style block written by hand: causal mask from triu, masked_fill, softmax, einsum."""
    def __init__(self, vocab=50, d=32, heads=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
        self.h = heads
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        b, t = ids.shape
        x = self.emb(ids)
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        q = q.view(b, t, self.h, -1).transpose(1, 2)
        k = k.view(b, t, self.h, -1).transpose(1, 2)
        v = v.view(b, t, self.h, -1).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = torch.einsum("bhts,bhsd->bhtd", att, v).transpose(1, 2).reshape(b, t, -1)
        x = x + self.proj(y)
        x = x + self.mlp(self.ln2(x))
        return self.head(x)


class SDPA(nn.Module):
    def __init__(self, d=32, heads=4):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.h = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)


class RNNs(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(32, 12, batch_first=True)
        self.fc = nn.Linear(12, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        y, h = self.gru(y)
        return self.fc(y[:, -1]) + self.fc(h[-1])


class UNetish(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.g1 = nn.GroupNorm(2, 8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.g2 = nn.GroupNorm(4, 16)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.c3 = nn.Conv2d(16, 8, 3, padding=1)
        self.out = nn.Conv2d(8, 1, 1)

    def forward(self, x):
        a = F.silu(self.g1(self.c1(x)))
        b = F.silu(self.g2(self.c2(a)))
        u = self.up(b) + F.interpolate(b[:, :8], scale_factor=2, mode="bilinear", align_corners=False)
        y = F.silu(self.c3(torch.cat([a, u], 1)))
        return torch.sigmoid(self.out(F.pad(y, (1, 1, 1, 1), mode="reflect")))


class ViTish(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 8, 8)
        self.cls = nn.Parameter(torch.randn(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, 17, d) * 0.02)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        p = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), p], 1) + self.pos
        y, _ = self.attn(self.ln(x), self.ln(x), self.ln(x), need_weights=False)
        return self.head((x + y)[:, 0])


class Audio1D(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(1, 8, 9, stride=2, padding=4)
        self.bn = nn.BatchNorm1d(8)
        self.c2 = nn.Conv1d(8, 8, 3, padding=2, dilation=2)
        self.ps = nn.PixelShuffle(2)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        y = F.gelu(self.bn(self.c1(x)))
        y = F.max_pool1d(F.leaky_relu(self.c2(y), 0.1), 2)
        z = y.reshape(1, 8, 4, -1)[:, :, :, :4]
        z = self.ps(z)
        top = torch.topk(y, 3, dim=-1).values.sum(-1)
        return self.fc(top) + z.mean() + torch.cumsum(y, -1)[..., -1].mean()


class Conv3dNet(nn.Module):
    """3-D convolution, batch norm, PReLU, max pooling."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv3d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm3d(4)
        self.p = nn.PReLU(4)

    def forward(self, x):
        return F.max_pool3d(self.p(self.bn(self.c(x))), 2).flatten(1)

class TensorOps(nn.Module):
    """roll, flip, stack, where, argmax, gather, normalize, clamp, cumsum, sort."""

    def forward(self, x):
        a = torch.roll(x, 1, dims=-1) + torch.flip(x, [1])
        b = torch.stack([a, x], 0).sum(0)
        c = torch.where(b > 0, b, torch.zeros_like(b)).argmax(-1)
        d = torch.gather(x, 2, c.unsqueeze(-1).expand(-1, -1, 3))
        return F.normalize(d, dim=-1), torch.clamp(x, -0.5, 0.5).cumsum(1), torch.sort(x, -1).values

class Decoder(nn.Module):
    """A transformer decoder layer with a causal mask."""

    def __init__(self):
        super().__init__()
        self.d = nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, batch_first=True)

    def forward(self, tgt, mem):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        return self.d(tgt, mem, tgt_mask=mask)

class ImageOps(nn.Module):
    """Instance norm, nearest upsampling, dilated conv, adaptive pooling, grid sample, unfold, ELU."""

    def __init__(self):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(3, affine=True)
        self.c = nn.Conv2d(3, 4, 3, dilation=2, padding=2, groups=1)

    def forward(self, x, g):
        y = F.interpolate(self.inorm(x), scale_factor=2, mode="nearest")
        y = F.adaptive_avg_pool2d(self.c(y), (4, 4))
        z = F.grid_sample(x, g, align_corners=False)
        u = F.unfold(x, 2, stride=2)
        return F.elu(y), z, u

class EmbedGLU(nn.Module):
    """Embedding, a layer norm over two axes, GLU, softplus."""

    def __init__(self):
        super().__init__()
        self.e = nn.Embedding(20, 8)
        self.ln = nn.LayerNorm([4, 8])
        self.l = nn.Linear(8, 16)

    def forward(self, ids):
        x = self.ln(self.e(ids))
        return F.glu(self.l(x), -1).mean(1), F.softplus(x).max(-1).values
MODELS = {
    "small_resnet": (SmallResNet, lambda: (torch.randn(1, 3, 64, 64),)),
    "mobile_block": (MobileBlock, lambda: (torch.randn(1, 3, 32, 32),)),
    "tiny_transformer": (TinyTransformer, lambda: (torch.randint(0, 100, (2, 16)),)),
    "causal_lm": (CausalLM, lambda: (torch.randint(0, 50, (1, 12)),)),
    "sdpa": (SDPA, lambda: (torch.randn(2, 10, 32),)),
    "rnns": (RNNs, lambda: (torch.randn(2, 7, 8),)),
    "unetish": (UNetish, lambda: (torch.randn(1, 3, 32, 32),)),
    "vitish": (ViTish, lambda: (torch.randn(2, 3, 32, 32),)),
    "audio1d": (Audio1D, lambda: (torch.randn(1, 1, 128),)),
    "conv3d": (Conv3dNet, lambda: (torch.randn(1, 2, 6, 6, 6),)),
    "tensor_ops": (TensorOps, lambda: (torch.randn(2, 4, 5),)),
    "decoder": (Decoder, lambda: (torch.randn(2, 5, 16), torch.randn(2, 7, 16))),
    "image_ops": (ImageOps, lambda: (torch.randn(1, 3, 8, 8), torch.rand(1, 5, 5, 2) * 2 - 1)),
    "embed_glu": (EmbedGLU, lambda: (torch.randint(0, 20, (2, 4)),)),
}

def randomize_norms(m, affine=True):
    for mod in m.modules():
        with torch.no_grad():
            if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
            if affine and isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm)):
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)


def main() -> None:
    for name, (cls, inputs) in MODELS.items():
        m = cls().eval()
        randomize_norms(m, affine=name != "vitish")
        args = inputs()
        for tag, kw in (("ts17", dict(dynamo=False, opset_version=17)), ("dynamo", dict(dynamo=True, opset_version=18))):
            path = os.path.join(OUT, f"{name}.{tag}.onnx")
            try:
                with torch.no_grad():
                    torch.onnx.export(m, args, path, input_names=[f"in{i}" for i in range(len(args))], **kw)
                print("ok  ", path, os.path.getsize(path))
            except Exception as e:
                print("FAIL", path, type(e).__name__, str(e).splitlines()[0][:200])


# --- The dynamic-axes variants -----------------------------------------------------------------
#: For each model, per input, the axes that are dynamic and their names, the same names in both
#: exports. An axis left out stays static because the model fixes it:
#:
#: - ``tiny_transformer``: the sequence (learned positions of shape (1, 16, d) are added);
#: - ``vitish``: height and width (17 learned positions: a 4 x 4 grid of 8 x 8 patches and the
#:   class token);
#: - ``embed_glu``: the sequence (``LayerNorm([4, 8])`` normalises over it);
#: - ``audio1d``: the batch (``reshape(1, 8, 4, -1)`` is written for one sample); its length is
#:   dynamic but must be a multiple of 16 and at least 64 (the reshape and the ``[..., :4]``);
#: - and, for one exporter only, the axes of :data:`DYNAMIC_STATIC` (``rnns``, ``decoder`` and
#:   ``image_ops``).
#:
#: ``unetish`` accepts even heights and widths only (its skip connection concatenates the input
#: resolution with the up-sampled half resolution).
DYNAMIC = {
    "small_resnet": ({0: "batch", 2: "height", 3: "width"},),
    "mobile_block": ({0: "batch", 2: "height", 3: "width"},),
    "tiny_transformer": ({0: "batch"},),
    "causal_lm": ({0: "batch", 1: "seq"},),
    "sdpa": ({0: "batch", 1: "seq"},),
    "rnns": ({0: "batch", 1: "seq"},),
    "unetish": ({0: "batch", 2: "height", 3: "width"},),
    "vitish": ({0: "batch"},),
    "audio1d": ({2: "length"},),
    "conv3d": ({0: "batch", 2: "depth", 3: "height", 4: "width"},),
    "tensor_ops": ({0: "batch", 1: "seq", 2: "features"},),
    "decoder": ({0: "batch", 1: "tgt_seq"}, {0: "batch", 1: "mem_seq"}),
    "image_ops": ({0: "batch", 2: "height", 3: "width"}, {0: "batch", 1: "grid_h", 2: "grid_w"}),
    "embed_glu": ({0: "batch"},),
}

#: (model, exporter) -> the axes of :data:`DYNAMIC` that this exporter leaves static, and why (each
#: found by the onnxruntime check or by the exporter; the other axes of the model stay dynamic)
DYNAMIC_STATIC = {
    ("rnns", "dynamo"): {
        "axes": ("seq",),
        "why": "the exporter's LSTM and GRU reshape with the example's sequence length (7) as a constant, so "
               "any other length fails in onnxruntime (Reshape of {5,1,2,16} to {7,-1,32}); the batch is fine",
    },
    ("decoder", "ts17"): {
        "axes": ("tgt_seq", "mem_seq"),
        "why": "the trace of nn.MultiheadAttention (self- and cross-attention) keeps the example's sequence "
               "lengths in its Reshape targets, so another length fails in onnxruntime; the batch is fine",
    },
    ("image_ops", "ts17"): {
        "axes": ("height", "width"),
        "why": "adaptive_avg_pool2d to (4, 4) needs a static input size (the exporter raises 'input size "
               "not accessible'); the batch and the grid's size are dynamic",
    },
    ("image_ops", "dynamo"): {
        "axes": ("height", "width"),
        "why": "adaptive_avg_pool2d to (4, 4) is written as an AveragePool with the example's kernel and "
               "stride (4): at height 10 it gives 5 x 5, silently wrong; the batch and the grid are dynamic",
    },
}

#: the sizes each dynamic axis is checked at in onnxruntime (three per axis; the sequence lengths
#: are neither 1 nor powers of two); per-model entries override the default
DYNAMIC_VALUES = {
    "batch": (1, 3, 5),
    "seq": (5, 7, 11),
    "tgt_seq": (5, 7, 11),
    "mem_seq": (6, 9, 13),
    "features": (3, 6, 9),
    "grid_h": (3, 5, 7),
    "grid_w": (3, 6, 7),
    "small_resnet": {"height": (40, 56, 72), "width": (40, 56, 72)},
    "mobile_block": {"height": (24, 40, 45), "width": (24, 40, 45)},
    "unetish": {"height": (24, 40, 46), "width": (24, 40, 46)},
    "audio1d": {"length": (80, 112, 176)},
    "conv3d": {"depth": (5, 7, 10), "height": (5, 7, 10), "width": (5, 7, 10)},
    "image_ops": {"height": (6, 10, 12), "width": (6, 10, 12)},
}

#: ``torch.export.Dim`` bounds where an axis has to be constrained (the default is 1..4096)
DYNAMIC_DIMS = {
    ("audio1d", "length"): lambda: 16 * torch.export.Dim("length_div16", min=4, max=256),
    ("unetish", "height"): lambda: 2 * torch.export.Dim("half_height", min=2, max=2048),
    ("unetish", "width"): lambda: 2 * torch.export.Dim("half_width", min=2, max=2048),
}

#: integer inputs are token ids below the model's vocabulary size
_VOCAB = {"tiny_transformer": 100, "causal_lm": 50, "embed_glu": 20}


def _values(name: str, dim: str) -> tuple:
    return DYNAMIC_VALUES.get(name, {}).get(dim) or DYNAMIC_VALUES[dim]


def _bindings(name: str, axes) -> list:
    """The bindings checked: every combination when there are at most 27, else a sweep of each
    axis over its three values with the others at their middle value, and three rotations."""
    import itertools

    dims = sorted({d for per_input in axes for d in per_input.values()})
    values = {d: _values(name, d) for d in dims}
    combos = list(itertools.product(*(values[d] for d in dims)))
    if len(combos) <= 27:
        return [dict(zip(dims, c)) for c in combos]
    out = []
    for d in dims:
        for v in values[d]:
            out.append({e: (v if e == d else values[e][1]) for e in dims})
    for i in range(3):
        out.append({e: values[e][(i + j) % 3] for j, e in enumerate(dims)})
    unique = []
    for b in out:
        if b not in unique:
            unique.append(b)
    return unique


def _make_inputs(name: str, static_args, axes, binding: dict, gen: torch.Generator) -> tuple:
    args = []
    for i, (t, per_input) in enumerate(zip(static_args, axes)):
        shape = list(t.shape)
        for axis, dim in per_input.items():
            shape[axis] = binding[dim]
        if t.dtype == torch.int64:
            args.append(torch.randint(0, _VOCAB[name], shape, generator=gen))
        elif (name, i) == ("image_ops", 1):
            args.append(torch.rand(shape, generator=gen) * 2 - 1)  # a sampling grid in [-1, 1]
        else:
            args.append(torch.randn(shape, generator=gen))
    return tuple(args)


def _flat(outputs) -> list:
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    return [t for o in outputs for t in _flat(o)]


def _check(path: str, m: nn.Module, name: str, static_args, axes) -> int:
    """Run ``path`` in onnxruntime at each binding of :func:`_bindings`; assert PyTorch's outputs."""
    import numpy as np
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    in_names = [i.name for i in sess.get_inputs()]
    gen = torch.Generator().manual_seed(1)
    bindings = _bindings(name, axes)
    for binding in bindings:
        args = _make_inputs(name, static_args, axes, binding, gen)
        with torch.no_grad():
            want = [t.numpy() for t in _flat(m(*args))]
        got = sess.run(None, {n: a.numpy() for n, a in zip(in_names, args)})
        assert len(got) == len(want), (path, binding, len(got), len(want))
        for g, w in zip(got, want):
            assert g.shape == w.shape, (path, binding, g.shape, w.shape)
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{path} {binding}")
            else:
                np.testing.assert_array_equal(g, w, err_msg=f"{path} {binding}")
    return len(bindings)


def _example(static_args, axes) -> tuple:
    """The export's example inputs: the static ones, with a batch of 2 where the batch is dynamic
    (the dynamo exporter specialises a size of 1)."""
    out = []
    for t, per_input in zip(static_args, axes):
        if 0 in per_input and t.shape[0] == 1:
            t = torch.cat([t, t], 0)
        out.append(t)
    return tuple(out)


def main_dynamic(out: str) -> None:
    """Write ``NAME.dyn.ts17.onnx`` and ``NAME.dyn.dynamo.onnx`` (+ ``.data``) into ``out``
    (``dynamic/`` beside this script by default, so that ``test_torch_exports.py``, which takes
    every ``*.onnx`` in this directory and feeds its static shapes, does not pick them up)::

        python3 -m venv /work/torchenv && . /work/torchenv/bin/activate
        pip install torch==2.13.0 onnx onnxscript onnxruntime    # 2.13.0+cpu; onnx 1.23.2,
        python export_models.py --dynamic                        # onnxscript 0.7.2, ort 1.32.0

    The models and their weights are the ones of the static set (the same seed and the same
    order of construction; checked against the committed ``NAME.ts17.onnx`` where it is present).
    The TorchScript exporter (opset 17) is given ``dynamic_axes`` with the names of
    :data:`DYNAMIC`; the dynamo exporter (opset 18) ``dynamic_shapes`` of ``torch.export.Dim`` of
    the same names (:data:`DYNAMIC_DIMS` where an axis has to be a multiple of something, which
    the file then writes as an expression such as ``16*length_div16``). Each file is then run in
    onnxruntime at three sizes per dynamic axis (:data:`DYNAMIC_VALUES`) against PyTorch's own
    outputs (``rtol=1e-4, atol=1e-5``; integer outputs exactly); a file that fails is deleted.
    """
    import numpy as np
    import onnxruntime as ort

    os.makedirs(out, exist_ok=True)
    built = []
    for name, (cls, inputs) in MODELS.items():  # exactly main()'s use of the seeded generator
        m = cls().eval()
        randomize_norms(m, affine=name != "vitish")
        built.append((name, m, inputs()))
    here = os.path.dirname(os.path.abspath(__file__))
    for name, m, static_args in built:
        static = os.path.join(here, f"{name}.ts17.onnx")
        if os.path.exists(static):  # the same weights as the static set
            sess = ort.InferenceSession(static, providers=["CPUExecutionProvider"])
            got = sess.run(None, {f"in{i}": a.numpy() for i, a in enumerate(static_args)})
            with torch.no_grad():
                want = [t.numpy() for t in _flat(m(*static_args))]
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"weights of {name}")
        axes = DYNAMIC[name]
        names = [f"in{i}" for i in range(len(static_args))]
        example = _example(static_args, axes)
        for tag in ("ts17", "dynamo"):
            frozen = DYNAMIC_STATIC.get((name, tag), {}).get("axes", ())
            use = tuple({a: d for a, d in per.items() if d not in frozen} for per in axes)
            path = os.path.join(out, f"{name}.dyn.{tag}.onnx")
            for stale in (path, path + ".data"):
                if os.path.exists(stale):
                    os.remove(stale)
            try:
                with torch.no_grad():
                    if tag == "ts17":
                        torch.onnx.export(m, example, path, input_names=names, dynamo=False, opset_version=17,
                                          dynamic_axes={n: dict(per) for n, per in zip(names, use) if per})
                    else:
                        dims = {}
                        for per in use:
                            for d in per.values():
                                if d not in dims:
                                    make = DYNAMIC_DIMS.get((name, d))
                                    dims[d] = make() if make else torch.export.Dim(d, min=1, max=4096)
                        shapes = tuple({a: dims[d] for a, d in per.items()} or None for per in use)
                        torch.onnx.export(m, example, path, input_names=names, dynamo=True, opset_version=18,
                                          dynamic_shapes=shapes)
                n = _check(path, m, name, static_args, use)
                size = os.path.getsize(path) + (os.path.getsize(path + ".data") if os.path.exists(path + ".data") else 0)
                print("ok  ", path, size, f"{n} bindings checked")
            except Exception as e:
                print("FAIL", path, type(e).__name__, str(e).splitlines()[0][:300] if str(e) else "")
                for stale in (path, path + ".data"):
                    if os.path.exists(stale):
                        os.remove(stale)


if __name__ == "__main__":
    if "--dynamic" in sys.argv[1:]:
        rest = [a for a in sys.argv[1:] if a != "--dynamic"]
        main_dynamic(rest[0] if rest else os.path.join(os.path.dirname(os.path.abspath(__file__)), "dynamic"))
    else:
        main()
