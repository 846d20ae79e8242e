"""Crafted session files and cache entries (issue #16).

Every mutation below is written with *recomputed valid checksums*, so only
the field-by-field validation can catch it: a session file must give a
``SessionFileError`` naming the field, a cache entry must be rebuilt with a
``cache_rebuilt`` event (and rewritten), never a raw TypeError/KeyError/
AttributeError.  Then seeded random byte corruptions, and entries that are
not regular files (a link to /dev/zero, a FIFO, a directory) or too large.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import struct
from typing import Any, Callable

import numpy as np
import pytest

from nnrt_core import ScheduleConfig, Session, SessionFileError
from nnrt_core.errors import NnrtError
from nnrt_core.storage import checksum, session_file
from test_model_cache import small_cnn

FIXED = struct.Struct("<8sIIQ32s")
BACKENDS = ["npu_emu", "onnxruntime"]  # two partitions: npu_emu (conv..gemm) -> onnxruntime (cumsum)
X = {"x": np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)}


def split(data: bytes) -> tuple[dict, bytes]:
    """(header, payload) of a session file."""
    _, _, _, hlen, _ = FIXED.unpack_from(data)
    return json.loads(data[FIXED.size:FIXED.size + hlen]), data[FIXED.size + hlen:]


def join(head: Any, payload: bytes, head_bytes: bytes | None = None) -> bytes:
    """A file of ``head`` (or the raw ``head_bytes``) over ``payload``, its header checksum recomputed."""
    hb = head_bytes if head_bytes is not None else json.dumps(head).encode()
    return FIXED.pack(session_file.MAGIC, session_file.FORMAT_VERSION, 0, len(hb), session_file.header_digest(hb)) \
        + hb + payload


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> bytes:
    """A real session file: two partitions, placement records, pass report."""
    path = tmp_path_factory.mktemp("crafted") / "m.nnrt"
    return Session(small_cnn(), ScheduleConfig(backends=BACKENDS, precision="fp16")).save(path).read_bytes()


def _set(path: str, value: Any) -> Callable[[dict], None]:
    """A mutation setting ``head[path]`` (dotted, with list indices) to ``value``."""
    def mutate(head: dict) -> None:
        *parents, last = path.split(".")
        obj = head
        for k in parents:
            obj = obj[int(k)] if isinstance(obj, list) else obj[k]
        if isinstance(obj, list):
            obj[int(last)] = value
        else:
            obj[last] = value
    return mutate


def _del(path: str) -> Callable[[dict], None]:
    def mutate(head: dict) -> None:
        *parents, last = path.split(".")
        obj = head
        for k in parents:
            obj = obj[int(k)] if isinstance(obj, list) else obj[k]
        del obj[int(last) if isinstance(obj, list) else last]
    return mutate


def _do(*fs: Callable[[dict], None]) -> Callable[[dict], None]:
    def mutate(head: dict) -> None:
        for f in fs:
            f(head)
    return mutate


def _append(path: str, value: Any) -> Callable[[dict], None]:
    def mutate(head: dict) -> None:
        obj = head
        for k in path.split("."):
            obj = obj[int(k)] if isinstance(obj, list) else obj[k]
        obj.append(copy.deepcopy(value) if not callable(value) else value(head))
    return mutate


EVENT = {"kind": "node_fallback", "backend": "numpy", "message": "m", "nodes": ["conv"]}
PLAN = {"label": "all on npu", "estimated_ms": 1.0, "partitions": 2, "transfer_ms": 0.0, "chosen": True}

#: (id, mutation, regex the SessionFileError must match: the field it names)
MUTATIONS: list[tuple[str, Callable[[dict], None], str]] = [
    ("header_not_object", lambda h: [h], r"'header' must be a JSON object"),
    # the backup copy of the NPU partition (format 3): it names a stored partition once, another backend, an entry
    ("fallbacks_not_list", _set("fallbacks", {}), r"'fallbacks' must be a JSON array"),
    ("fallback_of_no_partition", _set("fallbacks.0.partition", 7), r"fallbacks\[0\]\.partition.*names partition 7"),
    ("fallback_twice", lambda h: h["fallbacks"].append(dict(h["fallbacks"][0])),
     r"fallbacks\[1\]\.partition.*a second fallback"),
    ("fallback_on_its_own_backend", _set("fallbacks.0.backend", "npu_emu"), r"fallbacks\[0\]\.backend"),
    ("fallback_entry_out_of_range", _set("fallbacks.0.entry", 99), r"fallbacks\[0\]\.entry.*names entry 99"),
    ("fallback_unknown_key", _set("fallbacks.0.code", "eval"), r"fallbacks\[0\]. has unknown keys \['code'\]"),
    ("fallback_entry_negative", _set("fallbacks.0.entry", -1), r"fallbacks\[0\]\.entry. must be an integer >= 0"),
    ("fallback_unknown_form", _set("fallbacks.0.form", "pickle"), r"fallbacks\[0\]\.form. is 'pickle'; this nnrt reads"),
    ("fallback_without_form", _del("fallbacks.0.form"), r"fallbacks\[0\]. lacks 'form'"),
    ("no_entries_key", _del("entries"), r"'header' lacks 'entries'"),
    ("no_partitions", _set("partitions", []), r"'partitions' leaves graph output 'y' unproduced"),
    ("partitions_not_list", _set("partitions", {"0": 1}), r"'partitions' must be a JSON array"),
    ("renamed_partition_input", _set("partitions.1.inputs.0", "gg"), r"partitions\[1\]\.inputs\[0\]"),
    ("renamed_partition_output", _set("partitions.0.outputs.0", "gg"), r"partitions\[1\]\.inputs\[0\]"),
    ("renamed_boundary_both_sides", _do(_set("partitions.0.outputs.0", "gg"), _set("partitions.1.inputs.0", "gg")),
     r"partition 0 \('npu_emu'\): field 'outputs' names \['gg'\], but its compiled form writes \['g'\]"),
    ("partition_output_is_graph_input", _set("partitions.0.outputs.0", "x"), r"partitions\[0\]\.outputs\[0\]"),
    ("output_produced_twice", _set("partitions.1.outputs", ["y", "g"]), r"partitions\[1\]\.outputs\[1\]"),
    ("empty_partition_outputs", _set("partitions.0.outputs", []), r"partitions\[0\]\.outputs"),
    ("duplicate_partition_input", _set("partitions.1.inputs", ["g", "g"]), r"partitions\[1\]\.inputs. names 'g' twice"),
    ("partition_input_not_string", _set("partitions.0.inputs.0", 7), r"partitions\[0\]\.inputs\[0\]"),
    ("unproduced_graph_output", _set("outputs.0.0", "z"), r"outputs\[0\]"),
    ("duplicate_graph_inputs", lambda h: h["inputs"].append(list(h["inputs"][0])), r"'inputs' names 'x' twice"),
    ("graph_input_not_pair", _set("inputs.0", "x"), r"inputs\[0\]"),
    ("graph_input_empty_name", _set("inputs.0.0", ""), r"inputs\[0\]\[0\]"),
    ("bad_input_dtype", _set("inputs.0.1", {"kind": "tensor", "dtype": "f", "shape": [1]}), r"inputs\[0\]\[1\]"),
    ("unknown_input_dtype", _set("inputs.0.1", {"kind": "tensor", "dtype": 999, "shape": [1]}), r"inputs\[0\]\[1\]"),
    ("negative_input_dim", _set("inputs.0.1.shape.0", -3), r"inputs\[0\]\[1\]"),
    ("unknown_type_kind", _set("outputs.0.1", {"kind": "map"}), r"outputs\[0\]\[1\]"),
    ("index_is_string", _set("partitions.0.index", "0"), r"partitions\[0\]\.index"),
    ("index_negative", _set("partitions.0.index", -1), r"partitions\[0\]\.index"),
    ("index_repeated", _set("partitions.1.index", 0), r"partitions\[1\]\.index"),
    ("backend_not_string", _set("partitions.0.backend", 3), r"partitions\[0\]\.backend"),
    ("backend_version_missing", _del("partitions.0.backend_version"), r"partitions\[0\]' lacks 'backend_version'"),
    ("partition_unknown_key", _set("partitions.0.extra", 1), r"partitions\[0\]' has unknown keys"),
    ("node_not_pair", _set("partitions.0.nodes.0", ["conv"]), r"partitions\[0\]\.nodes\[0\]"),
    ("node_in_two_partitions", _append("partitions.1.nodes", ["conv", "Conv"]), r"partitions\[1\]\.nodes\[1\]"),
    ("entry_out_of_range", _set("partitions.0.entry", 99), r"partitions\[0\]\.entry"),
    ("entry_negative", _set("partitions.0.entry", -1), r"partitions\[0\]\.entry"),
    ("entry_float", _set("partitions.0.entry", 0.0), r"partitions\[0\]\.entry"),
    ("entry_length_string", _set("entries.0.length", "3"), r"entries\[0\]\.length"),
    ("entry_offset_negative", _set("entries.0.offset", -1), r"entries\[0\]\.offset"),
    ("entry_offset_infinite", _set("entries.0.offset", float("inf")), r"entries\[0\]\.offset"),
    ("entry_no_checksum", _del("entries.0.xxh3_128"), r"entries\[0\]' has no checksum"),
    ("entry_checksum_not_string", _set("entries.0.xxh3_128", 5), r"entries\[0\]\.xxh3_128"),
    ("placement_not_list", _set("placement", {}), r"'placement' must be a JSON array"),
    ("placement_record_not_object", _set("placement.0", "conv"), r"placement\[0\]"),
    ("placement_unknown_node", _set("placement.0.node", "nope"), r"placement\[0\]\.node"),
    ("placement_node_twice", _set("placement.1.node", "conv"), r"placement\[1\]\.node"),
    ("placement_wrong_partition", _set("placement.0.partition", 1), r"placement\[0\]\.partition"),
    ("placement_unknown_backend", _set("placement.0.backend", "tpu"), r"placement\[0\]\.backend"),
    ("placement_missing_node", _del("placement.0.node"), r"placement\[0\]' lacks 'node'"),
    ("placement_unknown_key", _set("placement.0.colour", "red"), r"placement\[0\]' has unknown keys"),
    ("placement_rejected_not_object", _set("placement.0.rejected", ["x"]), r"placement\[0\]\.rejected"),
    ("placement_rejected_value", _set("placement.4.rejected", {"npu_emu": 3}), r"placement\[4\]\.rejected\.npu_emu"),
    ("events_not_list", _set("events", "none"), r"'events' must be a JSON array"),
    ("event_not_object", _set("events", [1]), r"events\[0\]"),
    ("event_missing_kind", _set("events", [{k: v for k, v in EVENT.items() if k != "kind"}]), r"events\[0\]' lacks"),
    ("event_unknown_key", _set("events", [{**EVENT, "when": 1}]), r"events\[0\]' has unknown keys"),
    ("event_nodes_not_strings", _set("events", [{**EVENT, "nodes": [1]}]), r"events\[0\]\.nodes\[0\]"),
    ("event_message_not_string", _set("events", [{**EVENT, "message": None}]), r"events\[0\]\.message"),
    ("config_not_object", _set("config", []), r"'config' must be a JSON object"),
    ("config_unknown_key", _set("config.speed", "max"), r"field 'config' is not a valid config"),
    ("config_bad_value", _set("config.optimization_level", "ludicrous"), r"field 'config' is not a valid config"),
    ("meta_not_object", _set("meta", 3), r"'meta' must be a JSON object"),
    ("meta_graph_name", _set("meta.graph_name", ["g"]), r"meta\.graph_name"),
    ("meta_folded_nodes", _set("meta.folded_nodes", -2), r"meta\.folded_nodes"),
    ("meta_memory_value", _set("meta.memory.planned_peak_bytes", "big"), r"meta\.memory\.planned_peak_bytes"),
    ("meta_passes_count", _set("meta.passes.nodes_before", "5"), r"meta\.passes\.nodes_before"),
    ("meta_passes_ops", _set("meta.passes.ops_after", {"Conv": 1.5}), r"meta\.passes\.ops_after\.Conv"),
    ("meta_pass_record", _set("meta.passes.passes.constant_folding", {"name": 1}), r"meta\.passes\.passes\.constant"),
    ("meta_pass_unknown_key", _set("meta.passes.passes.constant_folding.x", 1), r"meta\.passes\.passes\.constant"),
    ("meta_plans_not_objects", _set("meta.considered_plans", [5]), r"meta\.considered_plans\[0\]"),
    ("meta_plan_estimate", _set("meta.considered_plans", [{**PLAN, "estimated_ms": "fast"}]),
     r"meta\.considered_plans\[0\]\.estimated_ms"),
    ("constant_not_a_graph_output", _set("constants", [{"name": "c", "dtype": "<f4", "shape": [1], "entry": 1}]),
     r"constants\[0\]\.name"),
    ("constant_shadows_partition_output", _set("constants", [{"name": "y", "dtype": "<f4", "shape": [1],
                                                              "entry": 1}]), r"constants\[0\]\.name"),
    ("constant_negative_dim", _set("constants", [{"name": "y", "dtype": "<f4", "shape": [-1], "entry": 1}]),
     r"constants\[0\]\.shape\[0\]"),
    ("constants_duplicate", _set("constants", [{"name": "y", "dtype": "<f4", "shape": [1], "entry": 1}] * 2),
     r"'constants' names 'y' twice|constants\[0\]\.name"),
]

IDS = [m[0] for m in MUTATIONS]


def crafted(original: bytes, mutate: Callable[[dict], Any]) -> bytes:
    """``original`` with ``mutate`` applied to its header (which may return a new one)."""
    head, payload = split(original)
    new = mutate(head)
    return join(head if new is None else new, payload)


@pytest.mark.parametrize("name,mutate,field", MUTATIONS, ids=IDS)
def test_crafted_session_file_names_the_field(original, name, mutate, field):
    data = crafted(original, mutate)
    with pytest.raises(SessionFileError, match=field):
        Session(data)


def test_the_unmutated_file_loads(original):
    Session(crafted(original, lambda h: None)).run(X)


def test_swapped_blobs_are_refused_by_their_backends(original):
    """Partition entries swapped (valid checksums): each backend refuses the
    other's blob with its own clear error (here the NPU's OfflineModelError)."""
    with pytest.raises(NnrtError, match="not an nnrt NPU offline model"):
        Session(crafted(original, lambda h: h["entries"].reverse()))


def test_no_partitions_is_fine_when_every_output_is_a_constant(original):
    head, payload = split(original)
    value = np.arange(5, dtype=np.float32).reshape(1, 5)
    raw = value.tobytes()
    head.update(partitions=[], placement=[], fallbacks=[], inputs=[], constants=[
        {"name": "y", "dtype": "<f4", "shape": [1, 5], "entry": 0}],
        entries=[{"offset": 0, "length": len(raw), "xxh3_128": checksum.hexdigest(raw)}])
    np.testing.assert_array_equal(Session(join(head, raw)).run({})["y"], value)


def test_constant_of_the_wrong_size_or_dtype(original):
    head, payload = split(original)
    raw = np.zeros(3, np.float32).tobytes()
    head.update(partitions=[], placement=[], fallbacks=[], constants=[{"name": "y", "dtype": "<f4", "shape": [1, 5], "entry": 0}],
                entries=[{"offset": 0, "length": len(raw), "xxh3_128": checksum.hexdigest(raw)}])
    with pytest.raises(SessionFileError, match=r"constants\[0\]: holds 12 bytes"):
        Session(join(head, raw))
    for dtype in ("|O", "<U4", "f4,f4", "not a dtype", "<M8[s]"):
        head["constants"][0]["dtype"] = dtype
        with pytest.raises(SessionFileError, match=r"constants\[0\]\.dtype"):
            Session(join(head, raw))


def test_deeply_nested_header_and_type(original):
    head, payload = split(original)
    with pytest.raises(SessionFileError, match="malformed header"):
        Session(join(None, payload, b"[" * 200000 + b"]" * 200000))
    text = json.dumps(head)
    deep = '{"kind": "sequence", "elem": ' * 5000 + "null" + "}" * 5000
    key = json.dumps(head["inputs"][0][1])
    with pytest.raises(SessionFileError):  # the JSON parser or the type reader refuses the depth
        Session(join(None, payload, text.replace(key, deep, 1).encode()))


@pytest.mark.parametrize("name,mutate,field", MUTATIONS, ids=IDS)
def test_crafted_cache_entry_is_rebuilt_with_an_event(tmp_path, original, name, mutate, field):
    cfg = ScheduleConfig(backends=BACKENDS, precision="fp16", cache_dir=str(tmp_path))
    first = Session(small_cnn(), cfg)
    entry = first.cache_path
    with open(entry, "rb") as f:
        data = crafted(f.read(), mutate)
    with open(entry, "wb") as f:
        f.write(data)
    again = Session(small_cnn(), cfg)
    assert not again.cache_hit
    rebuilt = [e for e in again.events if e.kind == "cache_rebuilt"]
    assert len(rebuilt) == 1 and entry in rebuilt[0].message
    assert again.run(X)["y"].tobytes() == first.run(X)["y"].tobytes()
    warm = Session(small_cnn(), cfg)  # the entry was rewritten
    assert warm.cache_hit and not [e for e in warm.events if e.kind == "cache_rebuilt"]


def _corrupt_header(rng: np.random.Generator, original: bytes) -> bytes:
    """1-3 JSON-syntax bytes of the header replaced (so the header usually still parses)."""
    head, payload = split(original)
    hb = bytearray(json.dumps(head).encode())
    for _ in range(int(rng.integers(1, 4))):
        hb[int(rng.integers(len(hb)))] = ord(rng.choice(list('0123456789{}[]":,-.eE ntfxyg_')))
    return join(None, payload, bytes(hb))


_JUNK = [None, True, -1, 0, 7, 2**70, 1.5, float("inf"), "", "x", "g", "conv", "numpy", [], [1], ["x", None],
         {}, {"kind": "tensor"}, {"a": 1}]


def _slots(obj: Any, out: list) -> list:
    """Every (container, key) in the JSON tree under ``obj``."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        out.append((obj, k))
        _slots(v, out)
    return out


