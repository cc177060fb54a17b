"""passhost plugin: the ToGraphNormalForm pass (see :mod:`.to_graph_normal_form`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .to_graph_normal_form import ToGraphNormalForm, to_graph_normal_form

__all__ = ["ToGraphNormalForm", "to_graph_normal_form", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("ToGraphNormalForm", ToGraphNormalForm,
                      summary="remove let bindings: substitute each value for its variable (implicit sharing)")]
