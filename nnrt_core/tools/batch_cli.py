"""``nnrt batch MODEL --input PATH --output DIR``: batch inference on Ray
(registered by ``nnrt_core.tools.cli``).  The job itself lives in the optional
``nnrt_ray`` package (``pip install ./plugins/ray``), found through the
``nnrt.commands`` entry point ``batch``: the core never imports Ray."""
from __future__ import annotations

import argparse
from typing import Any, Callable

from nnrt_core.config import ScheduleConfig
from nnrt_core.errors import ConfigError

__all__ = ["add_batch_parser", "batch_command", "INSTALL_HINT"]

INSTALL_HINT = "install ./plugins/ray (pip install ./plugins/ray, which brings ray[data])"


def batch_command() -> Callable[[argparse.Namespace, ScheduleConfig], int]:
    """The installed ``batch`` command, or a :class:`ConfigError` saying how to install it."""
    from importlib import metadata

    eps = [ep for ep in metadata.entry_points(group="nnrt.commands") if ep.name == "batch"]
    if not eps:
        raise ConfigError(f"nnrt batch runs on Ray, which is not installed: {INSTALL_HINT}")
    try:
        return eps[0].load()
    except ImportError as e:
        raise ConfigError(f"nnrt batch needs Ray, which failed to import ({e}): {INSTALL_HINT}") from e


def add_batch_parser(sub: "argparse._SubParsersAction", add_config_flags: Callable[[Any], None],
                     config_from_args: Callable[[argparse.Namespace], ScheduleConfig]) -> argparse.ArgumentParser:
    p = sub.add_parser("batch", help="batch inference over files on Ray (an actor pool of sessions)",
                       description="Run MODEL over every row of .npy/.npz files, a folder of images or Parquet "
                                   "on Ray: the session is compiled once and loaded warm by every worker; "
                                   "outputs are written with the input's row ids. Needs ./plugins/ray.")
    p.add_argument("model")
    p.add_argument("--input", required=True, metavar="PATH",
                   help=".npy/.npz file or folder (leading axis = rows), a folder of images, or Parquet")
    p.add_argument("--output", required=True, metavar="DIR", help="a new or empty folder for the outputs")
    p.add_argument("--workers", type=int, help="actors, one session each (default: the cluster's CPUs)")
    p.add_argument("--batch-size", type=int, default=32, help="rows per batch handed to an actor (default: 32)")
    p.add_argument("--address", help="Ray cluster address (HOST:PORT, ray://HOST:PORT or 'auto'); default: "
                                     "start a local Ray instance sized to this machine")
    p.add_argument("--on-error", choices=("skip", "fail"), default="fail",
                   help="a bad row (wrong shape or dtype): fail the job (default) or skip it and list it in "
                        "DIR/_errors.jsonl")
    p.add_argument("--format", choices=("parquet", "npz"), default="parquet", help="output files (default: parquet)")
    p.add_argument("--id-column", help="Parquet input: the column identifying each row (default: row_id)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress on stderr (default: when stderr is a terminal)")
    p.add_argument("--json", action="store_true")
    add_config_flags(p)
    p.set_defaults(func=lambda args: batch_command()(args, config_from_args(args)))
    return p
