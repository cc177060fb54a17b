from passhost import plugin
from .annotate_spans import SOURCE_NAME, AnnotateSpans, annotate_spans
plugin(AnnotateSpans, api=">=1.0,<2",
       summary="give every node a span (line, column) in the module's printed text")
