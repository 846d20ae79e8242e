"""Time to first inference in fresh processes, against raw ONNX Runtime
measured in the same run, plus ``nnrt --help`` and first vs steady runs.

    python benchmarks/bench_cold_start.py [--rounds 7] [--steady 10] [--batch 8] [--models mobile,light]

Every measurement is a fresh Python process (``subprocess``), the kinds
interleaved round by round (the order rotates), and medians are printed:

* **cold start**: from the child's first line to the end of the first run:
  ``import numpy`` + ``import onnxruntime`` + ``InferenceSession(path)`` +
  first ``run`` (raw ORT), against ``import numpy`` + ``from nnrt_core import
  Session`` + ``Session(path, ScheduleConfig(backends=[b]))`` + first
  ``run``, for b = onnxruntime, numpy, npu_emu, and ``Session(file)`` of
  the model compiled beforehand for onnxruntime into a ``.nnrt`` session
  file (kind ``ort-file``, the deployment path: no ``import onnx``; kind
  ``ort-machine-file``: compiled with ``machine_specific=True``, so the file
  holds ORT's optimized graph and only loads on this machine;
  ``onnx`` in the table says whether the child imported it) (the NPU with
  ``input_shapes`` fixed: a model with free dimensions is otherwise planned
  for its input signature in the first run, see docs/runtime.md).  The feed
  is made outside the timed span.  ``cpu`` is the main thread's CPU time
  over the same span (``time.thread_time``: imports, checks, graph work and
  session creation run there; the runs' worker threads are not counted), a
  figure that other load on the machine disturbs less than wall time;
  ``proc`` is the whole process, spawn to exit (interpreter start and
  shutdown included);
* **first/steady**: the first run against the median of ``--steady`` more
  runs in the same process;
* **nnrt --help**: the console script in a fresh process, next to ``python
  -c pass``.

Models: ``mobile`` = PP-OCR v2 text-direction classifier (MobileNetV3-class,
``ch_ppocr_mobile_v2.0_cls_infer.onnx`` from the rapidocr-onnxruntime wheel,
see benchmarks/real_models.py; skipped when absent), input ``batch x 3 x 48 x
192``; ``light`` = SqueezeNet from the onnx wheel's light models, ``1 x 3 x
224 x 224``.

``--base DIR`` also times another checkout of nnrt (e.g. ``git worktree add
/tmp/base main``) in the same interleaved rounds: kinds prefixed ``base:``
run with that tree's packages first on ``PYTHONPATH``.

Byte-code caches: a user's installed packages have ``.pyc`` files; this
machine may run with ``PYTHONDONTWRITEBYTECODE=1``, which would make every
child compile nnrt's sources again.  The children therefore run with that
variable removed and ``PYTHONPYCACHEPREFIX`` set to a private folder
(``--keep-env`` turns this off), after one untimed warm-up child per kind.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import MutableMapping

import onnx

ROOT = Path(__file__).resolve().parent.parent
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
MODELS_DIR = Path(os.environ.get("NNRT_REAL_MODELS") or "/tmp/pypi_models")
MOBILE = "rapidocr_onnxruntime/rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx"
KINDS = ["ort", "onnxruntime", "ort-file", "ort-machine-file", "numpy", "npu_emu"]
#: kind -> (the backend a session file is compiled for beforehand, ScheduleConfig.machine_specific)
FILE_KINDS = {"ort-file": ("onnxruntime", False), "ort-machine-file": ("onnxruntime", True)}

#: the child: argv = kind, model path, input name, shape (comma separated), steady runs
CHILD = r"""
import sys, time
t0, c0 = time.perf_counter(), time.thread_time()
kind, path, name, shape, steady = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
shape = [int(d) for d in shape.split(",")]
import numpy as np
if kind == "ort":
    import onnxruntime as ort
    t1 = time.perf_counter()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    run = lambda feeds: sess.run(None, feeds)
elif kind.endswith("-file"):
    from nnrt_core import Session
    t1 = time.perf_counter()
    sess = Session(path)
    run = sess.run
else:
    from nnrt_core import ScheduleConfig, Session
    t1 = time.perf_counter()
    static = {name: shape} if kind == "npu_emu" else None
    # on_overflow="warn": the light models' placeholder weights exceed fp16 on the NPU, and this times the chip
    sess = Session(path, ScheduleConfig(backends=[kind], input_shapes=static, on_overflow="warn",
                                        precision="fp16" if kind == "npu_emu" else "fp32"))
    run = sess.run
