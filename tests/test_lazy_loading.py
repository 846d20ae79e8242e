"""Time to first inference: what a process imports (plugins, NumPy op modules,
SciPy, onnx), the NumPy op index, the lazy registry, warm-up at build and the
build's stage timings."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import builtin_entry_points, make_registry
from fakes import fake_plugin, make_fake_backend
from nnrt_core import ScheduleConfig, Session
from nnrt_core.registry import BACKEND_GROUP, Registry
from nnrt_numpy.kernel import KernelRegistry, NodeInfo, REGISTRY

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ("nnrt_numpy", "nnrt_onnxruntime", "nnrt_npu_emu", "nnrt_schedulers", "nnrt_ray")


def _python(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON line."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


MODULES = """
import json, sys
def loaded(prefixes):
    return sorted(m for m in sys.modules if m.split(".")[0] in prefixes)
"""


def test_import_nnrt_core_imports_no_numpy_onnx_or_plugin():
    out = _python(MODULES + """
import nnrt_core
from nnrt_core import NnrtError, ConfigError, __version__
print(json.dumps(loaded({"numpy", "onnx", "onnxruntime", "scipy", "pluggy", *%r})))
""" % (PLUGINS,))
    assert out == [], out


def test_nnrt_help_imports_no_numpy_onnx_or_plugin():
    out = _python(MODULES + """
from nnrt_core.tools.cli import main
try:
    main(["--help"])
except SystemExit:
    pass
print(json.dumps(loaded({"numpy", "onnx", "onnxruntime", "scipy", *%r})))
""" % (PLUGINS,))
    assert out == [], out


ORT_SESSION = MODULES + """
import numpy as np
from onnx import TensorProto, helper
from nnrt_core import ScheduleConfig, Session
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
w = helper.make_node("Constant", [], ["w"], value=helper.make_tensor("w", TensorProto.FLOAT, [3], [1, 2, 3]))
nodes = [w, helper.make_node("Add", ["x", "w"], ["t"]), helper.make_node("Sigmoid", ["t"], ["y"])]
model = helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
sess = Session(model.SerializeToString(), ScheduleConfig(backends=[%r]))
sess.run({"x": np.ones((2, 3), np.float32)})
print(json.dumps({"modules": loaded({"scipy", *%r}), "placement": sorted(set(sess.placement.values()))}))
"""


def test_session_on_onnxruntime_imports_only_what_it_uses():
    pytest.importorskip("onnxruntime")
    out = _python(ORT_SESSION % ("onnxruntime", PLUGINS))
    assert out["placement"] == ["onnxruntime"]
    mods = out["modules"]
    assert not any(m.startswith(("nnrt_npu_emu", "nnrt_ray", "scipy")) for m in mods), mods
    assert "nnrt_schedulers.cost" not in mods and "nnrt_schedulers.priority" in mods
    ops = [m for m in mods if m.startswith("nnrt_numpy.ops.") and m.count(".") == 3]
    # the backup's kernels for what the build evaluated (the Constant was folded without one)
    assert not any(m.startswith(("nnrt_numpy.ops.contrib", "nnrt_numpy.ops.math.unary")) for m in ops), ops
    assert len(ops) <= 3, ops


ORT_FILE_SESSION = MODULES + """
import numpy as np
from nnrt_core import ScheduleConfig, Session
path, backend = %r, %r
sess = Session(path) if path.endswith(".nnrt") else Session(path, ScheduleConfig(backends=[backend]))
sess.run({sess.inputs[0].name: np.ones((1, 3, 224, 224), np.float32)})
print(json.dumps({"onnx": loaded({"onnx", "ml_dtypes", "difflib", "asyncio", "google"})
                          + [m for m in ["importlib.metadata"] if m in sys.modules],
                  "hashlib": "hashlib" in sys.modules,
                  "stdlib": [m for m in %r if m in sys.modules],
                  "nnrt": [m for m in %r if m in sys.modules],
                  "gc_enabled": __import__("gc").isenabled(),
                  "placement": sorted(set(sess.placement.values()))}))
