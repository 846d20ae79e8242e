"""Running compiled partitions in dependency order.

Tensors cross a partition boundary without a copy when producer and consumer
both keep tensors in host memory; otherwise the producer's backend copies to
the host and the consumer's backend copies to its device.  Copies are counted.
Values are released right after their last reader.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from nnrt_core.backend.base import Backend, CompiledPartition

__all__ = ["ExecutionStep", "Executor"]


@dataclass
class ExecutionStep:
    compiled: CompiledPartition
    backend: Backend
    inputs: list[str]
    outputs: list[str]
    release: list[str] = field(default_factory=list)  #: values dead after this step


class Executor:
    """Runs ``steps`` in order; thread-safe (no state shared between runs
    except the copy counters)."""

    def __init__(self, steps: Sequence[ExecutionStep], graph_outputs: Sequence[str],
                 constants: Mapping[str, np.ndarray], graph_inputs: Sequence[str] = ()) -> None:
        self.steps = list(steps)
        self.graph_outputs = list(graph_outputs)
        self.constants = dict(constants)  # graph outputs that are initializers
        self._lock = threading.Lock()
        self.host_device_copies = 0
        keep = set(graph_outputs)
        last: dict[str, int] = {}
        for i, st in enumerate(self.steps):
            for name in st.inputs:
                last[name] = i
        for name, i in last.items():
            if name not in keep:
                self.steps[i].release.append(name)
        only = self.steps[0] if len(self.steps) == 1 else None
        # whole model on one host-memory partition that reads exactly the feeds
        self._single = (only.compiled if only is not None and only.backend.host_memory
                        and not self.constants and set(graph_outputs) <= set(only.outputs)
                        and set(only.inputs) == set(graph_inputs) else None)

    def run(self, feeds: Mapping[str, Any]) -> list[np.ndarray]:
        if self._single is not None:
            outs = self._single.run(feeds)
            return [outs[name] for name in self.graph_outputs]
        env: dict[str, Any] = dict(feeds)
        owner: dict[str, Backend | None] = {}  # None = host array
        on_host: dict[str, Any] = {}  # host copies of device tensors, made once
        copies = 0
        for st in self.steps:
            b = st.backend
            args = {}
            for name in st.inputs:
                x = env[name]
                src = owner.get(name)  # None: host array (feed)
                if src is not b:
                    if src is not None and not src.host_memory:
                        if name in on_host:
                            x = on_host[name]
                        else:
                            x = on_host[name] = src.to_host(x)
                            copies += 1
                    if not b.host_memory:
                        x = b.to_device(x)
                        copies += 1
                args[name] = x
            outs = st.compiled.run(args)
            for name in st.outputs:
                env[name] = outs[name]
                owner[name] = b
            for name in st.release:
                env.pop(name, None)
                on_host.pop(name, None)
        results = []
        for name in self.graph_outputs:
            if name in self.constants and name not in env:
                results.append(self.constants[name])
                continue
            x = env[name]
            src = owner.get(name)
            if src is not None and not src.host_memory:
                if name in on_host:
                    x = on_host[name]
                else:
                    x = src.to_host(x)
                    copies += 1
            results.append(x)
        if copies:
            with self._lock:
                self.host_device_copies += copies
        return results
