from passhost import plugin
from .verify import NumericsFailure, VerifyNumerics, compare_results
plugin(VerifyNumerics, name="verify-numerics", api=">=1.0,<2", summary="evaluate @main after every pass that "
       "changed it; name the first pass that changed the results")