"""
#: what a file session and its first run do not import (see docs/plugins.md#what-a-session-imports):
#: logging and concurrent.futures (~3 ms, imported by the first log record that can be emitted and by
#: asynchronous runs), dataclasses (nnrt_core.record), importlib.abc
NOT_ON_FILE_SESSION = ("logging", "concurrent.futures", "dataclasses", "importlib.abc")
#: nnrt modules for session files, the model cache and streams
NNRT_NOT_ON_FILE_SESSION = ("nnrt_core.runtime.streams", "nnrt_numpy.stored", "nnrt_core.storage.model_cache")


@pytest.mark.parametrize("backend", ["onnxruntime", "numpy"])
def test_session_from_an_onnx_file_imports_only_what_it_uses(light_dir, backend):
    """An ``.onnx`` file's session imports ``onnx`` (its checker, shape
    inference and schemas) but none of the modules a plain session does not use."""
    pytest.importorskip(backend)
    out = _python(ORT_FILE_SESSION % (str(light_dir / "light_squeezenet.onnx"), backend, NOT_ON_FILE_SESSION,
                                      NNRT_NOT_ON_FILE_SESSION))
    assert out["placement"] == [backend]
    assert "onnx" in out["onnx"]
    assert not out["hashlib"], "hashlib (OpenSSL's binding, ~3 ms) is for cache keys and old files only"
    assert set(out["stdlib"]) <= {"importlib.abc", "dataclasses"} and out["nnrt"] == [], out  # onnx imports those
    assert out["gc_enabled"], "imports pause the cyclic GC and must re-enable it"


def test_session_from_a_compiled_nnrt_file_does_not_import_onnx(light_dir, tmp_path):
    """The deployment path: a session file compiled for ONNX Runtime loads and
    runs without ``onnx`` (nor protobuf, ml_dtypes, asyncio, importlib.metadata)."""
    pytest.importorskip("onnxruntime")
    path = tmp_path / "squeezenet.nnrt"
    Session(str(light_dir / "light_squeezenet.onnx"), ScheduleConfig(backends=["onnxruntime"])).save(str(path))
    out = _python(ORT_FILE_SESSION % (str(path), "onnxruntime", NOT_ON_FILE_SESSION, ()))
    assert out["placement"] == ["onnxruntime"]
    assert out["onnx"] == [], out["onnx"]
    assert out["stdlib"] == [], out
    assert out["gc_enabled"]


#: nnrt modules a plain session does not use, imported on first use
LAZY_NNRT = ("nnrt_core.compiler.isolate", "nnrt_core.storage.model_cache")


def test_plain_session_leaves_isolated_builds_and_the_model_cache_unimported(light_dir, tmp_path):
    """A session without ``isolate`` or a cache folder imports neither
    module; one with a cache folder imports the cache when it opens it."""
    pytest.importorskip("onnxruntime")
    out = _python(MODULES + """
import numpy as np
from nnrt_core import ScheduleConfig, Session
path, lazy, cache = %r, %r, %r
feeds = lambda s: {s.inputs[0].name: np.ones((1, 3, 224, 224), np.float32)}
sess = Session(path, ScheduleConfig(backends=["onnxruntime"]))
y = sess.run(feeds(sess))
plain = [m for m in lazy if m in sys.modules]
cached = Session(path, ScheduleConfig(backends=["onnxruntime"], cache_dir=cache))
out = cached.run(feeds(cached))
same = list(out) == list(y) and all(np.array_equal(out[k], y[k]) for k in y)
hit = Session(path, ScheduleConfig(backends=["onnxruntime"], cache_dir=cache))
print(json.dumps({"plain": plain, "cached": [m for m in lazy if m in sys.modules], "same": same,
                  "hit": hit.compiled_model.cache_hit, "logging": "logging" in sys.modules}))
