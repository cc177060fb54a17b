"""passhost plugin: the ToANormalForm pass (see :mod:`.to_a_normal_form`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import PassEntry

from .to_a_normal_form import ToANormalForm, to_a_normal_form, to_a_normal_form_function

__all__ = ["ToANormalForm", "to_a_normal_form", "to_a_normal_form_function", "passhost_register_passes"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_passes():
    return [PassEntry("ToANormalForm", ToANormalForm,
                      summary="bind every sub-expression with let, each in the lowest scope covering its uses")]
