from passhost import plugin
from .remove_unused_functions import RemoveUnusedFunctions, reachable_functions, remove_unused_functions
plugin(RemoveUnusedFunctions, api=">=1.0,<2",
       summary="drop global functions not reachable from the entry functions")
