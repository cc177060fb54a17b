"""passhost plugin: the ``verify-numerics`` instrument (see :mod:`.verify`)."""
from __future__ import annotations

from passhost import hookimpl
from passhost.hookspecs import InstrumentEntry

from .verify import NumericsFailure, VerifyNumerics, compare_results

__all__ = ["NumericsFailure", "VerifyNumerics", "compare_results", "passhost_register_instruments"]


#: the passhost plugin API versions this plugin works with (see passhost.compat)
PASSHOST_API = ">=1.0,<2"


@hookimpl
def passhost_register_instruments():
    return [InstrumentEntry("verify-numerics", VerifyNumerics,
                            summary="evaluate @main after every pass that changed it; name the first pass "
                                    "that changed the results")]
