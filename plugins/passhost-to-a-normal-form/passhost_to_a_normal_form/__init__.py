from passhost import plugin
from .to_a_normal_form import ToANormalForm, to_a_normal_form, to_a_normal_form_function
plugin(ToANormalForm, api=">=1.0,<2",
       summary="bind every sub-expression with let, each in the lowest scope covering its uses")