def _mutate_tree(rng: np.random.Generator, original: bytes) -> bytes:
    """1-3 values of the header replaced by junk, deleted or swapped with another."""
    head, payload = split(original)
    for _ in range(int(rng.integers(1, 4))):
        slots = _slots(head, [])
        obj, key = slots[int(rng.integers(len(slots)))]
        action = int(rng.integers(3))
        if action == 0:
            obj[key] = copy.deepcopy(_JUNK[int(rng.integers(len(_JUNK)))])
        elif action == 1:
            del obj[key]
        else:
            other, k2 = slots[int(rng.integers(len(slots)))]
            obj[key], other[k2] = copy.deepcopy(other[k2]), copy.deepcopy(obj[key])
    return join(head, payload)


def _corrupt_payload(rng: np.random.Generator, original: bytes) -> bytes:
    """Flip bytes of one partition blob and recompute its entry checksum."""
    head, payload = split(original)
    e = head["entries"][int(rng.integers(len(head["entries"])))]
    blob = bytearray(payload[e["offset"]:e["offset"] + e["length"]])
    for _ in range(int(rng.integers(1, 6))):
        blob[int(rng.integers(len(blob)))] = int(rng.integers(256))
    e["xxh3_128"] = checksum.hexdigest(bytes(blob))
    return join(head, payload[:e["offset"]] + bytes(blob) + payload[e["offset"] + e["length"]:])


