"""Converters of the recurrent layers RNN, GRU and LSTM, unrolled over the (static)
sequence as TVM's ``from_onnx`` unrolls them: per step and direction, the gates are
``nn.dense`` of the input and of the hidden state plus the biases, split and activated::

    LSTM(X: (T, B, I), W, R, B) (forward)   ->  per step t:
        %g = add(add(nn.dense(%x_t, %W), nn.dense(%h, %R)), %bias);   /* (B, 4H): i, o, f, c */
        %c = add(multiply(sigmoid(%f), %c), multiply(sigmoid(%i), tanh(%cc)));
        %h = multiply(sigmoid(%o), tanh(%c))

Every ONNX option is supported but variable ``sequence_lens`` (equal lengths are fine):
``direction`` forward/reverse/bidirectional, ``layout`` 0 and 1, ``initial_h``/``initial_c``,
peepholes ``P``, ``input_forget``, ``clip``, ``linear_before_reset`` (GRU), and the
activations Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh,
HardSigmoid, Elu, Softsign and Softplus with their ``activation_alpha``/``activation_beta``.
"""
from __future__ import annotations

import numpy as np

from passhost import ir
from passhost.errors import FormatError

from .build import call, const, drop_axes, expand_axes, static
from .convert_unary import softplus
from .table import converter
from .unroll import count_value, recurrence

#: activation -> (needs alpha, needs beta, default alpha, default beta)
_ACTIVATIONS = {"sigmoid": (0, 0), "tanh": (0, 0), "relu": (0, 0), "affine": (1, 1), "leakyrelu": (1, 0),
                "thresholdedrelu": (1, 0), "scaledtanh": (1, 1), "hardsigmoid": (1, 1), "elu": (1, 0),
                "softsign": (0, 0), "softplus": (0, 0)}
_DEFAULTS = {"leakyrelu": (0.01, 0.0), "thresholdedrelu": (1.0, 0.0), "hardsigmoid": (0.2, 0.5), "elu": (1.0, 0.0)}


def _activation(node, name: str, alpha: float, beta: float):
    dtype = node.dtype(0)

    def c(v):
        return const(v, dtype)

    def apply(x):
        if name == "sigmoid":
            return call("sigmoid", x)
        if name == "tanh":
            return call("tanh", x)
        if name == "relu":
            return call("nn.relu", x)
        if name == "affine":
            return call("add", call("multiply", x, c(alpha)), c(beta))
        if name == "leakyrelu":
            return call("nn.leaky_relu", x, alpha=alpha)
        if name == "thresholdedrelu":
            return call("where", call("greater", x, c(alpha)), x, c(0))
        if name == "scaledtanh":
            return call("multiply", c(alpha), call("tanh", call("multiply", x, c(beta))))
        if name == "hardsigmoid":
            return call("clip", call("add", call("multiply", x, c(alpha)), c(beta)), a_min=0.0, a_max=1.0)
        if name == "elu":
            return call("where", call("less", x, c(0)), call("multiply", c(alpha), call("subtract", call("exp", x), c(1))),
                        x)
        if name == "softsign":
            return call("divide", x, call("add", call("abs", x), c(1)))
        return softplus(x, c(1))
    return apply


def _activations(node, defaults: list, dirs: int) -> list:
    """Per direction, the list of activation functions (ONNX's ``activations`` with their
    alphas and betas, consumed in order by the activations that take them)."""
    names = node.attr("activations", None)
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in names] if names else defaults * dirs
    if len(names) != len(defaults) * dirs:
        raise node.error(f"activations lists {len(names)} functions, {len(defaults) * dirs} expected")
    alphas = list(node.attr("activation_alpha", []) or [])
    betas = list(node.attr("activation_beta", []) or [])
    out = []
    for name in names:
        key = name.lower()
        if key not in _ACTIVATIONS:
            raise node.error(f"activation {name!r} is not supported (supported: {', '.join(sorted(_ACTIVATIONS))})")
        a_default, b_default = _DEFAULTS.get(key, (1.0, 0.0))
        alpha = float(alphas.pop(0)) if _ACTIVATIONS[key][0] and alphas else a_default
        beta = float(betas.pop(0)) if _ACTIVATIONS[key][1] and betas else b_default
        out.append(_activation(node, key, alpha, beta))
    return [out[d * len(defaults):(d + 1) * len(defaults)] for d in range(dirs)]


def _slice(x: ir.Expr, shape: tuple, axis: int, start: int, stop: int) -> ir.Expr:
    if not static(shape):
        return call("strided_slice", x, begin=(start,), end=(stop,), strides=(1,), axes=(axis,))
    begin, end = [0] * len(shape), list(shape)
    begin[axis], end[axis] = start, stop
    return call("strided_slice", x, begin=tuple(begin), end=tuple(end), strides=(1,) * len(shape))


def _part(x: ir.Expr, shape: tuple, d: int) -> ir.Expr:
    """``x[d]`` of a per-direction input of ``shape`` ``(dirs, ...)``."""
    return drop_axes(_slice(x, shape, 0, d, d + 1), shape, [0])


