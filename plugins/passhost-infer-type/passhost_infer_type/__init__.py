from passhost import plugin
from .infer_type import InferType, infer_type
plugin(InferType, api=">=1.0,<2", summary="infer the type of every expression")