""" % (str(light_dir / "light_squeezenet.onnx"), LAZY_NNRT, str(tmp_path / "cache")))
    assert out["plain"] == [], out
    assert out["cached"] == ["nnrt_core.storage.model_cache"] and out["same"], out
    assert out["hit"] and not out["logging"], "the model cache logs through nnrt_core.logs (logging: first record)"


def test_exotic_element_types_import_ml_dtypes_on_first_use():
    out = _python(MODULES + """
import numpy as np
from nnrt_core.ir import DataType
native = [DataType.from_numpy(np.float16).name, DataType.FLOAT.numpy.name]
before = loaded({"ml_dtypes"})
import ml_dtypes  # a user's array of an exotic type: its dtype maps without asking DataType first
e5m2 = DataType.from_numpy(np.dtype(ml_dtypes.float8_e5m2)).name
print(json.dumps([native, before, e5m2, DataType.BFLOAT16.numpy.name, DataType.INT4.itemsize]))
""")
    assert out == [["FLOAT16", "float32"], [], "FLOAT8E5M2", "bfloat16", 1]


def test_numpy_session_imports_the_kernels_of_its_ops_only():
    out = _python(ORT_SESSION % ("numpy", PLUGINS))
    mods = out["modules"]
    ops = {m for m in mods if m.startswith("nnrt_numpy.ops.") and m.count(".") == 3}
    assert ops == {"nnrt_numpy.ops.math.arith", "nnrt_numpy.ops.math._binary", "nnrt_numpy.ops.nn.activation"}, ops
    assert "scipy" in mods  # Sigmoid uses scipy.special.expit: imported at compile, not in the first run
    assert not any(m.startswith(("nnrt_onnxruntime", "nnrt_npu_emu")) for m in mods), mods


# ---------------------------------------------------------------- op index
def test_op_index_matches_what_every_op_module_registers():
    """Each op module imported alone (fresh registry, fresh modules) registers
    the ops the index gives it, and together they register exactly the index."""
    out = _python("""
import importlib, json, pkgutil, sys
import nnrt_numpy.ops as ops_pkg
from nnrt_numpy import kernel
from nnrt_numpy.op_index import OP_MODULES
names = sorted(m.name for m in pkgutil.walk_packages(ops_pkg.__path__, "nnrt_numpy.ops.")
               if not m.ispkg and not m.name.rsplit(".", 1)[1].startswith("_"))
registered = {}
for name in names:
    for m in [m for m in sys.modules if m.startswith("nnrt_numpy.ops.")]:
        del sys.modules[m]
    kernel.REGISTRY._kernels.clear()
    importlib.import_module(name)
    registered[name] = sorted(kernel.REGISTRY._kernels)
problems = []
indexed = {(d, op): "nnrt_numpy.ops." + m for d, ops in OP_MODULES.items() for op, m in ops.items()}
for (d, op), module in indexed.items():
    if (d, op) not in registered.get(module, []):
        problems.append(f"index: {d}:{op} -> {module}, which does not register it")
