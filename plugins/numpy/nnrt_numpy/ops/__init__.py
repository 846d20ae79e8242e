"""All operator kernels of the NumPy backend, one small module per op (or
family of ops), grouped by category.

Nothing is imported here: :data:`nnrt_numpy.op_index.OP_MODULES` maps every
(domain, op type) to its module and ``nnrt_numpy.kernel.REGISTRY`` imports a
module the first time a node of one of its ops is checked or compiled, so a
process pays only for the ops its models use.
"""
from __future__ import annotations
