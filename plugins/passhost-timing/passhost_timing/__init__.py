from passhost import plugin
from .timing import PassTimingInstrument, TimingError
plugin(PassTimingInstrument, name="timing", api=">=1.0,<2",
       summary="time every pass, nested; render() prints TVM's profile report")
