"""Kernel base class and the explicit operator registry of the NumPy backend.

A kernel is built once per node at compile time from a :class:`NodeInfo` (the
node's op type, opset, decoded attributes and whatever is known statically
about its inputs) and then called once per run with numpy arrays.  All
attribute parsing and validation happens in ``__init__`` so that ``__call__``
does only arithmetic.

Adding an operator: write one small module under ``nnrt_numpy/ops/`` with a
``Kernel`` subclass per op version whose semantics changed, decorate each with
``@register``, and name the module in :data:`nnrt_numpy.op_index.OP_MODULES`:
the registry imports it the first time a node of that op is looked up.
"""
from __future__ import annotations

import importlib
import threading
from typing import Any, Callable, ClassVar, Iterable, Mapping, Sequence

import numpy as np

from nnrt_core.errors import OpError
from nnrt_core.plugin_api import FrozenRecord
from nnrt_numpy import special
from nnrt_numpy.limits import check_alloc
from nnrt_numpy.op_index import OP_MODULES

__all__ = ["NodeInfo", "Kernel", "KernelRegistry", "REGISTRY", "register"]

Shape = tuple  # tuple of int | str | None (symbolic or unknown dims)


class NodeInfo(FrozenRecord):
    """What a kernel may know about its node at compile time.

    ``attrs`` holds decoded attribute values: ``int``, ``float``, ``str``,
    ``np.ndarray`` (TENSOR), lists of those, or an IR ``Graph`` for GRAPH
    attributes.  Per-input tuples have one entry per declared input; an
    omitted optional input has ``input_present[i] == False``.
    """

    __slots__ = ("name", "op_type", "domain", "opset", "attrs", "num_inputs", "num_outputs", "input_present",
                 "input_dtypes", "input_shapes", "const_inputs", "output_dtypes", "output_shapes", "compile_subgraph")
    name: str
    op_type: str
    domain: str
    opset: int
    attrs: Mapping[str, Any]
    num_inputs: int
    num_outputs: int
    input_present: tuple[bool, ...]
    input_dtypes: tuple[np.dtype | None, ...]
    input_shapes: tuple[Shape | None, ...]
    const_inputs: tuple[np.ndarray | None, ...]
    output_dtypes: tuple[np.dtype | None, ...]
    output_shapes: tuple[Shape | None, ...]
    # Builds a callable for a GRAPH attribute: runner(inputs: list, scope: Mapping) -> list
    compile_subgraph: Callable[[Any], Callable[..., list]] | None

    def __init__(self, name: str, op_type: str, domain: str = "", opset: int = 1,
                 attrs: Mapping[str, Any] | None = None, num_inputs: int = 0, num_outputs: int = 1,
                 input_present: tuple[bool, ...] = (), input_dtypes: tuple[np.dtype | None, ...] = (),
                 input_shapes: tuple[Shape | None, ...] = (), const_inputs: tuple[np.ndarray | None, ...] = (),
                 output_dtypes: tuple[np.dtype | None, ...] = (), output_shapes: tuple[Shape | None, ...] = (),
                 compile_subgraph: Callable[[Any], Callable[..., list]] | None = None) -> None:
        put = object.__setattr__  # one call per field: this runs for every node at capability and compile
        put(self, "name", name)
        put(self, "op_type", op_type)
        put(self, "domain", domain)
        put(self, "opset", opset)
        put(self, "attrs", {} if attrs is None else attrs)
        put(self, "num_inputs", num_inputs)
        put(self, "num_outputs", num_outputs)
        put(self, "input_present", input_present)
        put(self, "input_dtypes", input_dtypes)
        put(self, "input_shapes", input_shapes)
        put(self, "const_inputs", const_inputs)
        put(self, "output_dtypes", output_dtypes)
        put(self, "output_shapes", output_shapes)
        put(self, "compile_subgraph", compile_subgraph)

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def present(self, index: int) -> bool:
        return index < len(self.input_present) and self.input_present[index]

    def const(self, index: int) -> np.ndarray | None:
        return self.const_inputs[index] if index < len(self.const_inputs) else None

    def dtype(self, index: int) -> np.dtype | None:
        return self.input_dtypes[index] if index < len(self.input_dtypes) else None

    def shape(self, index: int) -> Shape | None:
        return self.input_shapes[index] if index < len(self.input_shapes) else None


