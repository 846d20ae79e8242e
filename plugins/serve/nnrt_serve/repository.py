"""The model repository: one model per subfolder, each compiled once.

    repository/
      squeezenet/
        model.onnx          (or model.nnrt, a compiled session file; or .tflite)
        nnrt.toml           (optional: ScheduleConfig fields + serving settings)
      mlp/
        1/model.onnx        (numbered version folders: the highest is served)
        3/model.nnrt

A model's name is its folder's name (letters, digits, ``_``, ``-``, ``.``;
never ``..`` nor a path); requests name models only among those found, so no
request reaches a file outside the repository."""
from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from nnrt_core import ScheduleConfig, Session
from nnrt_core.errors import ConfigError, NnrtError
from nnrt_serve.errors import ModelNotFound, Unavailable
from nnrt_serve.settings import ServingSettings, load_model_config
from nnrt_serve.tensors import datatype_of

__all__ = ["ModelRepository", "ServedModel", "MODEL_SUFFIXES", "valid_model_name"]

log = logging.getLogger("nnrt.serve")

MODEL_SUFFIXES = (".onnx", ".nnrt", ".tflite")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")


def valid_model_name(name: str) -> bool:
    return bool(_NAME.fullmatch(name)) and ".." not in name


@dataclass
class ServedModel:
    """One model of the repository: its file, config, state and session."""

    name: str
    version: str
    path: Path
    config: ScheduleConfig
    settings: ServingSettings
    state: str = "UNAVAILABLE"  #: UNAVAILABLE (loading), READY or FAILED
    reason: str = "loading"
    session: Session | None = None
    load_seconds: float = 0.0
    batch_dim: bool = False  #: every input and output has a free leading dimension
    #: makes the session instead of ``Session(path, config)`` (a Ray Serve replica loads a shipped file)
    loader: Callable[[], Session] | None = field(default=None, repr=False)
    _inputs: tuple | None = field(default=None, repr=False, compare=False)

    def input_infos(self) -> dict[str, tuple[Any, str]]:
        """name -> (TensorInfo, protocol datatype) of the session's inputs, made once per session (every
        request checks against them)."""
        cached = self._inputs
        if cached is None or cached[0] is not self.session:
            cached = self._inputs = (self.session, {i.name: (i, datatype_of(i.dtype)) for i in self.session.inputs})
        return cached[1]

    @property
    def ready(self) -> bool:
        return self.state == "READY"

    @property
    def batching(self) -> bool:
        return self.batch_dim and self.settings.max_batch_size > 0

    def load(self) -> None:
        """Compile (or load) the session; the model becomes READY or FAILED with the reason."""
        t0 = time.perf_counter()
        try:
            sess = self.loader() if self.loader is not None else Session(self.path, self.config)
            self.batch_dim = has_free_batch_dim(sess)
            if self.settings.max_batch_size > 0 and not self.batch_dim:
                raise ConfigError(f"max_batch_size={self.settings.max_batch_size}, but the model has no free "
                                  f"leading (batch) dimension on every input and output: {describe_io(sess)}")
            self.session, self.state, self.reason = sess, "READY", ""
        except (NnrtError, OSError) as e:
            self.state, self.reason = "FAILED", f"{type(e).__name__}: {e}"
            log.error("model %r failed to load: %s", self.name, self.reason)
        self.load_seconds = time.perf_counter() - t0


def has_free_batch_dim(sess: Session) -> bool:
    """Whether every input and output has rank >= 1 and a free first dimension."""
    infos = [*sess.inputs, *sess.outputs]
    return bool(infos) and all(i.shape is not None and len(i.shape) >= 1 and not isinstance(i.shape[0], int)
                               for i in infos)


def describe_io(sess: Session) -> str:
    return "; ".join(f"{i.name} {list(i.shape) if i.shape is not None else '?'}" for i in [*sess.inputs, *sess.outputs])


def _model_file(folder: Path) -> Path:
    files = sorted(p for p in folder.iterdir() if p.suffix in MODEL_SUFFIXES and p.is_file())
    if len(files) != 1:
        found = [p.name for p in files] or "none"
        raise ConfigError(f"model folder {str(folder)!r} must hold exactly one model file "
                          f"({', '.join(MODEL_SUFFIXES)}), found {found}")
    return files[0]


def _resolve_version(folder: Path) -> tuple[str, Path]:
    """(version, model file): the highest numbered version folder, or "1" for a file in the folder itself."""
    versions = sorted((int(p.name), p) for p in folder.iterdir() if p.is_dir() and p.name.isdigit())
    if versions:
        return str(versions[-1][0]), _model_file(versions[-1][1])
    return "1", _model_file(folder)


class ModelRepository:
    """Every model under ``root``, found at construction, loaded by :meth:`load_all`."""

    def __init__(self, root: str | Path, base_config: ScheduleConfig | None = None) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise ConfigError(f"model repository {str(root)!r} is not a folder")
        self.models: dict[str, ServedModel] = {}
        self.problems: dict[str, str] = {}  #: folder -> why it is not served
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir() and not p.name.startswith(".")):
            self._add(folder, base_config)
        if not self.models and not self.problems:
            raise ConfigError(f"model repository {str(self.root)!r} holds no model folder")
        self.loaded = threading.Event()

    @classmethod
    def of_models(cls, root: str | Path, models: list[ServedModel]) -> "ModelRepository":
        """A repository of models already found (a Ray Serve replica's, whose sessions come shipped)."""
        repo = cls.__new__(cls)
        repo.root, repo.problems, repo.loaded = Path(root), {}, threading.Event()
        repo.models = {m.name: m for m in models}
        return repo

    def _add(self, folder: Path, base_config: ScheduleConfig | None) -> None:
        if not valid_model_name(folder.name):
            self.problems[folder.name] = "not a valid model name (letters, digits, '_', '-', '.')"
            return
        try:
            if folder.is_symlink() and not folder.resolve().is_relative_to(self.root):
                raise ConfigError(f"model folder {folder.name!r} links outside the repository")
            version, path = _resolve_version(folder)
            if not path.resolve().is_relative_to(self.root):
                raise ConfigError(f"model file {str(path)!r} is outside the repository")
            config, settings = load_model_config(folder, base_config)
        except ConfigError as e:
            self.problems[folder.name] = str(e)
            log.error("model folder %r is not served: %s", folder.name, e)
            return
        self.models[folder.name] = ServedModel(folder.name, version, path, config, settings)

    def load_all(self) -> None:
        """Compile every model once, one after another (then :attr:`ready` tells)."""
        for m in self.models.values():
            m.load()
        self.loaded.set()

    @property
    def ready(self) -> bool:
        return self.loaded.is_set() and all(m.ready for m in self.models.values())

    def get(self, name: str, version: str | None = None) -> ServedModel:
        """The model ``name`` (at ``version`` when given); 404 when unknown."""
        model = self.models.get(name) if isinstance(name, str) else None
        if model is None:
            why = f" ({self.problems[name]})" if isinstance(name, str) and name in self.problems else ""
            raise ModelNotFound(f"unknown model {name!r}{why}; models: {sorted(self.models)}")
        if version not in (None, "", model.version):
            raise ModelNotFound(f"model {name!r} has no version {version!r}; versions: [{model.version!r}]")
        return model

    def get_ready(self, name: str, version: str | None = None) -> ServedModel:
        model = self.get(name, version)
        if not model.ready:
            raise Unavailable(f"model {name!r} is not ready: {model.state.lower()} ({model.reason})")
        return model
