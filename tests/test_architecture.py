"""The architecture rules of docs/architecture.md, checked on the source."""
from __future__ import annotations

import ast

import pytest

from architecture import ROOT, import_cycles, load_modules, long_functions, private_accesses

PLUGIN_PACKAGES = ("nnrt_numpy", "nnrt_onnxruntime", "nnrt_openvino", "nnrt_npu_emu", "nnrt_ray", "nnrt_schedulers")


@pytest.fixture(scope="module")
def modules():
    return load_modules()


def test_the_checker_sees_every_package(modules):
    tops = {name.split(".")[0] for name in modules}
    assert tops == {"nnrt_core", *PLUGIN_PACKAGES}
    assert "nnrt_core.session" in modules and "nnrt_core.compiler.build" in modules


def test_no_import_cycles(modules):
    assert import_cycles(modules) == []


def test_no_module_reads_another_modules_private_names(modules):
    assert private_accesses(modules) == []


def test_no_function_over_80_lines(modules):
    assert long_functions(modules, 80) == []


def test_no_module_over_450_lines_outside_op_kernels(modules):
    big = {m.name: m.lines for m in modules.values() if m.lines > 450 and ".ops." not in m.name}
    assert big == {}


def test_session_is_a_thin_facade(modules):
    assert modules["nnrt_core.session"].lines <= 300


def test_the_core_imports_no_plugin(modules):
    core = [m for m in modules.values() if m.name.split(".")[0] == "nnrt_core"]
    reached = {(m.name, i) for m in core for i in m.imports if i.split(".")[0] in PLUGIN_PACKAGES}
    assert reached == set()


def test_onnx_is_imported_only_by_the_onnx_frontend(modules):
    users = set()
    for m in modules.values():
        if m.name.split(".")[0] != "nnrt_core" or m.name.startswith("nnrt_core.frontends.onnx"):
            continue
        for node in ast.walk(m.tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == "onnx" or n.startswith("onnx.") for n in names):
                users.add(m.name)
    assert users == set()


def test_tflite_is_imported_only_by_the_tflite_frontend(modules):
    users = set()
    for m in modules.values():
        if m.name.startswith("nnrt_core.frontends.tflite."):
            continue
        for node in ast.walk(m.tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == "tflite" or n.startswith("tflite.") for n in names):
                users.add(m.name)
    assert users == set()
    assert "nnrt_core.frontends.tflite.schema" in modules


def test_checker_finds_a_planted_cycle_and_private_access(tmp_path):
    pkg = tmp_path / "nnrt_core"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from nnrt_core.b import thing\n_secret = 1\n")
    (pkg / "b.py").write_text("import nnrt_core.a\nthing = nnrt_core.a._secret\n")
    (tmp_path / "plugins").mkdir()
    (tmp_path / "schedulers" / "nnrt_schedulers").mkdir(parents=True)
    mods = load_modules(tmp_path)
    assert import_cycles(mods) == [["nnrt_core.a", "nnrt_core.b"]]
    assert private_accesses(mods) == ["nnrt_core.b:2 nnrt_core.a._secret"]
    assert ROOT.name  # the real tree is the default root
