"""Input data as a Ray Dataset with a ``row_id`` column: ``.npy``/``.npz``
files (read by Ray tasks, a chunk of rows each), a folder of images (Ray
Data's ``read_images``, decoded by Pillow) or Parquet (``read_parquet``).

Array files are checked one by one against the model's inputs (dtype, row
shape, from their headers) before any is read into the dataset: Ray Data
cannot unify blocks of different dtypes, so a file that does not fit is left
out and its rows are reported as bad rows.

Row ids: ``FILE#ROW`` for arrays (the file relative to the input, the row
index in it), the image path relative to the input folder, and for Parquet
its ``id_column`` (default ``row_id``)."""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np
import ray

from nnrt_core.errors import InputError
from nnrt_ray.rows import BadRow, RowSpec

__all__ = ["open_input", "input_files", "IMAGE_EXTENSIONS", "ROWS_PER_CHUNK", "ROW_ID"]

ROW_ID = "row_id"
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff")
ARRAY_EXTENSIONS = (".npy", ".npz")
ROWS_PER_CHUNK = 256  #: at most this many rows of one .npy file per read task (and block)
#: read and convert tasks reserve no CPU: the actor pool holds the cluster's CPUs (one per session), and
#: readers that waited for a free CPU would wait for ever (Ray Data's backpressure bounds them instead)
READ_ARGS = {"num_cpus": 0}


