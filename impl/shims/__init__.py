"""Stand-ins for small pure helpers of inference engines, offered to file targets.

A file target is compiled without running its module's imports; a name it imports
from an engine module is taken from here when the import names a module the shim
stands for (``STANDS_FOR`` of each shim module). See ``oracles/targets/source.py``.
"""
