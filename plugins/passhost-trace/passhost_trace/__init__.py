from passhost import plugin
from .trace import PassTraceInstrument, TraceError
plugin(PassTraceInstrument, name="trace", api=">=1.0,<2",
       summary="Chrome trace-event JSON of every pass, nested (path=FILE; open in Perfetto)")