class Kernel:
    """One operator version.  Subclasses set the class variables and override
    ``_setup`` (compile time) and ``__call__`` (run time)."""

    op_type: ClassVar[str]
    domain: ClassVar[str] = ""
    since_version: ClassVar[int] = 1
    #: dtypes accepted for the first input; ``None`` accepts any.
    input_dtypes: ClassVar[frozenset[np.dtype] | None] = None
    #: True when the kernel wants the outer-scope values (control flow ops).
    needs_scope: ClassVar[bool] = False
    #: True when it calls ``nnrt_numpy.special`` (SciPy): imported at compile, not in the first run.
    uses_scipy: ClassVar[bool] = False

    def __init__(self, node: NodeInfo) -> None:
        self.node = node
        if self.uses_scipy:
            special.load()
        self._setup(node)

    # -- capability ---------------------------------------------------------
    @classmethod
    def check(cls, node: NodeInfo) -> str | None:
        """Return why this kernel cannot run ``node`` statically, or ``None``."""
        if cls.input_dtypes is not None and node.input_dtypes:
            dt = node.input_dtypes[0]
            if dt is not None and np.dtype(dt) not in cls.input_dtypes:
                allowed = ", ".join(sorted(str(d) for d in cls.input_dtypes))
                return f"{cls.op_type} does not support input dtype {np.dtype(dt)} (supported: {allowed})"
        return cls._check(node)

    @classmethod
    def _check(cls, node: NodeInfo) -> str | None:
        return None

    # -- compile / run ------------------------------------------------------
    def _setup(self, node: NodeInfo) -> None:
        """Parse and validate attributes; raise ``self.fail(...)`` on bad ones."""

    def __call__(self, *inputs: Any) -> Sequence[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def check_alloc(self, shape: Sequence[Any], dtype: Any, what: str = "output") -> None:
        """Refuse (``MemoryBudgetError``, naming this node, the shape and the
        limit) a tensor over the run's memory budget, before numpy allocates it."""
        check_alloc(self.node, shape, dtype, what)

    def fail(self, rule: str) -> OpError:
        """An :class:`OpError` naming this node, its op and the violated rule."""
        return OpError(f"node {self.node.name!r} ({self.node.op_type}): {rule}")


def dtypes(*names: Any) -> frozenset[np.dtype]:
    """Helper to spell ``input_dtypes`` sets: ``dtypes(np.float32, np.float64)``."""
    return frozenset(np.dtype(n) for n in names)


class KernelRegistry:
    """Explicit map (domain, op_type) -> kernel classes sorted by since_version.

    Kernels register themselves when their module is imported; ``index``
    (domain -> op type -> module) names the module of every op, imported on
    the first lookup of one of its ops (:data:`nnrt_numpy.op_index.OP_MODULES`).
    """

    def __init__(self, index: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self._kernels: dict[tuple[str, str], list[type[Kernel]]] = {}
        self._index = index if index is not None else {}
        self._import_errors: dict[str, str] = {}  #: module -> why it failed to import
        self._lock = threading.RLock()
        #: (domain, op_type, opset) -> the kernel :meth:`lookup` picks (cleared by :meth:`register`)
        self._best: dict[tuple[str, str, int], type[Kernel]] = {}

    def register(self, cls: type[Kernel]) -> type[Kernel]:
        key = (_norm_domain(cls.domain), cls.op_type)
        versions = self._kernels.setdefault(key, [])
        if any(k.since_version == cls.since_version for k in versions):
            raise ValueError(f"kernel {key} version {cls.since_version} registered twice")
        versions.append(cls)
        versions.sort(key=lambda k: k.since_version)
        self._best.clear()
        return cls

    def _versions(self, domain: str, op_type: str) -> list[type[Kernel]]:
        """The op's kernels, importing its module on first use."""
        key = (_norm_domain(domain), op_type)
        found = self._kernels.get(key)
        if found is None and op_type in self._index.get(key[0], ()):
            self._import(f"nnrt_numpy.ops.{self._index[key[0]][op_type]}")
            found = self._kernels.get(key)
        return found or []

    def _import(self, module: str) -> None:
        if module in self._import_errors:
            return
        with self._lock:  # one thread imports, the others wait for its kernels
            try:
                importlib.import_module(module)
            except Exception as e:  # a broken optional dependency disables its ops only
                self._import_errors[module] = f"{type(e).__name__}: {e}"

    def load_all(self) -> None:
        """Import every indexed op module (listing, exhaustive tests)."""
        for ops in self._index.values():
            for module in sorted(set(ops.values())):
                self._import(f"nnrt_numpy.ops.{module}")

    def lookup(self, domain: str, op_type: str, opset: int) -> type[Kernel] | None:
        """The newest kernel whose ``since_version`` is <= ``opset`` (remembered per
        op and opset: the capability check and the compile ask for every node)."""
        key = (domain, op_type, opset)
        best = self._best.get(key)
        if best is not None:
            return best
        for cls in self._versions(domain, op_type):
            if cls.since_version <= opset:
                best = cls
        if best is not None:  # a miss is asked again (it may be a module still to import)
            self._best[key] = best
        return best

    def why_unsupported(self, node: NodeInfo) -> str | None:
        """``None`` when a kernel can run ``node``; otherwise the reason."""
        cls = self.lookup(node.domain, node.op_type, node.opset)
        if cls is None:
            versions = self._versions(node.domain, node.op_type)
            if not versions:
                return self._missing(node.domain, node.op_type)
            have = ", ".join(str(k.since_version) for k in versions)
            return f"{node.op_type} has kernels for opset >= {have}, model uses opset {node.opset}"
        return cls.check(node)

    def _missing(self, domain: str, op_type: str) -> str:
        """Why no kernel: its module failed to import, or the op is unknown
        (with the closest known names and how many ops the domain has)."""
        d = _norm_domain(domain)
        rel = self._index.get(d, {}).get(op_type)
        module = f"nnrt_numpy.ops.{rel}" if rel is not None else None
        if module in self._import_errors:
            return f"kernels of {op_type!r} unavailable: {module} failed to import ({self._import_errors[module]})"
        known = sorted(set(self._index.get(d, ())) | {op for dom, op in self._kernels if dom == d})
        import difflib  # error path only
        close = difflib.get_close_matches(op_type, known, n=3)
        hint = f"; closest: {', '.join(close)}" if close else ""
        return (f"no kernel for op {op_type!r} in domain {domain or 'ai.onnx'!r} "
                f"({len(known)} ops in that domain{hint})")

    def ops(self) -> Iterable[tuple[str, str, int]]:
        """Every (domain, op, since_version) kernel (imports every op module)."""
        self.load_all()
        for (domain, op), versions in sorted(self._kernels.items()):
            for cls in versions:
                yield domain, op, cls.since_version

    def __contains__(self, key: tuple[str, str]) -> bool:
        d = _norm_domain(key[0])
        return (d, key[1]) in self._kernels or key[1] in self._index.get(d, ())


def _norm_domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


REGISTRY = KernelRegistry(OP_MODULES)
register = REGISTRY.register
