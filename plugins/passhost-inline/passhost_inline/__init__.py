"""passhost plugin: the Inline pass -- TVM's ``InlineGlobals`` (see :mod:`.inline`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .inline import Inline, inline, inline_call

__all__ = ["Inline", "inline", "inline_call", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("Inline", Inline,
                      summary="inline global functions marked Inline=1 (TVM's InlineGlobals)")]
