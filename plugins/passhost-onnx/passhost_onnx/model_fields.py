"""What the user wrote around the graph, kept through a round trip: metadata, doc strings,
the producer, the graph's name, opset imports and the weights' external-data layout.

The import records them in the module's attributes (``mod.attrs["onnx.<field>"]``, plain
values, so they print and survive every pass); the export writes them back. passhost is
the new producer; the original one is kept in ``metadata_props``::

    producer_name: "pytorch" 2.13.0       ->  producer_name: "passhost" 0.1.0,
                                               metadata_props["passhost.original_producer"] =
                                               "pytorch 2.13.0"
"""
from __future__ import annotations

from typing import Any, Mapping

import onnx

__all__ = ["record_model_fields", "keep_model_fields", "external_layout", "ORIGINAL_PRODUCER"]

#: the metadata key of the producer of the model passhost read
ORIGINAL_PRODUCER = "passhost.original_producer"


def record_model_fields(model: onnx.ModelProto, attrs: Any) -> None:
    """Put ``model``'s own fields into the module attributes ``attrs``."""
    graph = model.graph
    if model.metadata_props:
        attrs["onnx.metadata_props"] = tuple((p.key, p.value) for p in model.metadata_props)
    for key, value in (("doc_string", model.doc_string), ("graph_doc_string", graph.doc_string),
                       ("graph_name", graph.name), ("domain", model.domain)):
        if value:
            attrs[f"onnx.{key}"] = value
    if model.model_version:
        attrs["onnx.model_version"] = int(model.model_version)
    producer = " ".join(x for x in (model.producer_name, model.producer_version) if x)
    if producer:
        attrs["onnx.producer"] = producer
    attrs["onnx.opset_imports"] = tuple((imp.domain, int(imp.version)) for imp in model.opset_import)
    if graph.value_info:  # (the export writes its values' types back)
        attrs["onnx.value_info"] = True


def keep_model_fields(model: onnx.ModelProto, attrs: Mapping) -> None:
    """Write the fields :func:`record_model_fields` recorded back into ``model``."""
    import passhost

    model.producer_version = str(getattr(passhost, "__version__", ""))
    props = dict(attrs.get("onnx.metadata_props", ()))
    producer = attrs.get("onnx.producer")
    if producer and ORIGINAL_PRODUCER not in props and not producer.startswith("passhost"):
        props[ORIGINAL_PRODUCER] = producer
    if props:
        onnx.helper.set_model_props(model, props)
    for key, field in (("doc_string", "doc_string"), ("domain", "domain")):
        if attrs.get(f"onnx.{key}"):
            setattr(model, field, attrs[f"onnx.{key}"])
    if attrs.get("onnx.graph_doc_string"):
        model.graph.doc_string = attrs["onnx.graph_doc_string"]
    if attrs.get("onnx.graph_name"):
        model.graph.name = attrs["onnx.graph_name"]
    if attrs.get("onnx.model_version"):
        model.model_version = int(attrs["onnx.model_version"])


def external_layout(model: onnx.ModelProto) -> dict:
    """``{initializer name: location}`` of the weights ``model`` keeps in external files
    (read before the external data is loaded)."""
    out = {}
    for t in model.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            for entry in t.external_data:
                if entry.key == "location":
                    out[t.name] = entry.value
    return out
