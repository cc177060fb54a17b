from passhost import plugin
from .print_ir import PrintIR, print_ir
plugin(PrintIR, api=">=1.0,<2", summary="print the module to stderr and return it unchanged")
