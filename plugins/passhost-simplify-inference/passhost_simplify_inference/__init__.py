from passhost import plugin
from .simplify_inference import SimplifyInference, simplify_inference
plugin(SimplifyInference, api=">=1.0,<2", default=True, before=("FoldConstant",),
       summary="replace batch_norm, dropout, layer_norm and instance_norm by inference arithmetic")
