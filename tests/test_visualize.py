"""The placement pictures: the partition graph fits a screen, boxes per partition, edges per boundary."""
from __future__ import annotations

import json
import re
import xml.dom.minidom

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_registry
from fakes import fake_plugin, make_fake_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import SessionFileError
from nnrt_core.tools.cli import main
from nnrt_core.tools.partition_graph import partition_graph
from nnrt_core.tools.partition_layout import BoxGeometry, depths, layered_layout
from nnrt_core.tools.partition_svg import TOOLTIP_NODES, edge_label
from nnrt_core.tools.svg_style import format_bytes, text_color
from nnrt_core.tools.visualize import placement_svg

SCREEN_W, SCREEN_H = 1920, 1080


def _residual(blocks: int, shape=(2, 3)) -> onnx.ModelProto:
    """Repeated blocks: Relu, Mul, Add(skip) on "npu"; Abs, Sigmoid on "dsp";
    Neg on neither (the numpy backup); 10 nodes per block."""
    nodes, x = [], "x"
    for b in range(blocks):
        p = f"b{b}_"
        nodes += [helper.make_node("Relu", [x], [p + "r"], name=p + "relu"),
                  helper.make_node("Mul", [p + "r", p + "r"], [p + "m"], name=p + "mul"),
                  helper.make_node("Add", [p + "m", x], [p + "s"], name=p + "add"),
                  helper.make_node("Relu", [p + "s"], [p + "r2"], name=p + "relu2"),
                  helper.make_node("Abs", [p + "r2"], [p + "a"], name=p + "abs"),
                  helper.make_node("Sigmoid", [p + "a"], [p + "g"], name=p + "sig"),
                  helper.make_node("Mul", [p + "g", p + "r2"], [p + "gm"], name=p + "gate"),
                  helper.make_node("Neg", [p + "gm"], [p + "n"], name=p + "neg"),
                  helper.make_node("Relu", [p + "n"], [p + "n2"], name=p + "relu3"),
                  helper.make_node("Add", [p + "n2", p + "r2"], [p + "o"], name=p + "out")]
        x = p + "o"
    nodes.append(helper.make_node("Relu", [x], ["y"], name="final"))
    g = helper.make_graph(nodes, "residual", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _session(blocks: int, shape=(2, 3)) -> Session:
    npu = make_fake_backend("npu", ["Relu", "Mul", "Add"], priority=100)
    dsp = make_fake_backend("dsp", ["Abs", "Sigmoid"], priority=50)
    reg = make_registry(fake_plugin(npu), fake_plugin(dsp))
    return Session(_residual(blocks, shape), ScheduleConfig(backends=["npu", "dsp"]), registry=reg)


@pytest.fixture(scope="module")
def big() -> Session:
    return _session(60)


def _groups(doc, cls: str) -> list:
    return [g for g in doc.getElementsByTagName("g") if g.getAttribute("class") == cls]


def test_600_node_model_fits_one_screen_with_a_box_per_partition(big):
    assert len(big.placement_report) >= 600 and len({p.backend for p in big.partitions}) == 3
    svg = placement_svg(big, title="residual")
    root = xml.dom.minidom.parseString(svg).documentElement
    w, h = float(root.getAttribute("width")), float(root.getAttribute("height"))
    assert 0 < w <= SCREEN_W and 0 < h <= SCREEN_H
    vx, vy, vw, vh = map(float, root.getAttribute("viewBox").split())
    assert (vx, vy) == (0, 0) and abs(vw / vh - w / h) < 0.01  # scaled, not distorted
    boxes = _groups(root, "partition")
    assert sorted(int(b.getAttribute("data-partition")) for b in boxes) == [p.index for p in big.partitions]
    fill = {}
    for b in boxes:
        fill.setdefault(b.getAttribute("data-backend"), set()).add(b.getElementsByTagName("rect")[0].getAttribute("fill"))
    assert all(len(f) == 1 for f in fill.values()) and len(set.union(*fill.values())) == 3  # one colour per backend
    legend = {g.getAttribute("data-backend"): g.getElementsByTagName("rect")[0].getAttribute("fill")
              for g in _groups(root, "legend-backend")}
    assert legend == {b: f.pop() for b, f in fill.items()}
    npu_nodes = sum(len(p.nodes) for p in big.partitions if p.backend == "npu")
    assert f"npu: {npu_nodes} node(s), " in svg
    old = xml.dom.minidom.parseString(placement_svg(big, detail=True)).documentElement
    assert float(old.getAttribute("height")) > 10 * SCREEN_H  # the per-node picture is still there, and tall


def test_tooltips_list_the_nodes_of_each_partition(big):
    doc = xml.dom.minidom.parseString(placement_svg(big))
    by_index = {p.index: p for p in big.partitions}
    for box in _groups(doc, "partition"):
        part = by_index[int(box.getAttribute("data-partition"))]
        tip = box.getElementsByTagName("title")[0].firstChild.data
        assert tip.startswith(f"partition #{part.index} on {part.backend}: {len(part.nodes)} node")
        listed = [line.strip() for line in tip.split("nodes:\n", 1)[1].splitlines()]
        assert listed[:TOOLTIP_NODES] == list(part.nodes[:TOOLTIP_NODES])
    npu = make_fake_backend("npu", ["Relu", "Mul", "Add", "Abs", "Sigmoid", "Neg"], priority=100)
    sess = Session(_residual(6), ScheduleConfig(backends=["npu"]), registry=make_registry(fake_plugin(npu)))
    assert len(sess.partitions) == 1  # 61 nodes: more than the tooltip lists
    tip = _groups(xml.dom.minidom.parseString(placement_svg(sess)), "partition")[0]
    text = tip.getElementsByTagName("title")[0].firstChild.data
    assert f"… and {61 - TOOLTIP_NODES} more" in text and "b0_relu\n" in text and "final" not in text


def test_boundary_tensors_are_edges_with_names_and_sizes(big):
    doc = xml.dom.minidom.parseString(placement_svg(big))
    edges = {(e.getAttribute("data-source"), e.getAttribute("data-target")): e.getAttribute("data-tensors").split(",")
             for e in _groups(doc, "edge")}
    produced = {t: f"p{p.index}" for p in big.partitions for t in p.outputs}
    produced["x"] = "inputs"
    want: dict = {}
    for p in big.partitions:
        for t in p.inputs:
            want.setdefault((produced[t], f"p{p.index}"), []).append(t)
    want.setdefault((produced["y"], "outputs"), []).append("y")
    assert edges == want
    labels = [t.firstChild.data for t in doc.getElementsByTagName("text") if t.getAttribute("class") == "edge-label"]
    assert len(labels) == len(want) and all(lab.endswith("24 B") for lab in labels)  # 2x3 float32


def _conv_lrn(batch) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.random.RandomState(0).randn(4, 3, 3, 3).astype(np.float32), "w")
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("LRN", ["c"], ["l"], name="lrn", size=3),
         helper.make_node("Relu", ["l"], ["y"], name="relu")],
        "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4, 8, 8])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_fallbacks_are_in_the_legend_and_outlined():
    sess = Session(_conv_lrn(1), ScheduleConfig(backends=["npu_emu"], precision="fp16"))  # the NPU has no LRN
    assert [p.backend for p in sess.partitions] == ["npu_emu", "numpy", "npu_emu"]
    svg = placement_svg(sess)
    assert "fallback events: 1 node_fallback" in svg and "c · 1.0 KB" in svg
    outline = {b.getAttribute("data-partition"): b.getElementsByTagName("rect")[0].getAttribute("stroke")
               for b in _groups(xml.dom.minidom.parseString(svg), "partition")}
    # the NPU partitions carry a warning too: the chip computes in fp16 though fp32 was asked (reduced_precision)
    assert outline == {"0": "#d62728", "1": "#d62728", "2": "#d62728"} and "reduced_precision" in svg
    fp16 = Session(_conv_lrn(1), ScheduleConfig(backends=["npu_emu"], precision="fp16"))
    assert not [e for e in fp16.events if e.kind == "reduced_precision" and "although" in e.message]


