"""The parts of the ``onnx`` wheel the load path needs, without ``import onnx``.

Why: ``import onnx`` costs ~55 ms of a fresh process (``onnx/__init__``
pulls ``onnx.helper``/``compose`` with ``asyncio`` and ``ml_dtypes``,
protobuf's json/text formats, ``importlib.metadata``...), a fifth of nnrt's
time to first inference.  What the load path uses lives in two files of the
wheel, loaded here by path: the C extension ``onnx/onnx_cpp2py_export*.so``
(checker, shape inference, schemas, inliner: the functions ``onnx.checker``
and friends wrap, called the same way, on serialized bytes; ~3 ms) and the
generated ``onnx/onnx_ml_pb2.py`` (the proto classes, made from its
serialized descriptor by upb's metaclass without running the file: ~5 ms
instead of ~12, see :func:`_proto_module`).  With protobuf's upb backend the
message classes come from the default descriptor pool, so they *are* the
classes a later ``import onnx`` gives: a user's ``onnx.ModelProto`` is one of
ours, before and after ``import onnx``.

Risk: this relies on the wheel's file layout and on the C functions'
signatures.  It is guarded: any missing file, failed load, protobuf backend
other than upb, or an extension without the expected functions falls back to
``import onnx`` and its public API (as does an ``onnx`` already imported);
``NNRT_ONNX_LITE=0`` forces the fallback (for debugging), ``force`` the
files even when ``onnx`` is imported already (to run the test suite, which
imports onnx first, through them).  The extension is
registered as ``onnx.onnx_cpp2py_export`` in ``sys.modules`` (it can be
initialised only once per process), which a later ``import onnx`` reuses.
``tests/test_onnx_lite.py`` compares both paths.

Rare paths (version conversion, ``onnx.backend``, exotic element types)
import the real package through :func:`real_onnx`.
"""
from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

from nnrt_core.frontends.onnx import schema_prime
from nnrt_core.logs import get_logger

__all__ = ["ENV_VAR", "IMPL", "MAXIMUM_PROTOBUF", "P", "InferenceError", "LiteOnnx", "PublicOnnx", "SchemaError",
           "ValidationError", "check_model", "get_all_schemas_with_history", "get_schema", "has_schema",
           "infer_node_outputs", "infer_shapes", "inline_local_functions", "is_lite", "load_lite",
           "onnx_opset_version", "real_onnx"]

log = get_logger("nnrt.onnx")

#: ``NNRT_ONNX_LITE=0`` makes nnrt ``import onnx`` instead of loading its two files
ENV_VAR = "NNRT_ONNX_LITE"
#: the largest serialized model onnx's C functions take (2 GiB)
MAXIMUM_PROTOBUF = 2147483647
_EXT = "onnx.onnx_cpp2py_export"
_PB_NAME = "nnrt_core.frontends.onnx._onnx_ml_pb2"
_NEEDED = {"checker": ("check_model", "ValidationError"), "shape_inference": ("infer_shapes", "InferenceError"),
           "defs": ("get_schema", "has_schema", "get_all_schemas_with_history", "schema_version_map", "SchemaError"),
           "inliner": ("inline_local_functions",)}
_NODE_INFERENCE = "_infer_node_outputs"  # OpSchema's per-node inference binding


def real_onnx() -> ModuleType:
    """The ``onnx`` package, imported (for the rare paths that need more than this module)."""
    import onnx
    return onnx


