from passhost import plugin
from .print_ir import PrintIRError, PrintIRInstrument
plugin(PrintIRInstrument, name="print-ir", api=">=1.0,<2",
       summary="print or dump the IR around passes (default: after each change; diff=True)")
