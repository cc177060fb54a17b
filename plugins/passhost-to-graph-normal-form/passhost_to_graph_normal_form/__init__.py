from passhost import plugin
from .to_graph_normal_form import ToGraphNormalForm, to_graph_normal_form
plugin(ToGraphNormalForm, api=">=1.0,<2",
       summary="remove let bindings: substitute each value for its variable (implicit sharing)")
