from passhost import plugin
from passhost.hookspecs import Option
from .convert_layout import ConvertLayout, convert_layout_function, expand_primal, normalize_desired_layouts
plugin(ConvertLayout, api=">=1.0,<2",
       summary="run conv2d (and neighbours) in desired layouts with layout_transform at the edges",
       options=(Option("desired_layouts", dict, required=True, doc="{op name: [data_layout, kernel_layout or "
                       "'default']}, e.g. {'nn.conv2d': ['NHWC', 'HWIO']}"),))
