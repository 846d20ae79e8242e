"""Which nodes OpenVINO runs, decided by probing (never by a list).

Every distinct node signature (:func:`.probe.node_signature`) is probed once
per OpenVINO version and device: the unanswered nodes of a graph go into one
probe model (:func:`.probe.probe_model`), OpenVINO's ONNX frontend converts it
(``Core.read_model``) and the device plugin says which operations it runs
(``Core.query_model``).  A node is supported when the operations producing
its outputs are.  When the batch does not convert, each node is converted
alone, so the ones that fail get the frontend's message as their reason.  A
node that fails with free dimensions but has static ones is probed again
with them.

Answers are kept in memory and in ``$NNRT_CACHE_DIR/ov_capability-<version>.json``
(default ``~/.cache/nnrt``): plain JSON ``{signature: null | reason}``, written
atomically, merged with what other processes wrote, ignored when unreadable.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from nnrt_openvino._core import Node, get_logger, user_cache_file, write_atomic
from nnrt_openvino.probe import UntypedInputError, has_static_dims, node_signature, probe_model

__all__ = ["CACHE_FORMAT", "default_cache_path", "first_line", "CapabilityCache", "Prober"]

log = get_logger("nnrt.openvino")
CACHE_FORMAT = 1


def default_cache_path(version: str) -> Path:
    """``$NNRT_CACHE_DIR`` (or ``$XDG_CACHE_HOME/nnrt``, ``~/.cache/nnrt``) / ``ov_capability-<ver>.json``."""
    return user_cache_file("ov_capability", version)


def first_line(e: BaseException | str) -> str:
    """The first informative line of an OpenVINO error (its "Exception from
    src/...cpp" location lines skipped)."""
    lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(("Exception from src/", "Check '"))]
    text = (useful or lines or [type(e).__name__ if isinstance(e, BaseException) else "error"])[0]
    detail = next((ln[3:] for ln in useful if ln.startswith("-- ")), None)  # the frontend's summary item
    if detail is not None:
        text = f"{text.rstrip(':')}: {detail}"
    return text[:300]


class CapabilityCache:
    """Probe answers (``None`` = supported, else the reason), in memory and
    in a JSON file keyed by the OpenVINO version.  Thread-safe."""

    def __init__(self, version: str, path: Path | str | None = None, *, persist: bool = True) -> None:
        self.version = version
        self.path = Path(path) if path is not None else default_cache_path(version)
        self.persist = persist
        self._entries: dict[str, str | None] | None = None
        self._new = False
        self._lock = threading.Lock()

    def _read(self) -> dict[str, str | None]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if not (isinstance(data, dict) and data.get("format") == CACHE_FORMAT
                    and data.get("openvino") == self.version and isinstance(data.get("entries"), dict)):
                raise ValueError("another format or OpenVINO version")
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as e:
            log.warning("ignoring OpenVINO capability cache %s (%s); it will be rewritten", self.path, first_line(e))
            self._new = True
            return {}
        return {k: v for k, v in data["entries"].items() if isinstance(k, str) and (v is None or isinstance(v, str))}

    def _table(self) -> dict[str, str | None]:
        if self._entries is None:
            with self._lock:
                if self._entries is None:
                    self._entries = self._read() if self.persist else {}
        return self._entries

    def lookup(self, key: str) -> tuple[bool, str | None]:
        """``(found, reason)``."""
        table = self._table()
        return (True, table[key]) if key in table else (False, None)

    def store(self, key: str, reason: str | None) -> None:
        table = self._table()
        with self._lock:
            table[key] = reason
            self._new = True

    def __len__(self) -> int:
        return len(self._table())

    def save(self) -> None:
        """Merge new answers into the file (atomic replace); errors are logged."""
        if not self.persist or not self._new:
            return
        with self._lock:
            merged = {**self._read(), **self._table()}
            data = {"format": CACHE_FORMAT, "openvino": self.version, "entries": merged}
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(self.path, json.dumps(data, separators=(",", ":"), sort_keys=True).encode())
            except OSError as e:
                log.warning("cannot write OpenVINO capability cache %s: %s", self.path, e)
                return
            self._new = False


