"""The architecture rules of docs/architecture.md, checked on the source."""
from __future__ import annotations

import ast

import pytest

from architecture import (FOUNDATION, PACKAGE_LAYERS, ROOT, dependency_internals, import_cycles, load_modules,
                          long_functions, package_breaches, package_of, plugin_surface_breaches, private_accesses)

PLUGIN_PACKAGES = ("nnrt_numpy", "nnrt_onnxruntime", "nnrt_openvino", "nnrt_npu_emu", "nnrt_ray", "nnrt_serve",
                   "nnrt_schedulers")


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
        if m.name.split(".")[0] != "nnrt_core" or m.name.startswith("nnrt_core.frontends.onnx") \
                or m.name == "nnrt_core.tools.backend_adapter":  # onnx.backend's test harness over Session
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


def test_packages_import_only_what_the_layer_table_allows(modules):
    assert package_breaches(modules) == []


def test_the_layer_table_has_no_back_arrows_and_names_every_package(modules):
    """The table is a DAG (no package reaches itself through it), the
    foundation imports nothing above it, and every package is in it."""
    def reach(p, seen):
        for q in PACKAGE_LAYERS.get(p, ()):
            if q not in seen:
                seen.add(q)
                reach(q, seen)
        return seen
    assert [p for p in PACKAGE_LAYERS if p in reach(p, set())] == []
    packages = {package_of(m) for m in modules if m.split(".")[0] == "nnrt_core"}
    assert packages - FOUNDATION - set(PACKAGE_LAYERS) == set()
    assert not FOUNDATION & set(PACKAGE_LAYERS)


def test_layer_checker_finds_a_planted_back_arrow(tmp_path):
    pkg = tmp_path / "nnrt_core"
    for sub in ("runtime", "compiler"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("")
    (pkg / "runtime" / "plan.py").write_text("from nnrt_core.compiler.model import X\nfrom nnrt_core import errors\n")
    (pkg / "compiler" / "model.py").write_text("X = 1\nimport nnrt_core.runtime.plan\n")
    (tmp_path / "plugins").mkdir()
    (tmp_path / "schedulers" / "nnrt_schedulers").mkdir(parents=True)
    assert package_breaches(load_modules(tmp_path)) == [
        "runtime -> compiler: nnrt_core.runtime.plan imports nnrt_core.compiler.model"]


def test_plugins_import_only_the_plugin_surface():
    assert plugin_surface_breaches() == []


def test_the_plugin_surface_exports_what_it_lists():
    import nnrt_core.plugin_api as api

    assert api.__all__ == sorted(set(api.__all__))
    for name in api.__all__:
        assert getattr(api, name) is not None, name
    with pytest.raises(AttributeError):
        api.no_such_name


def test_surface_checker_finds_planted_breaches(tmp_path):
    pkg = tmp_path / "plugins" / "x" / "nnrt_x"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("from nnrt_core.plugin_api import Backend\nfrom nnrt_core.ir import Graph\n"
                              "from nnrt_core.control import RunControl\nimport nnrt_core.compiler\n"
                              "from nnrt_core import Session\nfrom nnrt_numpy.host_kernels import clip\n"
                              "from nnrt_numpy.parallel import run_chunks\n")
    (tmp_path / "schedulers" / "nnrt_schedulers").mkdir(parents=True)
    found = [f.split(" ", 1)[1] for f in plugin_surface_breaches(tmp_path)]
    assert found == ["from nnrt_core.control import RunControl", "import nnrt_core.compiler",
                     "from nnrt_core import Session", "from nnrt_numpy.parallel import run_chunks"]


def test_no_private_names_of_dependencies_no_import_state_writes_no_ctypes_loading():
    """0 imports or reads of ``_``-prefixed modules/attributes of other
    distributions (onnx, protobuf, numpy, onnxruntime...), 0 writes to
    ``sys.modules`` / ``sys.meta_path``, 0 shared libraries loaded through
    ctypes (the platform's C library aside)."""
    assert dependency_internals() == []


def test_internals_checker_finds_planted_uses(tmp_path):
    pkg = tmp_path / "nnrt_core"
    pkg.mkdir()
    (pkg / "a.py").write_text(
        "import ctypes, sys, importlib\nimport numpy as np\nimport google._upb._message\n"
        "from numpy._core import umath\nfrom onnx import _private_thing\nfrom onnx import helper\n"
        "x = np._core.umath\ny = helper._internal\nsys.modules['onnx.x'] = x\nsys.meta_path.insert(0, x)\n"
        "lib = ctypes.CDLL('libonnx.so')\nctypes.CDLL('libc.so.6')\nimportlib.import_module('numpy._core.umath')\n"
        "ok = np.__version__, sys.modules.get('onnx'), ctypes.memmove\n")
    (tmp_path / "plugins").mkdir()
    (tmp_path / "schedulers" / "nnrt_schedulers").mkdir(parents=True)
    found = sorted(f.split(" ", 1)[1] for f in dependency_internals(tmp_path))
    assert found == sorted([
        "imports private module google._upb._message", "imports from private module numpy._core",
        "imports private name _private_thing of onnx", "reads private attribute np._core",
        "reads private attribute helper._internal", "writes sys.modules[...]", "changes sys.meta_path (insert)",
        "loads a shared library through ctypes.CDLL", "imports private module numpy._core.umath by name",
        "names private module numpy._core.umath"])


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