def _outcomes(seed: int, corrupt: Callable, original: bytes, n: int = 300) -> dict[str, int]:
    """How ``n`` seeded corruptions end: "ran" or the nnrt error's type name."""
    rng = np.random.default_rng(seed)
    outcomes: dict[str, int] = {}
    for _ in range(n):
        data = corrupt(rng, original)
        try:
            Session(data).run(X)
            kind = "ran"
        except NnrtError as e:
            kind = type(e).__name__
        except Exception as e:  # noqa: BLE001 - the point of the test
            raise AssertionError(f"raw {type(e).__name__}: {e}") from e
        outcomes[kind] = outcomes.get(kind, 0) + 1
    return outcomes


def test_random_header_corruptions_with_valid_checksums_give_our_errors(original):
    """Seeded corruptions of the header's JSON (bytes, and values replaced,
    deleted or swapped), its checksum recomputed: each one loads and runs or
    fails with an nnrt error, never a raw Python exception."""
    values = _outcomes(1600, _mutate_tree, original)
    assert values.get("SessionFileError", 0) >= 200, values  # the rest: harmless (a reason text...) or
    assert set(values) <= {"SessionFileError", "ConfigError", "CompileError", "OfflineModelError", "InputError",
                           "ExecutionError", "ran"}, values  # another backend name / input shape; a declared
    # output shape the partition does not return is caught by the run's output check (ExecutionError naming it)
    syntax = _outcomes(1601, _corrupt_header, original)
    assert syntax.get("SessionFileError", 0) >= 200, syntax