every = {tuple(k) for keys in registered.values() for k in keys}
problems += [f"{d}:{op} is registered but not in the index" for d, op in sorted(every - set(indexed))]
problems += [f"{m} registers nothing the index names" for m in names if not any(v == m for v in indexed.values())]
print(json.dumps(problems))
""")
    assert out == []


def test_lazy_kernel_registry_errors_list_what_is_available():
    reason = REGISTRY.why_unsupported(NodeInfo("n", "Reluu", opset=17))
    assert "no kernel for op 'Reluu'" in reason and "closest: Relu" in reason and "ops in that domain" in reason
    assert REGISTRY.why_unsupported(NodeInfo("n", "Relu", opset=17)) is None
    assert ("", "Relu") in REGISTRY and ("", "Reluu") not in REGISTRY


def test_kernel_module_failing_to_import_disables_its_ops_only():
    reg = KernelRegistry({"": {"Broken": "nn.no_such_module", "Relu": "nn.relu"}})
    reason = reg.why_unsupported(NodeInfo("n", "Broken", opset=17))
    assert "nnrt_numpy.ops.nn.no_such_module failed to import" in reason and "ModuleNotFoundError" in reason
    assert reg.lookup("", "Broken", 17) is None
    assert REGISTRY.lookup("", "Relu", 17) is not None  # the other ops are unaffected
    assert "2 ops in that domain" in reg.why_unsupported(NodeInfo("n", "Nope", opset=17))


# ---------------------------------------------------------- lazy registry
def test_registry_imports_a_plugin_only_when_asked(monkeypatch, tmp_path):
    (tmp_path / "nnrt_test_lazy_plugin.py").write_text("raise RuntimeError('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = metadata.EntryPoint(name="lazy", value="nnrt_test_lazy_plugin", group=BACKEND_GROUP)
    reg = Registry(entry_points=lambda g: builtin_entry_points(g) + ([ep] if g == BACKEND_GROUP else []), env={})
    assert reg.loaded_plugins() == []
    assert reg.backend("numpy").available
    assert reg.loaded_plugins() == ["numpy"] and "nnrt_test_lazy_plugin" not in sys.modules
    rec = next(p for p in reg.plugin_records if p.name == "lazy")  # listing imports every plugin
    assert rec.status == "failed" and "imported" in rec.reason


def test_plugin_discovery_reads_entry_points_without_importlib_metadata():
    """importlib.metadata (~17 ms with the email package) is left to whatever
    else needs it (the onnx package does; a file session imports neither, see
    below); discovery finds the built-in plugins."""
    out = _python(MODULES + """
