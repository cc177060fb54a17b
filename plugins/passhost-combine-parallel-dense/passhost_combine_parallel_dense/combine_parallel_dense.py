"""CombineParallelDense: dense layers that read the same input become one, split after.

Attention's query, key and value projections read one hidden state through three weight
matrices. One product of the weights side by side does the same arithmetic in one call,
and a ``split`` hands each branch its columns (TVM's pass of the name, its default-off
``to_batch=False`` form)::

    %q = nn.bias_add(nn.dense(%x, %wq), %bq);     |  %0 = nn.dense(%x, %wqkv);
    %k = nn.bias_add(nn.dense(%x, %wk), %bk);     |  %1 = nn.bias_add(%0, %bqkv);
    %v = nn.bias_add(nn.dense(%x, %wv), %bv);     |  %2 = split(%1, indices_or_sections=[64, 80], axis=2);
    (%q, %k, %v)                                  |  (%2.0, %2.1, %2.2)

The joined weights are new data, made as FoldConstant makes its results
(``passhost.weights.adopt``: past ``--weights-in-memory``, in the scratch file). A group
whose weights come to more than ``max_bytes`` (64 MiB) is left apart: the copy would cost
a model larger than memory its time and memory, and a product that large gains nothing
on a CPU from being one call instead of three.

Each output column of ``nn.dense`` is its own dot product of the same row and column, so
the rewrite computes the same sums (a matrix kernel may add a dot product's terms in
another order for another width: a difference of a few units in the last place). The weights (constants with the same input size
and dtype) are joined along their output axis, which may differ per branch (grouped-query
attention's smaller key and value). Biases join too when every branch has one, a
constant ``nn.bias_add`` along the last axis that is the product's only reader;
otherwise they stay after the split. ``to_batch=True`` is TVM's default form: 2-D inputs
and weights of one shape, stacked into one ``nn.batch_matmul``, each branch a
``squeeze`` of its slice.

The ONNX export writes the group as ``MatMul`` (+ ``Add``) + ``Split``: three products
and their adds become two or three nodes, one larger matrix product instead of three (in
onnxruntime as fast as the three, measured on Llama and Qwen2). It runs from ``-O4``, as in
TVM: ``-O3`` keeps each projection's weight under its own name, which LoRA adapters and
quantisation recipes find it by. A joined weight is named after the first branch's plus
``_folded``, as FoldConstant names what it computes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from passhost import ir
from passhost.errors import PassError
from passhost.ir.rewrite import rewrite_post_order, use_counts
from passhost.transform import function_pass
from passhost.weights import adopt

__all__ = ["CombineParallelDense", "combine_parallel_dense", "MAX_BYTES"]

#: the largest group of weights joined (see the module doc)
MAX_BYTES = 64 << 20
_DENSE_OP = ir.Op.get("nn.dense")
_DENSE = frozenset({_DENSE_OP})


def _is_function(e: ir.Expr) -> bool:
    return type(e) is ir.Function


def _key(dense: ir.Call, to_batch: bool):
    """What branches must share to combine: the input node, the weight's input size (its
    whole shape for ``to_batch``) and dtype, the output dtype; ``None`` if ``dense`` cannot."""
    x, w = dense.args
    if type(w) is not ir.Constant or w.data.ndim != 2 or not dense.has_type:
        return None
    shape = tuple(x.checked_type.shape)
    if to_batch and len(shape) != 2:
        return None
    size = w.data.shape if to_batch else w.data.shape[1]
    return (x, size, w.data.dtype.str, dense.attrs.out_dtype or "")


def _bias_of(dense: ir.Call, readers: dict, uses: dict):
    """The constant ``nn.bias_add`` along the last axis that alone reads ``dense``, or ``None``."""
    add = readers.get(dense)
    if add is None or uses.get(dense, 0) != 1 or type(add.args[1]) is not ir.Constant:
        return None
    b, nd = add.args[1].data, len(dense.checked_type.shape)
    ok = b.shape == (dense.args[1].data.shape[0],) and int(add.attrs.axis) % nd == nd - 1
    return add if ok and b.dtype == dense.args[1].data.dtype else None


def _groups(body: ir.Expr, min_num_branches: int, to_batch: bool, max_bytes: int) -> list:
    """``[(denses, biases or None)]``: the branches to combine, in the order they occur."""
    by_key: dict = {}
    readers: dict = {}
    for e in ir.post_order(body, skip=_is_function):
        if type(e) is not ir.Call or type(e.op) is not ir.Op:
            continue
        if e.op.name == "nn.dense":
            key = _key(e, to_batch)
            if key is not None:
                by_key.setdefault(key, []).append(e)
        elif e.op.name == "nn.bias_add" and type(e.args[0]) is ir.Call and e.args[0].op is _DENSE_OP:
            readers[e.args[0]] = e
    out = []
    uses = None
    for denses in by_key.values():
        if len(denses) < min_num_branches or sum(d.args[1].data.nbytes for d in denses) > max_bytes:
            continue
        biases = None
        if not to_batch:
            uses = use_counts(body) if uses is None else uses
            biases = [_bias_of(d, readers, uses) for d in denses]
            biases = None if any(b is None for b in biases) else biases
        out.append((denses, biases))
    return out


def _joined(arr: np.ndarray, sources: list) -> ir.Constant:
    """A new constant of ``arr``, named after the first of ``sources`` that has a name."""
    out = ir.Constant(adopt(arr))
    name = next((c.span for c in sources if c.span is not None and c.span.name), None)
    if name is not None:
        ir.set_span(out, ir.Span(name.source, name=name.name + ("" if name.name.endswith("_folded") else "_folded")))
    return out


def _combined(x: ir.Expr, denses: list, biases: Any, to_batch: bool) -> list:
    """The expressions that stand for each branch, reading ``x`` once."""
    weights = [d.args[1] for d in denses]
    ws = [w.data for w in weights]
    if to_batch:
        data = ir.concatenate([ir.expand_dims(x, axis=0)] * len(ws), axis=0)
        product = ir.nn.batch_matmul(data, _joined(np.stack(ws), weights), transpose_b=True,
                                     out_dtype=denses[0].attrs.out_dtype or "")
        parts = ir.split(product, len(ws), axis=0)
        return [ir.squeeze(ir.TupleGetItem(parts, i), axis=[0]) for i in range(len(ws))]
    out = ir.nn.dense(x, _joined(np.concatenate(ws, axis=0), weights), out_dtype=denses[0].attrs.out_dtype or "")
    if biases is not None:
        shifts = [b.args[1] for b in biases]
        out = ir.nn.bias_add(out, _joined(np.concatenate([c.data for c in shifts]), shifts), axis=-1)
    cuts = np.cumsum([w.shape[0] for w in ws])[:-1].tolist()
    parts = ir.split(out, [int(c) for c in cuts], axis=len(denses[0].checked_type.shape) - 1)
    return [ir.TupleGetItem(parts, i) for i in range(len(ws))]


def combine_parallel_dense(func: ir.Function, mod: Any = None, min_num_branches: int = 3,
                           to_batch: bool = False, max_bytes: int = MAX_BYTES) -> ir.Function:
    """``func`` with each group of ``min_num_branches`` or more dense layers reading the
    same input combined (see the module doc); ``func`` itself when there is none."""
    if not ir.calls_any(func, _DENSE):  # (remembered per function: mostly no walk)
        return func
    groups = _groups(func.body, min_num_branches, to_batch, max_bytes)
    if not groups:
        return func
    branch: dict = {}  # a branch's last node (its bias_add, else its dense) -> (group, index)
    for g, (denses, biases) in enumerate(groups):
        for i, node in enumerate(biases or denses):
            branch[node] = (g, i)
    made: dict = {}

    def rewrite(new: ir.Call, old: ir.Call):
        at = branch.get(old)
        if at is None:
            return None
        g, i = at
        if g not in made:
            denses, biases = groups[g]
            x = new.args[0].args[0] if biases is not None else new.args[0]
            made[g] = _combined(x, denses, biases, to_batch)
        return made[g][i]

    body = rewrite_post_order(func.body, rewrite, only={ir.Op.get("nn.dense"), ir.Op.get("nn.bias_add")},
                              with_original=True, skip=_is_function, type_like=True, mod=mod)
    return ir.with_children(func, tuple(func.params) + (body,))


@function_pass(opt_level=4, name="CombineParallelDense", required=["InferType"], preserves_types=True)
class CombineParallelDense:
    """Combine dense layers that read the same input into one, split after.

    Function pass, ``opt_level`` 4 as in TVM (``-O4``; ``-O3`` keeps the projections'
    own weights: names that adapters and quantisation recipes look for, no copies), requires
    ``InferType``. Before / after (``nn.dense`` weights ``(16, 8)``, ``(4, 8)``, ``(4, 8)``)::

        %0 = nn.dense(%x, %wq);    |  %0 = nn.dense(%x, %wqkv);
        %1 = nn.dense(%x, %wk);    |  %1 = split(%0, indices_or_sections=[16, 20], axis=1);
        %2 = nn.dense(%x, %wv);    |  (%1.0, %1.1, %1.2)
        (%0, %1, %2)               |

    :param min_num_branches: the fewest dense layers on one input worth combining (TVM's 3)
    :param to_batch: TVM's form: stack 2-D branches whose weights have one shape into one
        ``nn.batch_matmul``; passhost's default (``False``) joins the weights side by side,
        for inputs of any rank and branches of different widths
    :param max_bytes: a group whose weights are larger is left apart (passhost's; 64 MiB)
    """

    def __init__(self, min_num_branches: int = 3, to_batch: bool = False, max_bytes: int = MAX_BYTES) -> None:
        if type(min_num_branches) is not int or min_num_branches < 2:
            raise PassError(f"CombineParallelDense: min_num_branches must be an int >= 2, got {min_num_branches!r}",
                            "CombineParallelDense")
        self.min_num_branches = min_num_branches
        self.to_batch = bool(to_batch)
        self.max_bytes = int(max_bytes)

    def transform_function(self, func: ir.Function, mod: Any, ctx: Any) -> ir.Function:
        return combine_parallel_dense(func, mod, self.min_num_branches, self.to_batch, self.max_bytes)