def test_dynamic_sizes_are_question_marks_and_compiled_files_draw_from_partitions(tmp_path):
    sess = Session(_conv_lrn("n"), ScheduleConfig(backends=["onnxruntime"], pins={"lrn": "numpy"}))
    assert [p.backend for p in sess.partitions] == ["onnxruntime", "numpy", "onnxruntime"]
    assert "c · ?" in placement_svg(sess) and "fallback events: none" in placement_svg(sess)
    loaded = Session(sess.save(tmp_path / "m.nnrt"))
    assert not loaded.graph.nodes
    doc = xml.dom.minidom.parseString(placement_svg(loaded, title="m.nnrt"))
    assert [b.getAttribute("data-backend") for b in _groups(doc, "partition")] == ["onnxruntime", "numpy",
                                                                                   "onnxruntime"]
    edges = [(e.getAttribute("data-source"), e.getAttribute("data-target")) for e in _groups(doc, "edge")]
    assert sorted(edges) == sorted([("inputs", "p0"), ("p0", "p1"), ("p1", "p2"), ("p2", "outputs")])
    with pytest.raises(SessionFileError, match="no graph to draw node by node"):
        placement_svg(loaded, detail=True)


def test_layout_wraps_long_chains_and_spills_wide_layers():
    chain = [f"k{i}" for i in range(200)]
    preds = {k: ([chain[i - 1]] if i else []) for i, k in enumerate(chain)}
    assert depths(chain, preds)["k199"] == 199
    g = BoxGeometry()
    lay = layered_layout(chain, preds, max_width=1800, max_height=1000, geometry=g)
    assert lay.bands > 1 and 1.2 < lay.width / lay.height < 2.6  # wrapped to about the screen's shape
    short = layered_layout(chain[:6], preds, max_width=1800, max_height=1000, geometry=g)
    assert short.bands == 1 and short.width <= 1800  # no wrap when it fits
    assert all(lay.positions[chain[i]][0] < lay.positions[chain[i + 1]][0] for i in range(199)
               if lay.band_of[chain[i]] == lay.band_of[chain[i + 1]])  # left to right inside a band
    fan = ["src", *[f"m{i}" for i in range(40)], "sink"]
    fan_preds = {"src": [], **{f"m{i}": ["src"] for i in range(40)}, "sink": [f"m{i}" for i in range(40)]}
    wide = layered_layout(fan, fan_preds, max_width=1800, max_height=1000, geometry=g)
    assert wide.height <= 1000 and len({wide.column_of[f"m{i}"] for i in range(40)}) > 1  # the layer spills