from nnrt_core.registry import default_registry
reg = default_registry()
before = "importlib.metadata" in sys.modules
found = reg.find_backend("numpy") is not None
print(json.dumps({"metadata_before_load": before, "found": found, "loaded": reg.loaded_plugins()}))
""")
    assert out == {"metadata_before_load": False, "found": True, "loaded": ["numpy"]}, out


def test_backend_named_unlike_its_entry_point_is_found():
    from nnrt_core.hookspec import hookimpl

    class Plugin:
        @hookimpl
        def nnrt_backends(self):
            return [make_fake_backend("renamed", ["Relu"])]

    sys.modules["nnrt_test_renamed_plugin"] = Plugin()
    try:
        ep = metadata.EntryPoint(name="other_name", value="nnrt_test_renamed_plugin", group=BACKEND_GROUP)
        reg = Registry(entry_points=lambda g: builtin_entry_points(g) + ([ep] if g == BACKEND_GROUP else []), env={})
        assert reg.find_backend("renamed") is not None and reg.backend("renamed").available
        assert reg.find_backend("missing") is None
    finally:
        del sys.modules["nnrt_test_renamed_plugin"]


# ----------------------------------------------------- warm-up and stats
def _relu_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g", [x], [y])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _warm_backend(calls: list[str], fail: bool):
    base = make_fake_backend("warm", ["Relu"], priority=100)

    class Warm(base):  # type: ignore[misc, valid-type]
        def _compile(self, graph, options):
            part = super()._compile(graph, options)

            def warm_up() -> None:
                calls.append(part.name)
                if fail:
                    raise RuntimeError("warm-up exploded")

            part.warm_up = warm_up
            return part

    return Warm


@pytest.mark.parametrize("fail", [False, True])
def test_every_partition_is_warmed_up_once_at_build(fail, caplog):
    calls: list[str] = []
    reg = make_registry(fake_plugin(_warm_backend(calls, fail)))
    sess = Session(_relu_model(), ScheduleConfig(backends=["warm"]), registry=reg)
    assert len(calls) == 1
    x = np.array([[-1, 0, 1], [2, -3, 4]], np.float32)
    np.testing.assert_array_equal(sess.run({"x": x})["y"], np.maximum(x, 0))
    assert len(calls) == 1  # not again per run
    assert ("warm-up exploded" in caplog.text) == fail


def test_stats_say_what_the_build_spent_where():
    sess = Session(_relu_model(), ScheduleConfig(backends=["numpy"]))
    stats = sess.stats()
    build = stats["build"]
    assert {"select", "load", "optimize", "place", "compile:numpy", "explain", "warmup"} <= set(build)
    assert all(isinstance(v, float) and v >= 0 for v in build.values()), build
    assert sum(build.values()) <= stats["build_seconds"] * 1.01 + 1e-3


def test_numpy_warm_up_starts_helpers_and_touches_the_arena():
    from nnrt_numpy import parallel

    sess = Session(_relu_model(), ScheduleConfig(backends=["numpy"]))
    part = sess.compiled_model.steps[0].compiled
    assert part.warm_heap_bytes == 0  # one node: its output is the graph's, nothing intermediate
    if parallel.CORES > 1:
        assert any(t.name.startswith("nnrt-numpy-") for t in __import__("threading").enumerate())


def test_constant_nodes_fold_without_a_backend():
    nodes = [helper.make_node("Constant", [], ["a"], value_floats=[1.0, 2.0]),
             helper.make_node("Constant", [], ["b"], value_int=3),
             helper.make_node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["a", "bf"], ["c"]),
             helper.make_node("Add", ["x", "c"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    sess = Session(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    assert [n.op_type for n in sess.graph.nodes] == ["Add"]
    np.testing.assert_array_equal(sess.run({"x": np.zeros(2, np.float32)})["y"], [3.0, 6.0])


def test_lazy_logger_levels_are_loggings():
    import logging

    from nnrt_core import logs
    assert (logs.DEBUG, logs.INFO, logs.WARNING, logs.ERROR) == (logging.DEBUG, logging.INFO, logging.WARNING,
                                                                 logging.ERROR)


def test_lazy_logger_drops_info_until_logging_is_imported_and_emits_warnings():
    """Before ``logging`` is imported nothing can enable INFO, so info records
    are dropped without importing it; a warning imports it and reaches
    logging's last-resort handler; once logging is configured, INFO goes
    through with the caller as the record's origin."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        from nnrt_core.logs import INFO, get_logger
        log = get_logger("nnrt.test")
        log.info("dropped %s", 1)
        log.debug("dropped too")
        log.log(INFO, "dropped as well")
        print("enabled", log.isEnabledFor(INFO), log.isEnabledFor(30), "logging" in sys.modules)
        log.warning("loud %s", 2)
        print("after warning", "logging" in sys.modules)
        import logging
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(filename)s %(funcName)s %(message)s")
        def caller():
            log.info("now %s", 3)
        caller()
    """)], capture_output=True, text=True, cwd=ROOT, env=dict(os.environ), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["enabled False True False", "after warning True"], proc.stdout
    err = proc.stderr.splitlines()
    assert err[0] == "loud 2" and "dropped" not in proc.stderr, proc.stderr
    assert err[1] == "INFO <string> caller now 3", err  # the record points at the caller, not at nnrt_core/logs.py


def test_paused_gc_restores_the_collector():
    import gc

    from nnrt_core.gc_pause import paused_gc
    assert gc.isenabled()
    with pytest.raises(ValueError):
        with paused_gc():
            assert not gc.isenabled()
            raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()


def test_paused_gc_promote_moves_what_was_made_to_the_oldest_generation_unless_the_process_froze_some():
    import gc

    from nnrt_core.gc_pause import paused_gc

    class Marker:
        pass

    def generation_of(obj) -> int:
        return next(g for g in range(3) if any(o is obj for o in gc.get_objects(generation=g)))

    gc.collect()
    with paused_gc(promote=True):
        promoted = Marker()
    assert generation_of(promoted) == 2 and gc.isenabled() and gc.get_freeze_count() == 0
    with paused_gc():
        young = Marker()
    assert generation_of(young) == 0  # without promote: where new objects start
    frozen = Marker()
    gc.freeze()  # a process that froze its own objects (a pre-fork server): left alone
    try:
        before = gc.get_freeze_count()
        with paused_gc(promote=True):
            kept_young = Marker()
        assert gc.get_freeze_count() == before and generation_of(kept_young) == 0
        assert not any(o is frozen for g in range(3) for o in gc.get_objects(generation=g))  # still frozen
    finally:
        gc.unfreeze()