t2, c2 = time.perf_counter(), time.thread_time()
feeds = {name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
t3, c3 = time.perf_counter(), time.thread_time()
run(feeds)
t4, c4 = time.perf_counter(), time.thread_time()
times = []
for _ in range(steady):
    a = time.perf_counter(); run(feeds); times.append(time.perf_counter() - a)
import json
out = {"import": t1 - t0, "build": t2 - t1, "first": t4 - t3, "total": (t2 - t0) + (t4 - t3),
       "cpu": (c2 - c0) + (c4 - c3), "steady": sorted(times)[len(times) // 2]}
if kind != "ort":
    out["stages"] = sess.stats().get("build", {})
    out["modules"] = sorted({m.split(".")[0] for m in sys.modules if m.startswith(("nnrt_", "scipy"))})
out["onnx"] = "onnx" in sys.modules
print("RESULT " + json.dumps(out))
"""


def use_bytecode_cache(env: MutableMapping[str, str]) -> None:
    """Give processes started with ``env`` a user's byte-code cache (see the
    docstring): ``PYTHONDONTWRITEBYTECODE`` removed, ``.pyc`` files under a
    private ``PYTHONPYCACHEPREFIX``."""
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "nnrt-bench-pycache")


def child_env(keep: bool) -> dict[str, str]:
    env = dict(os.environ)
    if not keep:
        use_bytecode_cache(env)
    return env


def result_of(proc: subprocess.CompletedProcess, who: str) -> dict:
    """The json of the ``RESULT`` line a benchmark's child process printed; a
    ``SystemExit`` naming ``who`` with the tail of its stderr when it failed."""
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"{who} child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(line[len("RESULT "):])


def base_env(env: dict[str, str], base: Path) -> dict[str, str]:
    """``env`` with the packages of the nnrt checkout ``base`` first on ``PYTHONPATH``."""
    roots = [base, base / "schedulers", *sorted(p for p in (base / "plugins").iterdir() if p.is_dir())]
    return {**env, "PYTHONPATH": os.pathsep.join(str(r) for r in roots), "NNRT_BENCH_CWD": str(base)}


def run_child(kind: str, model: dict, steady: int, env: dict[str, str]) -> dict:
    """One fresh process of ``kind`` on ``model``: its timings and the process wall time."""
    if kind.startswith("base:"):
        env, kind, files = model["base_env"], kind[len("base:"):], model["base_files"]
    else:
        files = model["files"]
    path = files[kind] if kind in FILE_KINDS else model["path"]
    args = [sys.executable, "-c", CHILD, kind, str(path), model["input"],
            ",".join(map(str, model["shape"])), str(steady)]
    t0 = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, env=env, cwd=env.get("NNRT_BENCH_CWD", ROOT))
    wall = time.perf_counter() - t0
    res = result_of(proc, kind)
    res["proc"] = wall
    return res


def time_command(args: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(args, capture_output=True, env=env, cwd=ROOT, check=True)
    return time.perf_counter() - t0


def help_command() -> list[str]:
    """The installed ``nnrt`` console script (run by this interpreter), else ``-m``."""
    script = Path(sys.executable).parent / "nnrt"
    if script.is_file():
        return [sys.executable, str(script), "--help"]
    return [sys.executable, "-m", "nnrt_core.tools.cli", "--help"]


def bench_help(rounds: int, env: dict[str, str]) -> dict[str, float]:
    cmds = {"nnrt --help": help_command(), "python -c pass": [sys.executable, "-c", "pass"],
            "python -c 'import nnrt_core'": [sys.executable, "-c", "import nnrt_core"]}
    for args in cmds.values():
        time_command(args, env)  # warm-up: byte-code caches, page cache
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for r in range(rounds):
        for key in list(cmds)[r % len(cmds):] + list(cmds)[:r % len(cmds)]:
            times[key].append(time_command(cmds[key], env))
    return {k: statistics.median(v) for k, v in times.items()}


def compile_files(model: dict, kinds: list[str], folder: Path, env: dict[str, str], key: str = "files") -> None:
    """The session files the ``*-file`` kinds load, compiled in a child process."""
    model[key] = {}
    folder.mkdir(parents=True, exist_ok=True)
    for kind in kinds:
        if kind in FILE_KINDS:
            out = folder / f"{kind}.nnrt"
            code = ("import sys; from nnrt_core import ScheduleConfig, Session; Session(sys.argv[1], ScheduleConfig("
                    "backends=[sys.argv[2]], **({'machine_specific': True} if sys.argv[4] == '1' else {})))"
                    ".save(sys.argv[3])")  # a --base tree older than machine_specific compiles the portable kinds
            backend, specific = FILE_KINDS[kind]
            subprocess.run([sys.executable, "-c", code, str(model["path"]), backend, str(out), str(int(specific))],
                           check=True, env=env, cwd=env.get("NNRT_BENCH_CWD", ROOT))
            model[key][kind] = out


def bench_model(model: dict, kinds: list[str], rounds: int, steady: int, env: dict[str, str]) -> dict[str, list]:
    for kind in kinds:
        run_child(kind, model, 1, env)  # warm-up: byte-code caches, page cache
    results: dict[str, list] = {k: [] for k in kinds}
    for r in range(rounds):
        for kind in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
            results[kind].append(run_child(kind, model, steady, env))
    return results


def models(names: list[str], batch: int) -> list[dict]:
    out = []
    if "mobile" in names:
        path = MODELS_DIR / MOBILE
        if path.is_file():
            out.append({"key": f"ppocr_v2_cls b{batch}", "path": path, "input": "x", "shape": [batch, 3, 48, 192]})
        else:
            print(f"mobile model not found at {path} (python benchmarks/real_models.py --download)")
    if "light" in names:
        path = LIGHT / "light_squeezenet.onnx"
        g = onnx.load(str(path), load_external_data=False).graph
        name = next(v.name for v in g.input if v.name not in {t.name for t in g.initializer})
        out.append({"key": "squeezenet b1", "path": path, "input": name, "shape": [1, 3, 224, 224]})
    return out


def med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def report_model(model: dict, results: dict[str, list]) -> None:
    ort_total, ort_cpu = med(results["ort"], "total"), med(results["ort"], "cpu")
    print(f"\n{model['key']}  (medians of {len(results['ort'])} fresh processes, ms)")
    print(f"  {'kind':16s} {'import':>7s} {'build':>7s} {'first':>7s} {'total':>7s} {'x ORT':>6s} "
          f"{'cpu':>7s} {'x ORT':>6s} {'proc':>7s} {'steady':>7s} {'first/steady':>12s} {'onnx':>5s}")
    for kind, rows in results.items():
        label = "raw ORT" if kind == "ort" else f"nnrt {kind}"
        total, cpu = med(rows, "total"), med(rows, "cpu")
        first, steady = med(rows, "first"), med(rows, "steady")
        print(f"  {label:16s} {med(rows, 'import') * 1e3:7.1f} {med(rows, 'build') * 1e3:7.1f} "
              f"{first * 1e3:7.1f} {total * 1e3:7.1f} {total / ort_total:6.2f} {cpu * 1e3:7.1f} "
              f"{cpu / ort_cpu:6.2f} {med(rows, 'proc') * 1e3:7.1f} {steady * 1e3:7.1f} {first / steady:12.2f} "
              f"{'yes' if any(r.get('onnx') for r in rows) else 'no':>5s}")
    for kind, rows in results.items():
        if kind == "ort":
            continue
        stages = {k: statistics.median(r["stages"].get(k, 0.0) for r in rows) for k in rows[0]["stages"]}
        if stages:
            print(f"  build stages, nnrt {kind}: " + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in stages.items()))
        print(f"  plugins imported: {', '.join(rows[0]['modules'])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7, help="fresh processes per kind (median)")
    ap.add_argument("--steady", type=int, default=10, help="runs after the first, per process")
    ap.add_argument("--batch", type=int, default=8, help="batch of the mobile model")
    ap.add_argument("--models", default="mobile,light")
    ap.add_argument("--kinds", default=",".join(KINDS), help="ort (raw ONNX Runtime) and nnrt backends")
    ap.add_argument("--keep-env", action="store_true", help="run children with this environment as is")
    ap.add_argument("--base", type=Path, help="another nnrt checkout, timed in the same rounds (kinds base:...)")
    args = ap.parse_args()
    env = child_env(args.keep_env)
    kinds = ["ort"] + [k for k in args.kinds.split(",") if k and k != "ort"]
    if args.base is not None:
        kinds += ["base:" + k for k in kinds[1:]]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    help_times = bench_help(args.rounds, env)
    print(f"\nfresh processes (medians of {args.rounds}, ms): "
          + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in help_times.items()))
    with tempfile.TemporaryDirectory(prefix="nnrt-cold-") as folder:
        for i, model in enumerate(models(args.models.split(","), args.batch)):
            compile_files(model, kinds, Path(folder) / str(i), env)
            if args.base is not None:
                model["base_env"] = base_env(env, args.base.resolve())
                compile_files(model, kinds, Path(folder) / f"{i}-base", model["base_env"], "base_files")
            report_model(model, bench_model(model, kinds, args.rounds, args.steady, env))


if __name__ == "__main__":
    main()