class _BindExtension:
    """One shot: when ``onnx`` itself is imported later, its module gets the
    extension loaded here as its ``onnx_cpp2py_export`` attribute before its
    ``__init__`` runs (the import system binds a sub-module to its package
    only when it loads it, and this one was loaded already).  A meta-path
    finder by protocol (``find_spec``): ``importlib.abc`` is not imported."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "onnx":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is not None and hasattr(loader, "exec_module"):
            run = loader.exec_module

            def exec_module(module: ModuleType) -> None:
                module.onnx_cpp2py_export = sys.modules.get(_EXT)
                run(module)
            loader.exec_module = exec_module
        return spec


def load_lite() -> "LiteOnnx":
    """The extension and ``onnx_ml_pb2`` loaded by path (reused when already
    loaded); raises when anything is off."""
    from google.protobuf.internal import api_implementation
    if api_implementation.Type() != "upb":
        raise ImportError(f"protobuf backend {api_implementation.Type()!r}, not upb")
    from google._upb import _message
    spec = importlib.util.find_spec("onnx")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("onnx is not installed")
    folder = list(spec.submodule_search_locations)[0]
    ext = sys.modules.get(_EXT)
    if ext is None:
        found = [f for f in (os.path.join(folder, "onnx_cpp2py_export" + s)
                             for s in importlib.machinery.EXTENSION_SUFFIXES) if os.path.isfile(f)]
        if not found:
            raise ImportError(f"no onnx_cpp2py_export extension in {folder}")
        loader = importlib.machinery.ExtensionFileLoader(_EXT, found[0])
        ext = importlib.util.module_from_spec(importlib.util.spec_from_file_location(_EXT, found[0], loader=loader))
        sys.modules[_EXT] = ext  # before exec: its sub-modules register themselves under this name
        try:
            loader.exec_module(ext)
        except BaseException:
            del sys.modules[_EXT]
            raise
        sys.meta_path.insert(0, _BindExtension())
    for sub, names in _NEEDED.items():
        missing = [n for n in names if not hasattr(getattr(ext, sub, None), n)]
        if missing:
            raise ImportError(f"onnx_cpp2py_export.{sub} lacks {missing}")
    if not hasattr(ext.defs.OpSchema, _NODE_INFERENCE):
        raise ImportError(f"onnx's OpSchema lacks {_NODE_INFERENCE}")
    pb = sys.modules.get(_PB_NAME)
    if pb is None:
        pb = _proto_module(os.path.join(folder, "onnx_ml_pb2.py"))
        sys.modules[_PB_NAME] = pb
    if pb.ModelProto.DESCRIPTOR.file.pool is not _message.default_pool:
        raise ImportError("onnx_ml_pb2's classes are not in protobuf's default pool")
    return LiteOnnx(ext, pb)


def _proto_module(path: str) -> ModuleType:
    """The classes of the wheel's ``onnx_ml_pb2.py``, made the way upb makes
    them from the file's serialized descriptor (one ``AddSerializedFile``
    literal, read without running the file) with upb's own metaclass: the same
    default-pool descriptors and the same classes (upb keeps one class per
    descriptor, which a later ``import onnx`` gets), without protobuf's Python
    descriptor-pool, builder and text-format modules that running the file
    imports (~6 ms of a fresh process).  Anything unexpected: the file is run."""
    from google._upb import _message
    from google.protobuf import message
    try:
        with open(path, encoding="utf-8") as f:
            src = f.read()
        start = src.index("AddSerializedFile(") + len("AddSerializedFile(")
        serialized = ast.literal_eval(src[start:src.index(")\n", start)])
        file = _message.default_pool.AddSerializedFile(serialized)
        pb = ModuleType(_PB_NAME, "onnx_ml_pb2's classes (see onnx_lite._proto_module)")
        pb.DESCRIPTOR = file

        def make(desc: Any) -> type:
            cls = getattr(desc, "_concrete_class", None) or _message.MessageMeta(
                desc.name, (message.Message,), {"DESCRIPTOR": desc, "__module__": "onnx.onnx_ml_pb2"})
            for nested in desc.nested_types:
                setattr(cls, nested.name, make(nested))
            return cls

        for name, desc in file.message_types_by_name.items():
            setattr(pb, name, make(desc))
        for enum in file.enum_types_by_name.values():
            for value in enum.values:
                setattr(pb, value.name, value.number)
        return pb
    except Exception as e:  # another layout of the generated file: run it
        log.info("reading onnx_ml_pb2's descriptor failed (%s); running the file", e)
    pspec = importlib.util.spec_from_file_location(_PB_NAME, path)
    if pspec is None or pspec.loader is None:
        raise ImportError(f"no onnx_ml_pb2.py at {path}")
    pb = importlib.util.module_from_spec(pspec)
    pspec.loader.exec_module(pb)
    return pb


def _bytes(model: Any) -> bytes:
    data = model if isinstance(model, bytes) else model.SerializeToString()
    if len(data) > MAXIMUM_PROTOBUF:
        raise ValueError("This protobuf of onnx model is too large (>2GiB). Call check_model with model path instead.")
    return data


class LiteOnnx:
    """onnx's checker, shape inference, schemas and inliner called on the
    extension directly, as the ``onnx`` package's wrappers call them."""

    def __init__(self, ext: ModuleType, pb: ModuleType) -> None:
        self.ext, self.P = ext, pb
        self.ValidationError = ext.checker.ValidationError
        self.InferenceError = ext.shape_inference.InferenceError
        self.SchemaError = ext.defs.SchemaError

    def check_model(self, model: Any, full_check: bool = False) -> None:
        """``onnx.checker.check_model`` on a ``ModelProto`` or its bytes."""
        self.ext.checker.check_model(_bytes(model), full_check, False, False)

    def infer_shapes(self, model: Any, strict_mode: bool = False, data_prop: bool = False) -> Any:
        """``onnx.shape_inference.infer_shapes``: a new ``ModelProto``."""
        out = self.ext.shape_inference.infer_shapes(_bytes(model), False, strict_mode, data_prop)
        return self.P.ModelProto.FromString(out)

    def infer_node_outputs(self, schema: Any, node: Any, input_types: dict[str, Any], input_data: dict[str, Any],
                           opset_imports: dict[str, int]) -> dict[str, Any]:
        """``onnx.shape_inference.infer_node_outputs`` (opsets as domain -> version)."""
        types = {k: input_types[k].SerializeToString() for k in node.input if k != ""}
        for k, v in input_types.items():  # also the outer-scope types
            types.setdefault(k, v.SerializeToString())
        data = {k: input_data[k].SerializeToString() for k in node.input if k in input_data}
        infer = getattr(schema, _NODE_INFERENCE)  # the C binding onnx.shape_inference.infer_node_outputs calls
        out = infer(node.SerializeToString(), types, data, {}, dict(opset_imports), self.P.IR_VERSION)
        return {k: self.P.TypeProto.FromString(v) for k, v in out.items()}

    def inline_local_functions(self, model: Any) -> Any:
        """``onnx.inliner.inline_local_functions``: a new ``ModelProto``."""
        return self.P.ModelProto.FromString(self.ext.inliner.inline_local_functions(model.SerializeToString(), False))

    def get_schema(self, op_type: str, max_inclusive_version: int, domain: str = "") -> Any:
        """``onnx.defs.get_schema`` (``SchemaError`` when there is none)."""
        return self.ext.defs.get_schema(op_type, max_inclusive_version, domain)

    def has_schema(self, op_type: str, domain: str = "") -> bool:
        """``onnx.defs.has``."""
        return bool(self.ext.defs.has_schema(op_type, domain))

    def get_all_schemas_with_history(self) -> list[Any]:
        """``onnx.defs.get_all_schemas_with_history``."""
        return self.ext.defs.get_all_schemas_with_history()

    def onnx_opset_version(self) -> int:
        """``onnx.defs.onnx_opset_version``: the newest default-domain opset."""
        return int(self.ext.defs.schema_version_map()[""][1])


