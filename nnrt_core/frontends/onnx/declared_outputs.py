"""Graph outputs whose declared shapes say something the graph does not compute.

A model file declares the type of each graph output.  ONNX shape inference
(non-strict) keeps a declaration that contradicts what it infers, so a file
declaring ``float[1, seqlen]`` for an output its graph computes as
``[32, 1, 8210]`` would make every partition that writes it "return a wrong
shape".  ONNX Runtime runs such files: it merges leniently at load (a
``MergeShapeInfo`` warning) and warns at run time (``VerifyOutputSizes``).

nnrt infers the graph outputs without their declared shapes
(:func:`set_aside`) and then reconciles each declaration with what was
inferred (:func:`reconcile`):

* agreeing dimensions are kept (a declared symbol names an unknown dimension);
* a contradiction (another rank, another fixed size) is **corrected** to the
  inferred shape; the build reports a ``declared_shape_corrected`` event with
  both shapes;
* a fixed size (or a rank) only the file declares, which inference could not
  confirm, is not a fact the outputs are checked against: the output's type
  leaves it unknown and the session compares each run's output with the
  declaration, reporting a ``declared_shape_mismatch`` event (once per
  output) when they differ, as ONNX Runtime warns;
* another element type is a :class:`~nnrt_core.errors.ModelLoadError`
  (ONNX Runtime refuses such files too).

The reconciled declarations are kept on the graph
(``Graph.declared_outputs``: output name -> :class:`DeclaredOutput`) for
those reports.
"""
from __future__ import annotations

from typing import Mapping

from nnrt_core.errors import ModelLoadError
from nnrt_core.frontends.onnx.convert import type_from_proto
from nnrt_core.frontends.onnx.onnx_api import P
from nnrt_core.ir import DataType, Graph, TensorType
from nnrt_core.ir.graph import DeclaredOutput

__all__ = ["DeclaredOutput", "describe", "keep_element_types", "merge_shapes", "reconcile", "restore", "set_aside"]


def set_aside(g: P.GraphProto) -> dict[str, P.TypeProto]:
    """Take the declared types off the graph outputs of ``g`` that declare a
    shape (in place) and return them by output name."""
    saved: dict[str, P.TypeProto] = {}
    for vi in g.output:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            kept = P.TypeProto()
            kept.CopyFrom(vi.type)
            saved[vi.name] = kept
            vi.ClearField("type")
    return saved


def restore(g: P.GraphProto, saved: Mapping[str, P.TypeProto]) -> None:
    """Put the declared types :func:`set_aside` took back (inference failed: nothing to compare with)."""
    for vi in g.output:
        if vi.name in saved:
            vi.type.CopyFrom(saved[vi.name])


def keep_element_types(g: P.GraphProto, saved: Mapping[str, P.TypeProto]) -> None:
    """Give the outputs inference left untyped their declared element type
    (not their shape: inference confirmed none of it)."""
    for vi in g.output:
        if vi.name in saved and not vi.type.tensor_type.elem_type:
            vi.type.tensor_type.elem_type = saved[vi.name].tensor_type.elem_type


def reconcile(graph: Graph, saved: Mapping[str, P.TypeProto]) -> None:
    """Give each graph output of ``graph`` (typed as inferred without its
    declared shape) the reconciled type, and record on
    ``graph.declared_outputs`` the declarations it does not simply keep (see
    the module docstring)."""
    for v in graph.outputs:
        tp = saved.get(v.name)
        declared = type_from_proto(tp) if tp is not None else None
        if not isinstance(declared, TensorType) or declared.shape is None:
            continue
        computed = v.type if isinstance(v.type, TensorType) else None
        if computed is not None and DataType.UNDEFINED not in (computed.dtype, declared.dtype) \
                and computed.dtype != declared.dtype:
            raise ModelLoadError(f"graph output {v.name!r} is declared {declared} but its graph computes "
                                 f"{computed.dtype.name.lower()} ({computed})")
        dtype = declared.dtype if computed is None or computed.dtype == DataType.UNDEFINED else computed.dtype
        shape, contradicted, unverified = merge_shapes(declared.shape, None if computed is None else computed.shape)
        v.type = TensorType(dtype, shape)
        if contradicted or unverified:
            graph.declared_outputs[v.name] = DeclaredOutput(declared, v.type, contradicted)


def merge_shapes(declared: tuple, computed: tuple | None) -> tuple[tuple | None, bool, bool]:
    """(the reconciled shape, whether ``declared`` contradicts ``computed``,
    whether it says more than inference confirmed)."""
    if computed is None:  # rank unknown: the declaration is unverified, even its rank
        return None, False, True
    if len(computed) != len(declared):
        return tuple(computed), True, False
    out: list = []
    contradicted = unverified = False
    for d, c in zip(declared, computed):
        if isinstance(c, int):
            contradicted |= isinstance(d, int) and d != c
            out.append(c)
        elif isinstance(d, int):  # only the file says so
            unverified = True
            out.append(c)
        else:  # the declared symbol names an unknown dimension (or the inferred one)
            out.append(d if d is not None else c)
    return tuple(out), contradicted, unverified


def describe(name: str, entry: DeclaredOutput) -> str:
    """One line for a report: ``name``'s declaration against what the graph computes."""
    return f"graph output {name!r}: declared {entry.declared}, computed {entry.computed}"
