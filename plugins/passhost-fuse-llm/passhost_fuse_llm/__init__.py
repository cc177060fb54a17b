from passhost import pass_entry, plugin
from .attention import AttentionRule, FuseAttention
from .rms_norm import FuseRMSNorm, RMSNormRule, ScaleIntoRMSNorm
from .rotary import FuseRotaryEmbedding, RotaryRule
_AT = dict(default=True, after=("SimplifyExpr",), before=("FoldScaleAxis", "EliminateCommonSubexpr", "FuseOps"))
plugin(pass_entry(FuseRMSNorm, **_AT), pass_entry(FuseRotaryEmbedding, **_AT), pass_entry(FuseAttention, **_AT),
       api=">=1.0,<2")