def test_random_blob_corruptions_with_valid_checksums_give_our_errors(original):
    """Seeded byte flips in a partition blob with its entry checksum
    recomputed: the backend refuses it (its own checksum, a parse error) with
    an nnrt error, or it loads and runs (or fails running) as an nnrt error."""
    got = _outcomes(1602, _corrupt_payload, original)
    assert sum(got.values()) == 300 and got.get("ran", 0) < 100, got


# ------------------------------------------------------- not regular files
@pytest.fixture
def cached(tmp_path):
    cfg = ScheduleConfig(backends=["numpy"], cache_dir=str(tmp_path))
    first = Session(small_cnn(), cfg)
    return cfg, first.cache_path, first.run(X)["y"]


@pytest.mark.parametrize("kind", ["dev_zero_link", "fifo", "directory", "dangling_link"])
def test_cache_entry_that_is_not_a_regular_file(cached, kind):
    cfg, entry, want = cached
    os.unlink(entry)
    if kind == "dev_zero_link":
        os.symlink("/dev/zero", entry)
    elif kind == "fifo":
        os.mkfifo(entry)  # opening it for reading would block without O_NONBLOCK
    elif kind == "directory":
        os.mkdir(entry)
    else:
        os.symlink(entry + ".gone", entry)
    again = Session(small_cnn(), cfg)  # returns: no read of /dev/zero, no wait on the FIFO
    assert not again.cache_hit
    (event,) = [e for e in again.events if e.kind == "cache_rebuilt"]
    assert ("not a regular file" in event.message) == (kind != "dangling_link")
    np.testing.assert_array_equal(again.run(X)["y"], want)
    if kind == "directory":  # cannot be replaced by a file: the session says so and runs without the cache
        assert any(e.kind == "cache_disabled" for e in again.events) and "could not be rewritten" in event.message
    else:
        assert event.message.endswith("rewritten") and os.path.isfile(entry) and not os.path.islink(entry)
        assert Session(small_cnn(), cfg).cache_hit


