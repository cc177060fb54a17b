"""The core operators, registered on import of :mod:`passhost.ir`.

Modules: :mod:`.elemwise` (unary, binary, comparisons, ``where``, ``cast``,
``clip``, ``shape_of``, ``annotation.stop_fusion``), :mod:`.transform`
(``reshape``, ``transpose``, ``expand_dims``, ``squeeze``, ``concatenate``,
``split``, ``nn.batch_flatten``), :mod:`.indexing` (``strided_slice take gather
broadcast_to tile repeat``), :mod:`.init` (``full zeros ones full_like zeros_like
ones_like``), :mod:`.reduce` (``sum mean max min prod variance argmax argmin``),
:mod:`.einsum` (``einsum``), :mod:`.signal` (``dft``), :mod:`.unpool` (``nn.max_pool2d_with_argmax nn.max_unpool2d``), :mod:`.scatter` (``gather_nd scatter_nd scatter_elements reverse_sequence``), :mod:`.nn` (``nn.conv2d nn.dense nn.bias_add nn.prelu nn.softmax nn.batch_norm nn.dropout
nn.layer_norm nn.instance_norm``), :mod:`.matmul` (``nn.matmul nn.batch_matmul``),
:mod:`.pad` (``nn.pad``), :mod:`.qnn` (``qnn.quantize qnn.dequantize qnn.conv2d qnn.dense qnn.requantize``), :mod:`.conv_transpose` (``nn.conv2d_transpose``), :mod:`.conv3d_transpose`, :mod:`.deformable` (``nn.deformable_conv2d nn.modulated_deformable_conv2d``),
:mod:`.image` (``image.resize2d``), :mod:`.grid_sample` (``image.grid_sample``), :mod:`.pool` (pooling), :mod:`.sequence` (``arange
cumsum topk one_hot ndarray_size``), :mod:`.shape` (``shape_value``: symbolic dimensions as a tensor), :mod:`.slice_like`,
:mod:`.reverse_reshape` (``contrib_reverse_reshape``), :mod:`.l2_normalize`, :mod:`.upsampling`
(``nn.upsampling nn.upsampling3d``), :mod:`.vision` (``vision.roi_align vision.roi_pool``) and :mod:`.layout`
(``layout_transform`` and the layout helpers ``parse_layout``/``layout_axes``).

Keys of :attr:`OpDef.extra <passhost.ir.OpDef>` set by core ops (read them with
``op.definition.extra.get(key)``):

``"data_layout_attr"``
    name of the attribute holding the data layout (``"data_layout"`` for
    ``nn.conv2d``, ``"layout"`` for the pools).
``"kernel_layout_attr"``
    name of the attribute holding the kernel layout (``nn.conv2d``).
``"out_layout_attr"``
    name of the attribute holding the output layout (``""`` = same as the data).
``"channel_axis_attr"``
    name of the int attribute selecting the channel / feature axis
    (``nn.bias_add``, ``nn.batch_norm``, ``nn.layer_norm``, ``nn.instance_norm``, ``nn.softmax``).
``"layout_attrs"``
    ``("src_layout", "dst_layout")`` for ``layout_transform``.
``"layout_agnostic"``
    ``True`` for unary element-wise ops whose result does not depend on the layout.
"""
from __future__ import annotations

from . import attention, conv3d_transpose, conv_transpose, deformable, einsum, elemwise, grid_sample, image, indexing, init, l2_normalize, layout, matmul, nn, pad, pool, qnn, reduce, reverse_reshape, rms_norm, rotary, scatter, sequence, shape, signal, slice_like, transform, trilu, unpool, upsampling, vision, volume  # noqa: F401,E501  (registration)
from .layout import layout_axes, parse_layout

__all__ = ["layout_axes", "parse_layout"]
