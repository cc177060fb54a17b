from passhost import plugin
from .report import PassReport, ReportInstrument
plugin(ReportInstrument, name="report", api=">=1.0,<2",
       summary="per pass: ran or skipped and why, changed?, wall time, op-count delta")
