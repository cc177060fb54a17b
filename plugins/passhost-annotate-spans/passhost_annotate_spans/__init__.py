"""passhost plugin: the AnnotateSpans pass (see :mod:`.annotate_spans`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .annotate_spans import SOURCE_NAME, AnnotateSpans, annotate_spans

__all__ = ["AnnotateSpans", "annotate_spans", "SOURCE_NAME", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    yield PassEntry("AnnotateSpans", AnnotateSpans,
                    summary="give every node a span (line, column) in the module's printed text")
