"""Index-driven reads and writes with TVM's names and layouts: ``gather_nd`` and
``reverse_sequence`` (INJECTIVE), ``scatter_nd`` and ``scatter_elements`` (OPAQUE).

``gather_nd`` and ``scatter_nd`` take TVM's index layout: ``indices`` is ``(M, Y_0, ...,
Y_{K-1})``, its first axis the ``M`` coordinates of one position (ONNX puts them last;
the ONNX importer transposes). ``gather_nd(data, indices, batch_dims=B)`` is
``(Y_0, ..., Y_{K-1}, X_{B+M}, ...)``, the first ``B`` axes of ``Y`` and of the data being
batch axes. ``scatter_nd(data, indices, updates, mode)`` writes ``updates`` of shape
``(Y_0, ..., Y_{K-1}, X_M, ...)`` into a copy of ``data``; ``scatter_elements(data,
indices, updates, axis, reduction)`` writes ``updates[i][j]`` to position ``indices[i][j]``
along ``axis``. ``mode``/``reduction`` is ``update`` (a repeated position: the last
write wins), ``add``, ``mul``, ``min`` or ``max``. Negative indices count from the end::

    gather_nd(%data: (2, 3), %idx: (2, 4))            /* -> (4,): data[idx[0][k], idx[1][k]] */
    scatter_elements(%d: (3, 3), %i: (2, 3), %u: (2, 3), axis=0, reduction="add")
"""
from __future__ import annotations

import numpy as np

from ...errors import IRError, TypeInferenceError
from ..op import OpPattern
from ..types import TensorType
from ..dims import provably_unequal
from ._util import dims_differ, kernel, norm_axis, reg, shape_text, tensor_arg, unify_dim

_REDUCTIONS = ("update", "add", "mul", "min", "max")
_UFUNC = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _int_indices(op: str, t: TensorType) -> None:
    if not t.dtype.startswith(("int", "uint")):
        raise TypeInferenceError(f"{op}: the indices must be integers, got {t}")


# -- gather_nd ---------------------------------------------------------------------------
def _gather_nd_rel(types: list, attrs) -> TensorType:
    op = "gather_nd"
    data = tensor_arg(op, types, 0, "data")
    idx = tensor_arg(op, types, 1, "indices")
    _int_indices(op, idx)
    b = attrs.batch_dims
    if idx.ndim < 1:
        raise TypeInferenceError(f"{op}: the indices need at least one axis, got {idx}")
    m = idx.shape[0]
    if type(m) is not int:  # the output's rank depends on M: index_rank must say it (as in TVM)
        r = attrs.index_rank
        if r is None:
            raise TypeInferenceError(
                f"{op}: the indices {idx} have a symbolic number of coordinates M={m} (their first axis), "
                "and the output's rank depends on it: give index_rank=M")
        if provably_unequal(m, r):
            raise TypeInferenceError(f"{op}: the indices {idx} have M={m} coordinates, index_rank={r}")
        m = r
    ys = idx.shape[1:]
    batch = tuple(ys[:b])
    if b < 0 or b > len(ys) or b + m > data.ndim or (
            batch != tuple(data.shape[:b]) and any(map(dims_differ, batch, data.shape[:b]))):
        raise TypeInferenceError(f"{op}: indices {idx} (M={m}, batch_dims={b}) do not fit the data {data}")
    batch = tuple(map(unify_dim, batch, data.shape[:b]))
    return TensorType(batch + tuple(ys[b:]) + tuple(data.shape[b + m:]), data.dtype)


def _positions(data_shape: tuple, idx: np.ndarray, b: int) -> tuple:
    """Index arrays selecting, for TVM-layout ``idx`` with ``b`` batch axes, the data's
    entries (leading batch axes enumerated)."""
    m = idx.shape[0]
    ys = idx.shape[1:]
    batch = np.indices(ys[:b], sparse=False) if b else []
    coords = []
    for k in range(b):
        coords.append(np.broadcast_to(batch[k].reshape(ys[:b] + (1,) * (len(ys) - b)), ys))
    for k in range(m):
        c = idx[k].astype(np.int64)
        coords.append(np.where(c < 0, c + data_shape[b + k], c))
    return tuple(coords)


@kernel
def _gather_nd(args: list, attrs) -> np.ndarray:
    data, idx = args
    return np.ascontiguousarray(data[_positions(data.shape, idx, attrs.batch_dims)])


def _check_gather_nd(attrs) -> None:
    b = attrs.batch_dims
    if isinstance(b, bool) or not isinstance(b, int) or b < 0:
        raise IRError(f"operator gather_nd: attribute batch_dims must be an int >= 0, got {b!r}")
    r = attrs.index_rank
    if r is not None and (isinstance(r, bool) or not isinstance(r, int) or r < 0):
        raise IRError(f"operator gather_nd: attribute index_rank must be None or an int >= 0, got {r!r}")


reg("gather_nd", 2, _gather_nd_rel, _gather_nd, attrs=(("batch_dims", 0), ("index_rank", None)),
    pattern=OpPattern.INJECTIVE, attr_check=_check_gather_nd,
    summary="Gather slices of the data at the coordinates along the indices' first axis (TVM's layout).")


