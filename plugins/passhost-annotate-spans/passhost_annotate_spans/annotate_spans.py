"""AnnotateSpans (TVM ``src/relay/transforms/annotate_spans.cc``): print, then parse back with spans.

Module pass, ``opt_level`` 0, not in the default pipeline. The module is printed in the
text format (constants included) and parsed again as the source ``GeneratedSource``,
recording where each node starts, exactly as TVM does it. The result is structurally
equal to the input, and every call, tuple, projection, ``let``, ``if`` and function
carries ``node.span``, a line and column in that text. Passes that leave a node alone,
or rebuild it with ``ir.with_children`` / ``Call.with_args``, keep its span, and a later
type error names it: ``... (at GeneratedSource:12:8)``. Print the module (``PrintIR``,
``--print-ir``) right after this pass to have the text the spans point into.

Before::

    def @main(%x: Tensor[(2), float32]) {
      %0 = add(%x, 1f);
      multiply(%0, 2f)
    }

After ``AnnotateSpans()`` the same module, with ``span``\\ s::

    add(%x, 1f)         .span == Span("GeneratedSource", 3, 8)
    multiply(%0, 2f)    .span == Span("GeneratedSource", 4, 3)
"""
from __future__ import annotations

from passhost import ir
from passhost.transform import module_pass

__all__ = ["AnnotateSpans", "annotate_spans", "SOURCE_NAME"]

#: the source name of the printed text, as TVM names it
SOURCE_NAME = "GeneratedSource"


@module_pass(opt_level=0, name="AnnotateSpans", preserves_types=True)
def annotate_spans(mod: ir.IRModule, ctx) -> ir.IRModule:
    """Give every node a span in the module's printed text (TVM's AnnotateSpans)."""
    out = ir.parse(mod.astext(show_meta_data=True), source_name=SOURCE_NAME, spans=True)
    out.attrs.update(mod.attrs)
    return out


def AnnotateSpans():  # noqa: N802  (TVM's name: relay.transform.AnnotateSpans())
    """The AnnotateSpans pass (module pass, opt_level 0)."""
    return annotate_spans
