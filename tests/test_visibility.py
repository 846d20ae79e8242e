"""Seeing a placement: partition table, SVG, estimated costs; the accuracy check."""
from __future__ import annotations

import json
import xml.dom.minidom

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_registry
from fakes import fake_plugin, make_fake_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.tools.accuracy import check_accuracy, compare_tensors
from nnrt_core.tools.cli import main
from nnrt_core.errors import ConfigError
from nnrt_core.tools.visualize import format_partition_table, partition_rows, placement_svg
from test_partitioning import X, chain, model


def _branchy():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"),
             helper.make_node("Abs", ["a"], ["b"], name="abs"),
             helper.make_node("Neg", ["a"], ["c"], name="neg"),
             helper.make_node("Add", ["b", "c"], ["y"], name="add")]
    return model(nodes)


def _small_conv(tmp_path) -> str:
    rs = np.random.RandomState(0)
    w = numpy_helper.from_array(rs.randn(4, 3, 3, 3).astype(np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"], name="relu"),
         helper.make_node("LRN", ["r"], ["l"], name="lrn", size=3),
         helper.make_node("Sigmoid", ["l"], ["y"], name="sig")],
        "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    path = tmp_path / "conv.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def test_partition_rows_table_and_estimates():
    npu = make_fake_backend("npu", ["Relu", "Add", "Neg"], priority=100)
    reg = make_registry(fake_plugin(npu))
    sess = Session(_branchy(), ScheduleConfig(backends=["npu"]), registry=reg)
    rows = partition_rows(sess)
    assert [(r["backend"], r["node_count"]) for r in rows] == [("npu", 2), ("numpy", 1), ("npu", 1)]
    assert rows[1]["inputs"] == ["a"] and rows[1]["outputs"] == ["b"] and rows[1]["op_counts"] == {"Abs": 1}
    assert all(r["estimated_ms"] > 0 and r["estimate_source"] == "analytic" for r in rows)
    assert sess.partitions[0].details["estimated_ms"] == rows[0]["estimated_ms"]
    table = format_partition_table(sess)
    assert "est. ms" in table and "a -> b" in table and "3 partition(s), 4 node(s), estimated" in table


def test_svg_colours_nodes_by_backend_and_marks_boundaries():
    npu = make_fake_backend("npu", ["Relu", "Add", "Neg"], priority=100)
    reg = make_registry(fake_plugin(npu))
    sess = Session(_branchy(), ScheduleConfig(backends=["npu"]), registry=reg)
    svg = placement_svg(sess, detail=True)  # the per-node picture (the default draws partitions)
    doc = xml.dom.minidom.parseString(svg)  # well-formed
    groups = {g.getAttribute("data-node"): g for g in doc.getElementsByTagName("g")}
    assert set(groups) == {"relu", "abs", "neg", "add"}
    fill = {n: g.getElementsByTagName("rect")[0].getAttribute("fill") for n, g in groups.items()}
    assert fill["relu"] == fill["neg"] == fill["add"] != fill["abs"]
    assert groups["abs"].getAttribute("data-backend") == "numpy"
    y = {n: float(g.getElementsByTagName("rect")[0].getAttribute("y")) for n, g in groups.items()}
    assert y["relu"] < y["abs"] == y["neg"] < y["add"]  # layered by dependency depth
    dashed = [ln for ln in doc.getElementsByTagName("line") if ln.getAttribute("stroke-dasharray")]
    assert len(dashed) == 4  # relu->abs, abs->add, neg->add cross partitions (+ the legend sample)
    assert "npu: 3 node(s), 2 partition(s)" in svg


def test_cli_partition_prints_table_and_writes_svg(capsys, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(chain("Relu", "Neg", "Abs"), path)
    svg = tmp_path / "m.svg"
    assert main(["partition", str(path), "--backends", "numpy", "--svg", str(svg)]) == 0
    out = capsys.readouterr().out
    assert "numpy" in out and "Relux1" in out and f"written to {svg}" in out
    xml.dom.minidom.parse(str(svg))
    assert main(["partition", str(path), "--backends", "numpy", "--json", "--svg", str(svg)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["svg"] == str(svg) and data["partitions"][0]["details"]["estimate_source"] == "analytic"


def test_accuracy_check_reports_each_partition(tmp_path):
    path = _small_conv(tmp_path)
    report = check_accuracy(path, ScheduleConfig(backends=["npu_emu"], precision="fp16"))
    assert [p.backend for p in report.partitions] == ["npu_emu", "numpy", "npu_emu"]
    first = report.partitions[0]
    assert [d.name for d in first.outputs] == ["r"]  # the boundary tensor, exposed on the reference run
    assert 0 < first.max_rel < 1e-2  # fp16 on the NPU vs numpy fp32
    assert report.outputs[0].name == "y" and report.max_rel >= first.max_rel
    text = report.format()
    assert "npu_emu" in text and "output y" in text
    same = check_accuracy(path, ScheduleConfig(backends=["numpy"]))
    assert same.max_abs == 0.0


def test_cli_check_json_and_threshold(capsys, tmp_path):
    path = _small_conv(tmp_path)
    assert main(["check", path, "--backends", "npu_emu", "--precision", "fp16", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["reference"] == "numpy" and len(data["partitions"]) == 3 and data["ok"]
    assert data["partitions"][0]["outputs"][0]["name"] == "r"
    assert main(["check", path, "--backends", "npu_emu", "--precision", "fp16", "--max-rel", "1e-9"]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert main(["check", path, "--backends", "npu_emu", "--reference", "tpu"]) == 2
    assert "unknown backend 'tpu'; installed backends:" in capsys.readouterr().err


def test_compare_tensors_edge_cases():
    a = np.array([1.0, 2.0], np.float32)
    assert compare_tensors("t", a, a).max_abs == 0
    d = compare_tensors("t", a, np.array([1.0, 4.0], np.float32))
    assert d.max_abs == 2 and d.max_rel == 0.5
    assert "shape mismatch" in compare_tensors("t", a, a[:1]).note
    assert compare_tensors("t", np.array([np.nan]), np.array([1.0])).max_abs == np.inf