@pytest.mark.parametrize("kind", ["dev_zero_link", "fifo", "directory"])
def test_session_file_that_is_not_a_regular_file(tmp_path, kind):
    path = str(tmp_path / "m.nnrt")
    if kind == "dev_zero_link":
        os.symlink("/dev/zero", path)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        os.mkdir(path)
    assert not session_file.looks_like_session_file(path)  # no blocking open of the FIFO
    with pytest.raises(SessionFileError, match="not a regular file"):
        session_file.read_session_file(path)
    with pytest.raises(NnrtError):  # not a session file, so the model loader refuses it
        Session(path)


def test_files_over_the_limit_are_refused_before_reading(cached, monkeypatch, tmp_path, original):
    cfg, entry, want = cached
    monkeypatch.setattr(session_file, "MAX_FILE_BYTES", 1000)
    again = Session(small_cnn(), cfg)
    (event,) = [e for e in again.events if e.kind == "cache_rebuilt"]
    assert "more than the 1000" in event.message
    path = tmp_path / "big.nnrt"
    path.write_bytes(original)
    with pytest.raises(SessionFileError, match="more than the 1000"):
        Session(str(path))
    with pytest.raises(SessionFileError, match="more than the 10 "):
        session_file.read_bytes(path, "a file", limit=10)