class PublicOnnx:
    """The same functions through ``import onnx`` and its public API (the fallback)."""

    def __init__(self) -> None:
        import onnx.checker
        import onnx.defs
        import onnx.helper
        import onnx.inliner
        import onnx.shape_inference
        self.onnx, self.P = onnx, onnx.onnx_ml_pb2
        self.ValidationError = onnx.checker.ValidationError
        self.InferenceError = onnx.shape_inference.InferenceError
        self.SchemaError = onnx.defs.SchemaError

    def check_model(self, model: Any, full_check: bool = False) -> None:
        self.onnx.checker.check_model(model, full_check=full_check)

    def infer_shapes(self, model: Any, strict_mode: bool = False, data_prop: bool = False) -> Any:
        return self.onnx.shape_inference.infer_shapes(model, strict_mode=strict_mode, data_prop=data_prop)

    def infer_node_outputs(self, schema: Any, node: Any, input_types: dict[str, Any], input_data: dict[str, Any],
                           opset_imports: dict[str, int]) -> dict[str, Any]:
        opsets = [self.onnx.helper.make_opsetid(d, v) for d, v in opset_imports.items()]
        return self.onnx.shape_inference.infer_node_outputs(schema, node, input_types, input_data,
                                                           opset_imports=opsets)

    def inline_local_functions(self, model: Any) -> Any:
        return self.onnx.inliner.inline_local_functions(model)

    def get_schema(self, op_type: str, max_inclusive_version: int, domain: str = "") -> Any:
        return self.onnx.defs.get_schema(op_type, max_inclusive_version, domain)

    def has_schema(self, op_type: str, domain: str = "") -> bool:
        return bool(self.onnx.defs.has(op_type, domain))

    def get_all_schemas_with_history(self) -> list[Any]:
        return self.onnx.defs.get_all_schemas_with_history()

    def onnx_opset_version(self) -> int:
        return int(self.onnx.defs.onnx_opset_version())


def _choose() -> LiteOnnx | PublicOnnx:
    mode = os.environ.get(ENV_VAR, "1").strip().lower()
    if mode not in ("0", "false", "no", "off") and ("onnx" not in sys.modules or mode == "force"):
        try:
            return load_lite()
        except Exception as e:  # any surprise: the public API
            log.info("loading onnx's extension by path failed (%s); importing onnx", e)
    return PublicOnnx()


#: the implementation in use (:class:`LiteOnnx` unless the fallback was needed)
IMPL: LiteOnnx | PublicOnnx = _choose()
schema_prime.start(sys.modules.get(_EXT))  # the schema registry built meanwhile, on another thread
#: the generated proto module (``ModelProto``, ``TensorProto``... and ``IR_VERSION``)
P: ModuleType = IMPL.P
ValidationError: type[Exception] = IMPL.ValidationError
InferenceError: type[Exception] = IMPL.InferenceError
SchemaError: type[Exception] = IMPL.SchemaError
check_model = IMPL.check_model
infer_shapes = IMPL.infer_shapes
infer_node_outputs = IMPL.infer_node_outputs
inline_local_functions = IMPL.inline_local_functions
get_schema = IMPL.get_schema
has_schema = IMPL.has_schema
get_all_schemas_with_history = IMPL.get_all_schemas_with_history
onnx_opset_version = IMPL.onnx_opset_version


def is_lite() -> bool:
    """True when the onnx package was not needed (its two files loaded by path)."""
    return isinstance(IMPL, LiteOnnx)
