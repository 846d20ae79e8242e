"""Field-by-field validation of a session file's JSON header.

The checksums catch corruption, not a file crafted with valid checksums (or
a bug in a writer): :func:`check_header` runs after them and checks every
record's types, then the references between records: partition inputs come
from the graph inputs or an earlier partition, graph outputs are produced,
placements name stored nodes, partitions and backends, entries exist.  Any
problem is a :class:`SessionFileError` naming the field, e.g.
``partitions[1].inputs[0]``; nothing later sees a malformed record.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from nnrt_core.errors import SessionFileError

__all__ = ["CHECKSUM_NAMES", "check_header"]

#: the checksum names an entry may carry, by the format versions that write them
CHECKSUM_NAMES = ("xxh3_128", "sha256")

Check = Callable[[Any], bool]


def _int(v: Any) -> bool:
    return type(v) is int


def _count(v: Any) -> bool:
    return type(v) is int and v >= 0


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _name(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def _number(v: Any) -> bool:
    return type(v) in (int, float) and not (isinstance(v, float) and math.isnan(v))


def _opt(check: Check) -> Check:
    def optional(v: Any) -> bool:
        return v is None or check(v)

    _EXPECTED[optional] = f"null or {_EXPECTED[check]}"
    return optional


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


_EXPECTED = {_int: "an integer", _count: "an integer >= 0", _str: "a string", _name: "a non-empty string",
             _number: "a number", _bool: "true or false"}

_OPT_COUNT = _opt(_count)

#: record kind -> {key: (check, required)}
_PARTITION = {"index": (_count, True), "backend": (_name, True), "backend_version": (_str, True),
              "name": (_str, True), "nodes": (list, True), "inputs": (list, True), "outputs": (list, True),
              "entry": (_count, True)}
_FALLBACK = {"partition": (_count, True), "backend": (_name, True), "backend_version": (_str, True),
             "form": (_name, True), "entry": (_count, True)}
#: the forms a fallback's bytes may take (``session_file.FALLBACK_FORMS``)
_FALLBACK_FORMS = ("onnx",)
_CONSTANT = {"name": (_name, True), "dtype": (_name, True), "shape": (list, True), "entry": (_count, True)}
_PLACEMENT = {"node": (_name, True), "op_type": (_str, True), "backend": (_name, True),
              "partition": (_int, False), "reason": (_str, False), "rejected": (dict, False)}
_EVENT = {"kind": (_name, True), "backend": (_str, True), "message": (_str, True), "nodes": (list, False)}
_ENTRY = {"offset": (_count, True), "length": (_count, True)}
_META = {"nnrt_version": (_str, False), "graph_name": (_str, False), "folded_nodes": (_count, False),
         "cache_version": (_int, False), "memory": (dict, False), "passes": (dict, False),
         "considered_plans": (list, False)}
_PASSES = {"level": (_str, False), "nodes_before": (_count, False), "nodes_after": (_count, False),
           "ops_before": (dict, False), "ops_after": (dict, False), "iterations": (_count, False),
           "seconds": (_number, False), "passes": (dict, False)}
_PASS = {"name": (_str, True), "level": (_str, True), "rewrites": (_count, False),
         "nodes_removed": (_count, False), "nodes_added": (_count, False), "seconds": (_number, False),
         "notes": (list, False)}
_PLAN = {"label": (_str, False), "estimated_ms": (_opt(_number), False), "partitions": (_count, False),
         "transfer_ms": (_opt(_number), False), "chosen": (_bool, False), "end_to_end": (_bool, False),
         "problem": (_opt(_str), False)}


class _Checker:
    """Raises :class:`SessionFileError` for the first bad field, naming it."""

    def __init__(self, what: str) -> None:
        self.what = what

    def fail(self, field: str, problem: str) -> SessionFileError:
        return SessionFileError(f"{self.what}: field {field!r} {problem}")

    def value(self, v: Any, check: Any, field: str) -> Any:
        if isinstance(check, type):
            ok, expected = isinstance(v, check), f"a JSON {'object' if check is dict else 'array'}"
        else:
            ok, expected = check(v), _EXPECTED.get(check, "another value")
        if not ok:
            raise self.fail(field, f"must be {expected}, got {_show(v)}")
        return v

    def record(self, rec: Any, spec: Mapping[str, tuple[Any, bool]], field: str, closed: bool = True) -> dict:
        """``rec`` checked against ``spec`` (unknown keys refused when ``closed``)."""
        self.value(rec, dict, field)
        for key, (check, required) in spec.items():
            if key in rec:
                self.value(rec[key], check, f"{field}.{key}")
            elif required:
                raise self.fail(field, f"lacks {key!r}")
        if closed and (extra := sorted(set(rec) - set(spec))):
            raise self.fail(field, f"has unknown keys {extra}")
        return rec

    def items(self, v: Any, check: Check, field: str, unique: bool = False) -> list:
        self.value(v, list, field)
        for i, x in enumerate(v):
            self.value(x, check, f"{field}[{i}]")
        if unique and len(set(v)) != len(v):
            dup = next(x for i, x in enumerate(v) if x in v[:i])
            raise self.fail(field, f"names {dup!r} twice")
        return v

    def mapping(self, v: Any, check: Check, field: str) -> None:
        self.value(v, dict, field)
        for k, x in v.items():
            self.value(x, check, f"{field}.{k}")


def _show(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def check_header(head: Any, what: str) -> None:
    """Check the decoded JSON header ``head`` of ``what`` (types, then references)."""
    c = _Checker(what)
    c.value(head, dict, "header")
    for key in ("config", "inputs", "outputs", "partitions", "constants", "entries"):
        if key not in head:
            raise c.fail("header", f"lacks {key!r}")
    c.value(head["config"], dict, "config")
    entries = c.value(head["entries"], list, "entries")
    for i, e in enumerate(entries):
        c.record(e, _ENTRY, f"entries[{i}]", closed=False)
        algo = next((a for a in CHECKSUM_NAMES if a in e), None)
        if algo is None:
            raise c.fail(f"entries[{i}]", "has no checksum")
        c.value(e[algo], _name, f"entries[{i}].{algo}")
    ios = {key: _values(c, head[key], key) for key in ("inputs", "outputs")}
    parts = _partitions(c, head["partitions"], len(entries))
    consts = _constants(c, head["constants"], len(entries))
    _references(c, ios["inputs"], ios["outputs"], parts, consts)
    _placement(c, head.get("placement", []), parts)
    _fallbacks(c, head.get("fallbacks", []), parts, len(entries))
    for i, e in enumerate(c.value(head.get("events", []), list, "events")):
        c.record(e, _EVENT, f"events[{i}]")
        c.items(e.get("nodes", []), _str, f"events[{i}].nodes")
    _meta(c, head.get("meta", {}))


def _values(c: _Checker, v: Any, field: str) -> list[str]:
    """Names of the graph ``inputs`` / ``outputs`` list: ``[[name, type], ...]``."""
    c.value(v, list, field)
    names = []
    for i, pair in enumerate(v):
        if not isinstance(pair, list) or len(pair) != 2:
            raise c.fail(f"{field}[{i}]", f"must be [name, type], got {_show(pair)}")
        names.append(c.value(pair[0], _name, f"{field}[{i}][0]"))
    c.items(names, _name, field, unique=True)
    return names


def _partitions(c: _Checker, v: Any, n_entries: int) -> list[dict]:
    c.value(v, list, "partitions")
    indices: set[int] = set()
    nodes: set[str] = set()
    for i, p in enumerate(v):
        f = f"partitions[{i}]"
        c.record(p, _PARTITION, f)
        if p["index"] in indices:
            raise c.fail(f"{f}.index", f"repeats index {p['index']}")
        indices.add(p["index"])
        if p["entry"] >= n_entries:
            raise c.fail(f"{f}.entry", f"names entry {p['entry']}, but the file has {n_entries}")
        for j, pair in enumerate(p["nodes"]):
            if not (isinstance(pair, list) and len(pair) == 2 and _name(pair[0]) and _str(pair[1])):
                raise c.fail(f"{f}.nodes[{j}]", f"must be [node name, op type], got {_show(pair)}")
            if pair[0] in nodes:
                raise c.fail(f"{f}.nodes[{j}]", f"names node {pair[0]!r}, which another record holds too")
            nodes.add(pair[0])
        c.items(p["inputs"], _name, f"{f}.inputs", unique=True)
        c.items(p["outputs"], _name, f"{f}.outputs", unique=True)
        if not p["outputs"]:
            raise c.fail(f"{f}.outputs", "is empty (a partition must produce something)")
    return v


def _constants(c: _Checker, v: Any, n_entries: int) -> list[str]:
    c.value(v, list, "constants")
    names = []
    for i, k in enumerate(v):
        c.record(k, _CONSTANT, f"constants[{i}]")
        c.items(k["shape"], _count, f"constants[{i}].shape")
        if k["entry"] >= n_entries:
            raise c.fail(f"constants[{i}].entry", f"names entry {k['entry']}, but the file has {n_entries}")
        names.append(k["name"])
    c.items(names, _name, "constants", unique=True)
    return names


def _placement(c: _Checker, v: Any, parts: list[dict]) -> None:
    """Placement records name a stored node, its partition and a backend of the file."""
    c.value(v, list, "placement")
    where = {n: p for p in parts for n, _ in p["nodes"]}
    backends = {p["backend"] for p in parts}
    seen: set[str] = set()
    for i, r in enumerate(v):
        f = f"placement[{i}]"
        c.record(r, _PLACEMENT, f)
        c.mapping(r.get("rejected", {}), _str, f"{f}.rejected")
        node = r["node"]
        if node not in where:
            raise c.fail(f"{f}.node", f"names node {node!r}, which no partition holds")
        if node in seen:
            raise c.fail(f"{f}.node", f"places node {node!r} a second time")
        seen.add(node)
        if "partition" in r and r["partition"] != where[node]["index"]:
            raise c.fail(f"{f}.partition", f"is {r['partition']}, but node {node!r} is in partition "
                                           f"{where[node]['index']}")
        if r["backend"] not in backends:
            raise c.fail(f"{f}.backend", f"names backend {r['backend']!r}, which no partition uses")


def _fallbacks(c: _Checker, v: Any, parts: list[dict], n_entries: int) -> None:
    """Each fallback names a stored partition (once), another backend, an existing entry."""
    c.value(v, list, "fallbacks")
    backend_of = {p["index"]: p["backend"] for p in parts}
    seen: set[int] = set()
    for i, f in enumerate(v):
        field = f"fallbacks[{i}]"
        c.record(f, _FALLBACK, field)
        if f["partition"] not in backend_of:
            raise c.fail(f"{field}.partition", f"names partition {f['partition']}, which the file does not hold")
        if f["partition"] in seen:
            raise c.fail(f"{field}.partition", f"gives partition {f['partition']} a second fallback")
        seen.add(f["partition"])
        if f["backend"] == backend_of[f["partition"]]:
            raise c.fail(f"{field}.backend", f"is {f['backend']!r}, the backend of the partition it replaces")
        if f["entry"] >= n_entries:
            raise c.fail(f"{field}.entry", f"names entry {f['entry']}, but the file has {n_entries}")
        if f["form"] not in _FALLBACK_FORMS:
            raise c.fail(f"{field}.form", f"is {f['form']!r}; this nnrt reads {list(_FALLBACK_FORMS)}")


def _meta(c: _Checker, meta: Any) -> None:
    c.record(meta, _META, "meta", closed=False)
    if "memory" in meta:
        c.mapping(meta["memory"], _OPT_COUNT, "meta.memory")
    if "passes" in meta:
        passes = c.record(meta["passes"], _PASSES, "meta.passes")
        for key in ("ops_before", "ops_after"):
            c.mapping(passes.get(key, {}), _count, f"meta.passes.{key}")
        for name, s in passes.get("passes", {}).items():
            c.record(s, _PASS, f"meta.passes.passes.{name}")
            c.items(s.get("notes", []), _str, f"meta.passes.passes.{name}.notes")
    for i, plan in enumerate(meta.get("considered_plans", [])):
        c.record(plan, _PLAN, f"meta.considered_plans[{i}]", closed=False)


def _references(c: _Checker, inputs: list[str], outputs: list[str], parts: list[dict],
                consts: list[str]) -> None:
    """Every partition input is available when it runs; every output is produced once."""
    available = set(inputs)
    for i, p in enumerate(parts):
        for j, name in enumerate(p["inputs"]):
            if name not in available:
                raise c.fail(f"partitions[{i}].inputs[{j}]", f"is {name!r}, neither a graph input nor an "
                                                             "output of an earlier partition")
        for j, name in enumerate(p["outputs"]):
            if name in available:
                raise c.fail(f"partitions[{i}].outputs[{j}]", f"is {name!r}, which a graph input or an "
                                                              "earlier partition already provides")
            available.add(name)
    for i, name in enumerate(consts):
        if name not in outputs:
            raise c.fail(f"constants[{i}].name", f"is {name!r}, which is not a graph output")
        if name in available:
            raise c.fail(f"constants[{i}].name", f"is {name!r}, which a partition or input also provides")
    for i, name in enumerate(outputs):
        if name not in available and name not in consts:
            field = "partitions" if not parts else f"outputs[{i}]"
            raise c.fail(field, f"leaves graph output {name!r} unproduced"
                         + (" (the file has no partitions)" if not parts else ""))
