from passhost import plugin
from .inline import Inline, inline, inline_call
plugin(Inline, api=">=1.0,<2", summary="inline global functions marked Inline=1 (TVM's InlineGlobals)")
