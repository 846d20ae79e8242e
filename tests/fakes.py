"""A fake backend for partitioning and scheduling tests (no real device).

``FakeBackend`` claims only the op types it is given and runs them with the
NumPy backend's kernels, optionally keeping tensors in a fake "device memory"
so that host<->device copies can be counted.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import numpy as np

from nnrt_core.backend import Backend, CompiledPartition, CompileOptions, DeviceInfo
from nnrt_core.errors import CompileError
from nnrt_core.hookspec import hookimpl
from nnrt_core.ir import Graph, Node

__all__ = ["DeviceArray", "FakeBackend", "make_fake_backend", "fake_plugin"]


class DeviceArray:
    """A tensor in the fake device's memory."""

    def __init__(self, data: np.ndarray, owner: "FakeBackend") -> None:
        self.data = data
        self.owner = owner

    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype


class _FakePartition(CompiledPartition):
    def __init__(self, backend: "FakeBackend", graph: Graph) -> None:
        super().__init__(backend, graph)
        from nnrt_numpy.program import GraphProgram

        self.program = GraphProgram(graph)
        self.fake = backend

    def _run(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        b = self.fake
        self.fake.runs += 1
        args = []
        for name in self.input_names:
            x = inputs[name]
            if not b.host_memory:
                assert isinstance(x, DeviceArray) and x.owner is b, f"{name} not on device"
                x = x.data
            args.append(x)
        outs = self.program.run(args)
        if not b.host_memory:
            outs = [DeviceArray(o, b) for o in outs]
        result = dict(zip(self.output_names, outs))
        return result if b.output_fault is None else b.output_fault(result)

    def describe(self) -> dict[str, Any]:
        return {"fake": True}


class FakeBackend(Backend):
    """Configured per subclass by :func:`make_fake_backend`."""

    name = "fake"
    #: a fake runs NumPy kernels on the host for a pretend device: emulated, so
    #: ``backends="auto"`` leaves it out and two fakes do not make the default
    #: scheduler measure (``make_fake_backend(..., emulated=False)`` for tests of that)
    emulated = True
    ops: frozenset[str] = frozenset()
    fail_compile_ops: frozenset[str] = frozenset()
    unavailable: str | None = None
    #: a broken plugin: turns the partition's correct outputs into what ``_run`` returns
    output_fault: Callable[[dict[str, Any]], Any] | None = None

    def __init__(self) -> None:
        self.runs = 0
        self.to_device_calls = 0
        self.to_host_calls = 0

    def _availability(self) -> str | None:
        return self.unavailable

    def devices(self) -> list[DeviceInfo]:
        return [DeviceInfo("fake:0", f"{self.name} device", self.device_type)]

    def _supports(self, node: Node, options: CompileOptions) -> str | None:
        return None if node.op_type in self.ops else f"{self.name} only runs {sorted(self.ops)}"

    def _compile(self, graph: Graph, options: CompileOptions) -> CompiledPartition:
        bad = [n.name for n in graph.nodes if n.op_type in self.fail_compile_ops]
        if bad:
            raise CompileError(f"{self.name}: out of device memory compiling {bad}")
        return _FakePartition(self, graph)

    def allocate(self, shape, dtype, device: str | None = None) -> Any:
        if self.host_memory:
            return np.empty(tuple(shape), np.dtype(dtype))
        return DeviceArray(np.zeros(tuple(shape), np.dtype(dtype)), self)

    def to_device(self, array: np.ndarray, device: str | None = None) -> Any:
        if self.host_memory:
            return array
        self.to_device_calls += 1
        return DeviceArray(np.array(array), self)

    def to_host(self, tensor: Any) -> np.ndarray:
        if self.host_memory:
            return tensor
        self.to_host_calls += 1
        assert isinstance(tensor, DeviceArray)
        return np.array(tensor.data)


def make_fake_backend(name: str, ops: Iterable[str], *, priority: int = 0, device_memory: bool = False,
                      fail_compile_ops: Iterable[str] = (), unavailable: str | None = None,
                      device_type: str = "npu", output_fault: Callable[[dict[str, Any]], Any] | None = None,
                      **attrs: Any) -> type[FakeBackend]:
    """A :class:`FakeBackend` subclass; ``output_fault`` and ``attrs`` (class
    attributes, e.g. a bad ``default_priority``) emulate broken plugins."""
    return type(
        f"Fake_{name}",
        (FakeBackend,),
        {
            "name": name,
            "ops": frozenset(ops),
            "default_priority": priority,
            "host_memory": not device_memory,
            "fail_compile_ops": frozenset(fail_compile_ops),
            "unavailable": unavailable,
            "device_type": device_type,
            "output_fault": staticmethod(output_fault) if output_fault is not None else None,
            **attrs,
        },
    )


class fake_plugin:
    """A plugin object providing the given backend classes."""

    def __init__(self, *backends: type[Backend]) -> None:
        self._backends = list(backends)

    @hookimpl
    def nnrt_backends(self):
        return self._backends
