"""The ``nnrt`` flags that make a :class:`ScheduleConfig` (``--config``,
``--backends``, ``--pin``, ``--input-shape``...), shared by the commands.
Cheap to import: ``nnrt --help`` builds every parser from these."""
from __future__ import annotations

import argparse
from typing import Any

from nnrt_core.config import OVERFLOW_POLICIES, PERFORMANCE_MODES, PRECISIONS, PRIORITIES, ScheduleConfig
from nnrt_core.errors import InputError

__all__ = ["add_config_flags", "config_from_args"]


def add_config_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="ScheduleConfig from a .toml or .json file")
    p.add_argument("--backends", help="comma-separated backend names in priority order, or 'auto'")
    p.add_argument("--backup", help="backup backend for unsupported nodes ('none' to disable)")
    p.add_argument("--scheduler", help="placement strategy (an installed scheduler)")
    p.add_argument("--precision", choices=PRECISIONS,
                   help="'auto': keep the fastest precision whose measured error is within --precision-tolerance")
    p.add_argument("--precision-tolerance", type=float, metavar="TOL",
                   help="with --precision auto: the largest error relative to max|fp32 output| (default 0.01)")
    p.add_argument("--performance-mode", choices=PERFORMANCE_MODES)
    p.add_argument("--priority", choices=PRIORITIES)
    p.add_argument("--num-threads", type=int)
    p.add_argument("--on-overflow", choices=OVERFLOW_POLICIES,
                   help="when an fp16 partition saturates: move it to the backup (default), warn, or raise")
    p.add_argument("--pin", action="append", default=[], metavar="NODE=BACKEND",
                   help="force a node onto a backend (repeatable)")
    p.add_argument("--strict", action="store_true", help="refuse options a backend does not support")
    p.add_argument("--machine-specific", action="store_true",
                   help="keep compiled forms that load faster on this machine only (e.g. ONNX Runtime's optimized "
                        "graph); a session file so compiled is refused elsewhere")
    p.add_argument("--measure-feeds", metavar="FILE.npz",
                   help="real inputs (np.savez: one array per model input) to time the candidate plans of measured "
                        "selection on, instead of synthetic ones (ScheduleConfig.measure_feeds)")
    p.add_argument("--input-shape", action="append", default=[], type=_input_shape, metavar="NAME=D1,D2,...",
                   help="fix the shape of a model input with free dimensions at load time, e.g. "
                        "x=1,3,224,224 (repeatable; ScheduleConfig.input_shapes)")


def _input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``NAME=D1,D2,...`` -> (name, shape) for ``--input-shape``."""
    name, sep, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or any(d < 0 for d in shape):
        raise argparse.ArgumentTypeError(
            f"expected NAME=D1,D2,... (an input name and its comma-separated non-negative sizes, "
            f"e.g. x=1,3,224,224), got {text!r}")
    return name, shape


def config_from_args(args: argparse.Namespace) -> ScheduleConfig:
    cfg = ScheduleConfig.from_file(args.config) if args.config else ScheduleConfig()
    changes: dict[str, Any] = {}
    if args.backends:
        changes["backends"] = args.backends
    if args.backup:
        changes["backup"] = None if args.backup.lower() == "none" else args.backup
    for flag in ("scheduler", "precision", "performance_mode", "priority", "num_threads", "on_overflow",
                 "precision_tolerance"):
        value = getattr(args, flag)
        if value is not None:
            changes[flag] = value
    if args.pin:
        pins = dict(cfg.pins)
        for item in args.pin:
            node, sep, backend = item.partition("=")
            if not sep or not node or not backend:
                raise InputError(f"--pin expects NODE=BACKEND, got {item!r}")
            pins[node] = backend
        changes["pins"] = pins
    if args.strict:
        changes["strict"] = True
    if getattr(args, "machine_specific", False):
        changes["machine_specific"] = True
    if getattr(args, "measure_feeds", None):
        changes["measure_feeds"] = args.measure_feeds
    if getattr(args, "input_shape", None):
        changes["input_shapes"] = {**cfg.input_shapes, **dict(args.input_shape)}  # the flags win over --config
    return cfg.replace(**changes) if changes else cfg