def _gates(x: ir.Expr, width: int, n: int) -> list:
    """The ``n`` gate blocks of a ``(batch, n * width)`` tensor."""
    parts = call("split", x, indices_or_sections=n, axis=1)
    return [ir.TupleGetItem(parts, k) for k in range(n)]


def _run(node, n_gates: int, defaults: list, step, with_cell: bool) -> tuple:
    """Unroll ``step`` over the sequence in every direction; ONNX's outputs."""
    direction = node.attr("direction", "forward")
    direction = direction.decode() if isinstance(direction, bytes) else str(direction)
    dirs = 2 if direction == "bidirectional" else 1
    if direction not in ("forward", "reverse", "bidirectional"):
        raise node.error(f"direction {direction!r} is not forward, reverse or bidirectional")
    hidden = int(node.attr("hidden_size"))
    layout = int(node.attr("layout", 0))
    x = node.inputs[0]
    xshape = node.shape(0)
    if layout:
        x = call("transpose", x, axes=(1, 0, 2))
        xshape = (xshape[1], xshape[0], xshape[2])
    seq, batch, _ = xshape
    if seq is ir.ANY:
        raise node.error("the sequence length is unknown (?) at import")
    steps = seq  # the steps run (a dynamic length: all of them, or sequence_lens' one length)
    if node.input(4) is not None:
        lens = node.need_const(4, "sequence_lens").reshape(-1)
        if type(seq) is not int and lens.size and np.all(lens == lens[0]):
            steps = int(lens[0])  # (ONNX: the outputs after it are zeros, as the buffers start)
        elif not np.all(lens == seq):
            raise node.error("sequence_lens other than the full sequence length is not supported")
    dtype = node.dtype(0)
    acts = _activations(node, defaults, dirs)
    wshape, rshape = node.shape(1), node.shape(2)
    if type(seq) is int:
        steps_in = [drop_axes(_slice(x, xshape, 0, t, t + 1), xshape, [0]) for t in range(seq)]
    if type(batch) is int:
        zero = const(np.zeros((batch, hidden)), dtype)
    elif batch is not ir.ANY:
        zero = call("zeros", shape=(batch, hidden), dtype=dtype)
    else:  # zeros of the step's batch, whatever it is at run time
        first = call("strided_slice", x, begin=(0, 0), end=(1, 1), strides=(1, 1), axes=(0, 2))
        zero = call("multiply", call("squeeze", call("zeros_like", first), axis=(0,)),
                    const(np.zeros((1, hidden)), dtype))
    ys, hs, cs = [], [], []
    for d in range(dirs):
        w, r = _part(node.inputs[1], wshape, d), _part(node.inputs[2], rshape, d)
        bias = None
        if node.input(3) is not None:
            b = _part(node.inputs[3], node.shape(3), d)
            half = n_gates * hidden
            bias = (_slice(b, (2 * half,), 0, 0, half), _slice(b, (2 * half,), 0, half, 2 * half))
        h = _part(node.inputs[5], node.shape(5), d) if node.input(5) is not None else zero
        c = None
        if with_cell:
            c = _part(node.inputs[6], node.shape(6), d) if node.input(6) is not None else zero
        peep = _part(node.inputs[7], node.shape(7), d) if with_cell and node.input(7) is not None else None
        backward = direction == "reverse" or d == 1
        if type(seq) is not int:  # a dynamic sequence: a recursive function steps through it
            h, c, y = _recur(node, step, x, steps, seq, backward, h, c, (w, r, bias, peep, acts[d], hidden))
            ys.append(expand_axes(y, (seq, batch, hidden), [1]))
            hs.append(expand_axes(h, (batch, hidden), [0]))
            if with_cell:
                cs.append(expand_axes(c, (batch, hidden), [0]))
            continue
        order = range(seq - 1, -1, -1) if backward else range(seq)
        outs = [None] * seq
        for t in order:
            h, c = step(node, steps_in[t], h, c, w, r, bias, peep, acts[d], hidden)
            outs[t] = h
        ys.append(call("concatenate", ir.Tuple([expand_axes(o, (batch, hidden), [0, 1]) for o in outs]), axis=0))
        hs.append(expand_axes(h, (batch, hidden), [0]))
        if with_cell:
            cs.append(expand_axes(c, (batch, hidden), [0]))

    def join(parts, axis):
        return parts[0] if len(parts) == 1 else call("concatenate", ir.Tuple(parts), axis=axis)

    y, y_h = join(ys, 1), join(hs, 0)
    y_c = join(cs, 0) if with_cell else None
    if layout:
        y = call("transpose", y, axes=(2, 0, 1, 3))
        y_h = call("transpose", y_h, axes=(1, 0, 2))
        y_c = call("transpose", y_c, axes=(1, 0, 2)) if with_cell else None
    return (y, y_h, y_c) if with_cell else (y, y_h)


