"""Ops with a meaning to the engine beyond a lowering: copies between devices and the host,
reads of values, aliases, and ops whose arguments need the engine before they can be traced
(indices on the CPU, batch norm's running statistics, linalg error checks, random ops'
argument checks). Each module registers its ops with the dispatch entry by `@engine_op`
when imported.
"""
from . import aliases, argument_checks, batch_norm, copies, indexing  # noqa: F401