def input_files(path: str | Path) -> tuple[str, list[Path]]:
    """The kind of input (``arrays``, ``images``, ``parquet``) and its files, sorted."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"--input {str(p)!r} does not exist")
    files = sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith((".", "_"))) \
        if p.is_dir() else [p]
    kinds = {"arrays": ARRAY_EXTENSIONS, "images": IMAGE_EXTENSIONS, "parquet": (".parquet",)}
    found = {k: [f for f in files if f.suffix.lower() in ext] for k, ext in kinds.items()}
    present = [k for k, v in found.items() if v]
    if len(present) != 1:
        what = "holds " + " and ".join(present) if present else "holds no .npy, .npz, image or .parquet file"
        raise InputError(f"--input {str(p)!r} {what}; give one kind of input: .npy/.npz files, a folder of "
                         f"images ({', '.join(IMAGE_EXTENSIONS)}) or Parquet")
    return present[0], found[present[0]]


def _headers(f: Path, specs: Sequence[RowSpec]) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """(shape, dtype) of each array of one array file, by column (a .npy
    file's from its header: the data stays on disk)."""
    try:
        if f.suffix.lower() == ".npy":
            if len(specs) != 1:
                raise InputError(f"{str(f)!r} is a .npy file (one array) but the model has inputs "
                                 f"{[s.column for s in specs]}: give .npz files with one array per input")
            arr = np.load(f, mmap_mode="r", allow_pickle=False)
            return {specs[0].column: (arr.shape, arr.dtype)}
        with np.load(f, allow_pickle=False) as z:
            return {k: (z[k].shape, z[k].dtype) for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise InputError(f"cannot read {str(f)!r} as a numpy array file: {e}") from e


def _row_count(f: Path, headers: dict[str, tuple[tuple[int, ...], np.dtype]]) -> int:
    counts = {k: (shape[0] if shape else -1) for k, (shape, _) in headers.items()}
    if any(c < 0 for c in counts.values()):
        raise InputError(f"{str(f)!r} holds a 0-d array; every array needs a leading row axis")
    if len(set(counts.values())) > 1:
        raise InputError(f"{str(f)!r}: its arrays disagree on the number of rows: {counts}")
    return next(iter(counts.values()), 0)


def _file_problem(headers: dict[str, tuple[tuple[int, ...], np.dtype]], specs: Sequence[RowSpec]
                  ) -> tuple[str, str] | None:
    """(column, problem) of the first model input whose array in a file does
    not fit (dtype, row shape), or ``None``: checked per file, before Ray Data
    unifies the blocks of different files (which fails on mixed dtypes)."""
    for s in specs:
        if s.column in headers:
            shape, dtype = headers[s.column]
            problem = s.header_error(dtype, shape[1:])
            if problem:
                return s.column, problem
    return None


def _read_chunk(batch: dict[str, np.ndarray], column: str | None) -> Iterator[dict[str, Any]]:
    """Ray task body: the rows ``[start, stop)`` of each file in ``batch``."""
    for path, name, start, stop in zip(batch["path"], batch["name"], batch["start"], batch["stop"]):
        start, stop = int(start), int(stop)
        if str(path).endswith(".npy"):
            cols = {column: np.asarray(np.load(str(path), mmap_mode="r", allow_pickle=False)[start:stop])}
        else:
            with np.load(str(path), allow_pickle=False) as z:
                cols = {k: z[k][start:stop] for k in z.files}
        ids = np.array([f"{name}#{i}" for i in range(start, stop)])
        yield {ROW_ID: ids, **cols}


def _arrays(root: Path, files: list[Path], specs: Sequence[RowSpec], block_rows: int,
            skipped: list[BadRow] | None) -> "ray.data.Dataset":
    items = []
    for f in files:
        headers = _headers(f, specs)
        n = _row_count(f, headers)
        name = f.name if f == root else str(f.relative_to(root))
        problem = _file_problem(headers, specs)
        if problem is not None:
            column, why = problem
            if skipped is None:
                raise InputError(BadRow(f"{name}#0", column, why).message() + f" (and every other row of {name!r})")
            skipped += [BadRow(f"{name}#{i}", column, why) for i in range(n)]
            continue
        step = max(1, min(block_rows, ROWS_PER_CHUNK)) if f.suffix.lower() == ".npy" else max(n, 1)
        items += [{"path": str(f.resolve()), "name": name, "start": a, "stop": min(a + step, n)}
                  for a in range(0, n, step)]
    if not items:
        raise InputError(f"--input {str(root)!r} holds no rows" + (
            f" the model can take ({len(skipped)} bad row(s), e.g. {skipped[0].message()})" if skipped else ""))
    column = specs[0].column if len(specs) == 1 else None
    return ray.data.from_items(items, override_num_blocks=len(items)).map_batches(
        _read_chunk, fn_kwargs={"column": column}, batch_size=1, **READ_ARGS)


def _image_layout(specs: Sequence[RowSpec]) -> tuple[RowSpec, bool, tuple[int, int]]:
    """The model's image input, whether it is channels-first, and its (height, width)."""
    if len(specs) != 1 or len(specs[0].row_shape) != 3 or None in specs[0].row_shape:
        raise InputError("a folder of images needs a model with one image input of static shape [N, 3, H, W] "
                         f"or [N, H, W, 3] (fix free sizes with --input-shape); the model's inputs: "
                         f"{[(s.name, s.row_shape) for s in specs]}")
    s = specs[0]
    chw = s.row_shape[0] in (1, 3)
    h, w = s.row_shape[1:] if chw else s.row_shape[:2]
    return s, chw, (int(h), int(w))


def _to_tensor(batch: dict[str, np.ndarray], column: str, chw: bool, dtype: str, root: str) -> dict[str, Any]:
    """Ray task body: uint8 HWC images -> the model's layout and dtype, scaled to [0, 1]."""
    img = np.stack(list(batch["image"])) if batch["image"].dtype == object else batch["image"]
    x = img.astype(np.float32) / 255.0
    x = np.ascontiguousarray(x.transpose(0, 3, 1, 2) if chw else x).astype(dtype, copy=False)
    ids = np.array([str(Path(p).relative_to(root)) if str(p).startswith(root) else str(p) for p in batch["path"]])
    return {ROW_ID: ids, column: x}


def _images(root: Path, files: list[Path], specs: Sequence[RowSpec]) -> "ray.data.Dataset":
    s, chw, size = _image_layout(specs)
    mode = "L" if (s.row_shape[0] if chw else s.row_shape[2]) == 1 else "RGB"
    ds = ray.data.read_images([str(f.resolve()) for f in files], size=size, mode=mode, include_paths=True, **READ_ARGS)
    base = str(root.resolve() if root.is_dir() else root.resolve().parent)
    return ds.map_batches(_to_tensor, fn_kwargs={"column": s.column, "chw": chw, "dtype": str(s.dtype),
                                                 "root": base.rstrip("/") + "/"}, **READ_ARGS)


def open_input(path: str | Path, specs: Sequence[RowSpec], id_column: str | None = None,
               block_rows: int = 32, skipped: list[BadRow] | None = None) -> "ray.data.Dataset":
    """The dataset of ``path`` with a ``row_id`` column and one column per model
    input; a ``.npy`` file comes in blocks of ``block_rows`` rows (the batch
    size, so that every actor of the pool gets work), an ``.npz`` file in one.
    An array file whose dtype or row shape the model cannot take is left out:
    its rows are appended to ``skipped`` (an :class:`InputError` without it)."""
    root = Path(path)
    kind, files = input_files(root)
    if kind == "arrays":
        return _arrays(root, files, specs, block_rows, skipped)
    if kind == "images":
        return _images(root, files, specs)
    ds = ray.data.read_parquet([str(f.resolve()) for f in files], **READ_ARGS)
    id_column = id_column or ROW_ID
    names = ds.schema().names
    if id_column not in names:
        raise InputError(f"the Parquet input has no row id column {id_column!r} (columns: {names}); "
                         "name the column that identifies each row with --id-column")
    return ds if id_column == ROW_ID else ds.rename_columns({id_column: ROW_ID})