def test_labels_and_sizes():
    assert [format_bytes(n) for n in (None, 24, 2048, 800 * 1024, 3 << 20)] == ["?", "24 B", "2.0 KB", "800 KB",
                                                                                 "3.0 MB"]
    assert text_color("#edc948") != text_color("#4e79a7")
    graph = partition_graph(_session(2))
    many = max(graph.edges, key=lambda e: len(e.tensors))
    assert len(edge_label(many, 14)) <= 14


def test_cli_writes_the_partition_picture_and_the_node_picture(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_residual(3), path)
    svg, nodes = tmp_path / "p.svg", tmp_path / "n.svg"
    assert main(["partition", str(path), "--backends", "numpy", "--svg", str(svg), "--svg-nodes", str(nodes)]) == 0
    out = capsys.readouterr().out
    assert f"partition graph coloured by backend written to {svg}" in out and f"written to {nodes}" in out
    assert len(_groups(xml.dom.minidom.parse(str(svg)), "partition")) == 1
    assert len(_groups(xml.dom.minidom.parse(str(nodes)), "node")) == 31
    assert main(["partition", str(path), "--backends", "numpy", "--json", "--svg", str(svg)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["svg"] == str(svg) and "svg_nodes" not in data
    assert re.search(r'width="\d+" height="\d+" viewBox', svg.read_text())