def _recur(node, step, x, steps, seq, backward: bool, h, c, args: tuple) -> tuple:
    """One direction over a dynamic sequence: ``(last h, last c, Y of shape (seq, batch,
    hidden))``, the step function called with the counter's position in ``x``."""
    t = ir.var("t", shape=(), dtype="int64")
    hv = ir.var("h", ir.infer_type(h).checked_type)
    cv = None if c is None else ir.var("c", ir.infer_type(c).checked_type)
    index = t
    if backward:
        index = call("subtract", call("subtract", count_value(steps), const(1, "int64")), t)
    x_t = call("take", x, index, axis=0, mode="fast")
    h1, c1 = step(node, x_t, hv, cv, *args)
    states, init, new = [hv], [h], [h1]
    if c is not None:
        states, init, new = states + [cv], init + [c], new + [c1]
    try:
        finals, (y,) = recurrence(steps, t, states, init, new, [h1], index, length=seq)
    except FormatError as err:
        raise node.error(str(err)) from None
    return finals[0], (finals[1] if c is not None else None), y


def _clip(node, x):
    limit = node.attr("clip", None)
    return x if limit is None else call("clip", x, a_min=-float(limit), a_max=float(limit))


def _pre(node, x, h, w, r, bias, n_gates, hidden) -> tuple:
    """The gate blocks of ``x W^T`` and of ``h R^T`` (biases added to the first)."""
    gx = call("nn.dense", x, w)
    gh = call("nn.dense", h, r)
    if bias is not None:
        gx = call("add", gx, bias[0])
        gh = call("add", gh, bias[1])
    return _gates(gx, hidden, n_gates), _gates(gh, hidden, n_gates)


def _rnn_step(node, x, h, c, w, r, bias, peep, acts, hidden):
    gx, gh = _pre(node, x, h, w, r, bias, 1, hidden)
    return acts[0](_clip(node, call("add", gx[0], gh[0]))), None


def _gru_step(node, x, h, c, w, r, bias, peep, acts, hidden):
    f, g = acts
    gx = call("nn.dense", x, w)
    if bias is not None:
        gx = call("add", gx, bias[0])
    xz, xr, xh = _gates(gx, hidden, 3)
    rz_r = _slice(r, (3 * hidden, hidden), 0, 0, 2 * hidden)
    r_h = _slice(r, (3 * hidden, hidden), 0, 2 * hidden, 3 * hidden)
    hzr = call("nn.dense", h, rz_r)
    b_h = None
    if bias is not None:
        hzr = call("add", hzr, _slice(bias[1], (3 * hidden,), 0, 0, 2 * hidden))
        b_h = _slice(bias[1], (3 * hidden,), 0, 2 * hidden, 3 * hidden)
    hz, hr = _gates(hzr, hidden, 2)
    z = f(_clip(node, call("add", xz, hz)))
    rr = f(_clip(node, call("add", xr, hr)))
    if int(node.attr("linear_before_reset", 0)):
        hh = call("nn.dense", h, r_h)
        if b_h is not None:
            hh = call("add", hh, b_h)
        cand = call("add", xh, call("multiply", rr, hh))
    else:
        cand = call("add", xh, call("nn.dense", call("multiply", rr, h), r_h))
        if b_h is not None:
            cand = call("add", cand, b_h)
    cand = g(_clip(node, cand))
    one = const(1, node.dtype(0))
    return call("add", call("multiply", call("subtract", one, z), cand), call("multiply", z, h)), None


def _lstm_step(node, x, h, c, w, r, bias, peep, acts, hidden):
    f, g, hact = acts
    gx, gh = _pre(node, x, h, w, r, bias, 4, hidden)
    pre = [call("add", a, b) for a, b in zip(gx, gh)]   # i, o, f, c
    p_i = p_o = p_f = None
    if peep is not None:
        p_i, p_o, p_f = (_slice(peep, (3 * hidden,), 0, k * hidden, (k + 1) * hidden) for k in range(3))
    gi = pre[0] if p_i is None else call("add", pre[0], call("multiply", p_i, c))
    i = f(_clip(node, gi))
    if int(node.attr("input_forget", 0)):
        ff = call("subtract", const(1, node.dtype(0)), i)
    else:
        gf = pre[2] if p_f is None else call("add", pre[2], call("multiply", p_f, c))
        ff = f(_clip(node, gf))
    cand = g(_clip(node, pre[3]))
    c = call("add", call("multiply", ff, c), call("multiply", i, cand))
    go = pre[1] if p_o is None else call("add", pre[1], call("multiply", p_o, c))
    o = f(_clip(node, go))
    return call("multiply", o, hact(c)), c


@converter("RNN", 7)
def _rnn(node):
    return _run(node, 1, ["Tanh"], _rnn_step, False)


@converter("GRU", 7)
def _gru(node):
    return _run(node, 3, ["Sigmoid", "Tanh"], _gru_step, False)


@converter("LSTM", 7)
def _lstm(node):
    return _run(node, 4, ["Sigmoid", "Tanh", "Tanh"], _lstm_step, True)