def test_entry_the_backend_cannot_load_is_rebuilt(cached, monkeypatch):
    """A valid entry whose partition the backend fails to load, even with a
    raw Python error, is rebuilt with an event rather than failing every session."""
    cfg, entry, want = cached
    from nnrt_numpy.backend import NumpyBackend

    def broken(self, blob, options):
        raise KeyError("no such thing")
    monkeypatch.setattr(NumpyBackend, "load_compiled", broken)
    again = Session(small_cnn(), cfg)
    (event,) = [e for e in again.events if e.kind == "cache_rebuilt"]
    assert "KeyError" in event.message and "cannot be loaded" in event.message
    with pytest.raises(SessionFileError, match=r"backend 'numpy' failed to load partition 0: KeyError"):
        Session(open(entry, "rb").read())


def test_stale_entry_is_rebuilt_with_an_event(tmp_path):
    cfg = ScheduleConfig(backends=["numpy"], cache_dir=str(tmp_path), cache_version=1)
    Session(small_cnn(), cfg)
    newer = Session(small_cnn(), cfg.replace(cache_version=2))
    (event,) = [e for e in newer.events if e.kind == "cache_rebuilt"]
    assert "stale" in event.message
    assert Session(small_cnn(), cfg.replace(cache_version=2)).cache_hit
