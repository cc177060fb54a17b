"""passhost plugin: the ConvertLayout pass (see :mod:`.convert_layout`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import Option, PassEntry

from .convert_layout import ConvertLayout, convert_layout_function, expand_primal, normalize_desired_layouts

__all__ = ["ConvertLayout", "convert_layout_function", "expand_primal", "normalize_desired_layouts",
           "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("ConvertLayout", ConvertLayout,
                      summary="run conv2d (and neighbours) in desired layouts with layout_transform at the edges",
                      options=(Option("desired_layouts", dict, required=True,
                                      doc="{op name: [data_layout, kernel_layout or 'default']}, e.g. "
                                          "{'nn.conv2d': ['NHWC', 'HWIO']}"),))]