# -- scatter_nd ------------------------------------------------------------------------
def _scatter_rel(op: str, elements: bool):
    def rel(types: list, attrs) -> TensorType:
        data = tensor_arg(op, types, 0, "data")
        idx = tensor_arg(op, types, 1, "indices")
        upd = tensor_arg(op, types, 2, "updates")
        _int_indices(op, idx)
        if upd.dtype != data.dtype:
            raise TypeInferenceError(f"{op}: the updates {upd} must have the data's dtype ({data.dtype})")
        if elements:
            norm_axis(op, attrs.axis, data.ndim)
            if idx.ndim != upd.ndim or idx.ndim != data.ndim or any(map(dims_differ, idx.shape, upd.shape)):
                raise TypeInferenceError(f"{op}: indices {idx} and updates {upd} must have one shape and the "
                                         f"data's rank ({data})")
        else:
            m = idx.shape[0] if idx.ndim else 0
            if type(m) is not int:  # a symbolic M: the ranks say it (updates: Y..., X_M...)
                implied = idx.ndim - 1 + data.ndim - upd.ndim
                if implied < 0 or provably_unequal(m, implied):
                    raise TypeInferenceError(f"{op}: updates {upd} do not fit indices {idx} (M={m} coordinates) "
                                             f"and data {data}")
                m = implied
            want = tuple(idx.shape[1:]) + tuple(data.shape[m:])
            if idx.ndim < 1 or m > data.ndim or len(upd.shape) != len(want) or any(map(dims_differ, upd.shape, want)):
                raise TypeInferenceError(f"{op}: updates {upd} must have shape {shape_text(want)} for indices "
                                         f"{idx} and data {data}")
        return data

    rel.__name__ = f"{op}_rel"
    return rel


def _write(out: np.ndarray, where: tuple, values: np.ndarray, reduction: str) -> np.ndarray:
    if reduction == "update":
        out[where] = values
    else:
        _UFUNC[reduction].at(out, where, values)
    return out


@kernel
def _scatter_nd(args: list, attrs) -> np.ndarray:
    data, idx, upd = args
    out = np.array(data, copy=True)
    return _write(out, _positions(data.shape, idx, 0), upd, attrs.mode)


@kernel
def _scatter_elements(args: list, attrs) -> np.ndarray:
    data, idx, upd = args
    axis = attrs.axis % data.ndim
    grid = list(np.indices(idx.shape, sparse=True))
    c = idx.astype(np.int64)
    grid[axis] = np.where(c < 0, c + data.shape[axis], c)
    out = np.array(data, copy=True)
    return _write(out, tuple(grid), upd, attrs.reduction)


def _check_reduction(op: str, key: str):
    def check(attrs) -> None:
        if attrs[key] not in _REDUCTIONS:
            raise IRError(f"operator {op}: attribute {key} must be one of {', '.join(_REDUCTIONS)}, got "
                          f"{attrs[key]!r}")
    return check


reg("scatter_nd", 3, _scatter_rel("scatter_nd", False), _scatter_nd, attrs=(("mode", "update"),),
    pattern=OpPattern.OPAQUE, attr_check=_check_reduction("scatter_nd", "mode"),
    summary="Write slices of updates into a copy of the data at the coordinates along the indices' first axis.")
reg("scatter_elements", 3, _scatter_rel("scatter_elements", True), _scatter_elements,
    attrs=(("axis", 0), ("reduction", "update")), pattern=OpPattern.OPAQUE,
    attr_check=_check_reduction("scatter_elements", "reduction"),
    summary="Write updates[i][j] into a copy of the data at index indices[i][j] along an axis.")


# -- reverse_sequence --------------------------------------------------------------------
def _reverse_sequence_rel(types: list, attrs) -> TensorType:
    op = "reverse_sequence"
    data = tensor_arg(op, types, 0, "data")
    lens = tensor_arg(op, types, 1, "seq_lengths")
    _int_indices(op, lens)
    seq_axis = norm_axis(op, attrs.seq_axis, data.ndim, "seq_axis")
    batch_axis = norm_axis(op, attrs.batch_axis, data.ndim, "batch_axis")
    if seq_axis == batch_axis or lens.ndim != 1 or dims_differ(lens.shape[0], data.shape[batch_axis]):
        raise TypeInferenceError(f"{op}: seq_lengths {lens} must be one length per batch entry of {data} "
                                 f"(batch_axis={attrs.batch_axis}, seq_axis={attrs.seq_axis}, distinct)")
    return data


@kernel
def _reverse_sequence(args: list, attrs) -> np.ndarray:
    data, lens = args
    seq_axis, batch_axis = attrs.seq_axis % data.ndim, attrs.batch_axis % data.ndim
    out = np.array(data, copy=True)
    for b, n in enumerate(np.clip(lens.astype(np.int64), 0, data.shape[seq_axis])):
        src = [slice(None)] * data.ndim
        src[batch_axis], src[seq_axis] = b, slice(0, int(n))
        dst = list(src)
        dst[seq_axis] = slice(int(n) - 1, None, -1) if n else slice(0, 0)
        out[tuple(src)] = data[tuple(dst)]
    return out


reg("reverse_sequence", 2, _reverse_sequence_rel, _reverse_sequence, attrs=(("seq_axis", 1), ("batch_axis", 0)),
    pattern=OpPattern.INJECTIVE,
    summary="Reverse the first seq_lengths[b] elements along seq_axis of every batch entry b.")
