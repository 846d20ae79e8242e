"""A session loaded from a compiled file falls back after an fp16 overflow as
an in-process session does: the file (format 3) keeps each fp16 partition's
nodes compiled for the backup (nnrt_core/compiler/stored_fallback.py)."""
from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from nnrt_core import ScheduleConfig, Session, SessionFileError
from nnrt_core.errors import ExecutionError
from nnrt_core.storage import session_file
from test_crafted_files import join, split
from test_fp16_overflow import BIG, SMALL, rel, rms, rms_model

FP16 = ScheduleConfig(backends=["npu_emu"], backup="numpy", precision="fp16")


def _events(sess: Session) -> list[str]:
    return [e.message for e in sess.events if e.kind == "overflow_fallback"]


def test_an_overflow_in_a_loaded_session_falls_back_like_in_process(tmp_path):
    in_process = Session(rms_model(), FP16)
    path = in_process.save(tmp_path / "rms.nnrt")
    want = in_process.run({"x": BIG})["y"]  # in-process: rebuilt from the source with the nodes on numpy
    loaded = Session(path)
    assert [p.backend for p in loaded.partitions] == ["npu_emu"]
    assert rel(loaded.run({"x": SMALL})["y"], rms(SMALL)) < 2e-3  # fp16 on the chip, no overflow
    got = loaded.run({"x": BIG})["y"]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got, Session(rms_model(), ScheduleConfig(backends=["numpy"])).run({"x": BIG})["y"],
                               rtol=1e-6)
    assert [p.backend for p in loaded.partitions] == ["numpy"]
    assert _events(loaded) == _events(in_process)  # the same event, naming the same partition and node
    report = {p.node: p for p in loaded.placement_report}
    assert report["square"].backend == "numpy" and report["square"].rejected["npu_emu"] == "fp16 overflow at run time"
    np.testing.assert_array_equal(loaded.run({"x": BIG})["y"], want)  # later runs keep the new plan
    resaved = Session(loaded.save(tmp_path / "again.nnrt"))
    assert [p.backend for p in resaved.partitions] == ["numpy"]
    np.testing.assert_array_equal(resaved.run({"x": BIG})["y"], want)


def test_a_loaded_file_passes_its_fallback_on_when_saved_again(tmp_path):
    first = Session(Session(rms_model(), FP16).save(tmp_path / "a.nnrt"))
    second = Session(first.save(tmp_path / "b.nnrt"))  # no graph to compile from: the stored copy travels
    np.testing.assert_array_equal(second.run({"x": BIG})["y"], Session(rms_model(), FP16).run({"x": BIG})["y"])
    assert _events(second)


def test_only_overflowing_precisions_with_fallback_store_a_copy(tmp_path):
    def fallbacks(cfg: ScheduleConfig) -> list:
        head, _ = split(Session(rms_model(), cfg).save(tmp_path / "m.nnrt").read_bytes())
        return head["fallbacks"]

    (rec,) = fallbacks(FP16)
    assert rec["partition"] == 0 and rec["backend"] == "numpy" and rec["form"] == "onnx"
    assert fallbacks(FP16.replace(on_overflow="raise")) == []
    assert fallbacks(FP16.replace(on_overflow="warn")) == []
    assert fallbacks(ScheduleConfig(backends=["numpy"])) == []
    assert fallbacks(ScheduleConfig(backends=["npu_emu"], backup="numpy")) == []  # fp32: the chip declined it all


def test_a_file_without_a_stored_copy_says_why_it_cannot_fall_back(tmp_path):
    data = Session(rms_model(), FP16).save(tmp_path / "m.nnrt").read_bytes()
    head, payload = split(data)
    head["fallbacks"] = []  # as an older nnrt wrote it (format 2 had none)
    hb = json.dumps(head).encode()  # format 2's header checksum is sha256
    old = struct.Struct("<8sIIQ32s").pack(session_file.MAGIC, 2, 0, len(hb), session_file.header_digest(hb, 2))
    sess = Session(old + hb + payload)
    assert rel(sess.run({"x": SMALL})["y"], rms(SMALL)) < 2e-3
    with pytest.raises(ExecutionError, match="stores no backup copy of its partitions"):
        sess.run({"x": BIG})


def test_a_corrupted_stored_copy_is_refused_at_load(tmp_path):
    data = bytearray(Session(rms_model(), FP16).save(tmp_path / "m.nnrt").read_bytes())
    head, payload = split(bytes(data))
    entry = head["entries"][head["fallbacks"][0]["entry"]]
    start = len(data) - len(payload) + entry["offset"]
    data[start + entry["length"] // 2] ^= 0xFF
    with pytest.raises(SessionFileError, match=r"entry \d+ checksum mismatch"):
        Session(bytes(data))


def test_a_stored_copy_of_other_nodes_is_refused_when_it_is_needed(tmp_path):
    """A crafted file whose copy (valid checksums) is another model: the overflow's fallback says so."""
    from nnrt_core.storage import checksum

    data = Session(rms_model(), FP16).save(tmp_path / "m.nnrt").read_bytes()
    head, payload = split(data)
    proto = rms_model()
    proto.graph.input[0].name = proto.graph.node[0].input[0] = proto.graph.node[0].input[1] = "q"
    other = proto.SerializeToString()  # the same nodes reading another input
    k = head["fallbacks"][0]["entry"]
    head["entries"].append({"offset": len(payload), "length": len(other), "xxh3_128": checksum.hexdigest(other)})
    head["fallbacks"][0]["entry"] = len(head["entries"]) - 1
    assert k != head["fallbacks"][0]["entry"]
    sess = Session(join(head, payload + other))
    with pytest.raises(ExecutionError, match="failed to load the copy of partition 0 stored in the session file"):
        sess.run({"x": BIG})


def test_the_format_version_is_3_and_newer_files_are_refused(tmp_path):
    data = bytearray(Session(rms_model(), FP16).save(tmp_path / "m.nnrt").read_bytes())
    assert struct.unpack_from("<I", data, 8)[0] == session_file.FORMAT_VERSION == 3
    struct.pack_into("<I", data, 8, 4)
    with pytest.raises(session_file.NewerFormatError, match="format version 4"):
        Session(bytes(data))
    assert json.loads(json.dumps(split(bytes(data))[0]["fallbacks"]))  # plain JSON records, no code