class Prober:
    """Answers "does OpenVINO on this device run these nodes?" through a cache."""

    def __init__(self, cache: CapabilityCache, core: Any) -> None:
        self.cache = cache
        self.core = core
        self.probes = 0  #: probe models converted (for tests and reports)

    def check_all(self, nodes: list[Node], device: str) -> dict[str, str | None]:
        """``{node name: None | reason}`` for ``nodes`` on OpenVINO device ``device``."""
        answers = self._answer(nodes, device, exact=False)
        retry = [n for n in nodes if answers[n.name] is not None and has_static_dims(n)]
        if retry:
            for name, reason in self._answer(retry, device, exact=True).items():
                if reason is None:
                    answers[name] = None
        return answers

    def _answer(self, nodes: list[Node], device: str, exact: bool) -> dict[str, str | None]:
        answers: dict[str, str | None] = {}
        todo: dict[str, list[Node]] = {}  # signature -> nodes
        for n in nodes:
            try:
                key = node_signature(n, device, exact)
            except Exception as e:
                answers[n.name] = f"cannot compute the node's signature: {type(e).__name__}: {first_line(e)}"
                continue
            found, reason = self.cache.lookup(key)
            if found:
                answers[n.name] = reason
            else:
                todo.setdefault(key, []).append(n)
        if todo:
            reps = {key: group[0] for key, group in todo.items()}
            found = self._probe(list(reps.values()), device, exact)
            for key, group in todo.items():
                reason, cacheable = found[reps[key].name]
                if cacheable:
                    self.cache.store(key, reason)
                for n in group:
                    answers[n.name] = reason
        return answers

    def _probe(self, nodes: list[Node], device: str, exact: bool) -> dict[str, tuple[str | None, bool]]:
        """``{name: (reason, cacheable)}``: one batch; one node at a time when the batch fails to convert."""
        out: dict[str, tuple[str | None, bool]] = {}
        models = []
        for n in nodes:
            try:
                models.append(n)
                probe_model([n], exact)  # cheap (no conversion): finds untypable nodes before batching
            except UntypedInputError as e:
                models.pop()
                out[n.name] = (f"cannot probe OpenVINO: {e}", False)  # depends on the graph: not cached
            except Exception as e:
                models.pop()
                out[n.name] = (f"cannot export the node for OpenVINO: {type(e).__name__}: {first_line(e)}", True)
        if not models:
            return out
        try:
            out.update(self._query(models, device, exact))
        except Exception:
            if len(models) == 1:
                raise
            for n in models:  # someone in the batch does not convert: one by one, for each reason
                out.update(self._query([n], device, exact))
        return out

    def _query(self, nodes: list[Node], device: str, exact: bool) -> dict[str, tuple[str | None, bool]]:
        data, outputs = probe_model(nodes, exact)
        self.probes += 1
        try:
            model = self.core.read_model(data)
        except Exception as e:
            if len(nodes) > 1:
                raise
            return {nodes[0].name: (f"OpenVINO's ONNX frontend cannot convert the node: {first_line(e)}", True)}
        try:
            supported = set(self.core.query_model(model, device))
        except Exception as e:
            if len(nodes) > 1:
                raise
            return {nodes[0].name: (f"OpenVINO's {device} plugin cannot query the node: {first_line(e)}", True)}
        producer: dict[str, str] = {}
        for op in model.get_ops():
            if op.get_type_name() == "Result":
                continue
            for port in op.outputs():
                for t in port.get_names():
                    producer.setdefault(t, op.get_friendly_name())
        out = {}
        for n in nodes:
            missing = [t for t in outputs[n.name] if producer.get(t) not in supported]
            out[n.name] = (None if not missing else
                           f"OpenVINO's {device} plugin does not run the operation producing {missing[0]!r} "
                           f"(query_model)", True)
        return out
