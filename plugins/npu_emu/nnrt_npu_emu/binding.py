"""A program bound to one loaded partition for fast host execution: every
instruction's workspace and constant operands are mapped to arrays once, so a
run only resolves its input and output tensors.

fp16 storage is modelled at host speed, with the chip's numbers bit for bit:

* fp16 workspace buffers are held in a host-side fp32 *shadow* of the
  workspace (same planned offsets, in elements), and every instruction that
  writes one is followed by :func:`~nnrt_npu_emu.numerics.round_fp16` (the
  chip's saturating round-to-nearest-even store) unless the kernel only moves
  or selects values (:data:`~nnrt_npu_emu.ops.EXACT`), which are already fp16
  values;
* fp16 constants (weights, biases) are widened to fp32 once, exactly, and
  the widened copy is shared by every bound program whose constant has the
  same bytes (:func:`widened`: the plans of one model specialized per input
  shape hold one fp32 copy of its weights, and a new plan does not widen
  them again);
* partition inputs and outputs stay in device memory in their own types;
* an exact activation reading an fp16 store is applied in that store's
  clamp (:mod:`~nnrt_npu_emu.hostfuse`), and kernels with a store epilogue
  (:data:`~nnrt_npu_emu.ops.STORE_KERNELS`: convolution) round each piece of
  their output while it is in cache.

The device-memory model is unchanged: the arena still holds the fp16 weights,
allocates the planned workspace and counts every tensor; the shadow and the
widened constants are host memory of the emulator.  :meth:`Program.execute`
(reading and writing device memory only) is the reference this must match."""
from __future__ import annotations

import threading
import time
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from nnrt_core.plugin_api import RunControl, checksum, enter_control, leave_control
from nnrt_numpy.host_kernels import parallel  # the process's one pool of helper threads (public API)
from nnrt_npu_emu.hostfuse import STORE_BOUNDS, plan_steps
from nnrt_npu_emu.memory import DeviceArena
from nnrt_npu_emu.numerics import FP16_MAX, store_fp16
from nnrt_npu_emu.ops import KERNELS, STORE_KERNELS
from nnrt_npu_emu.program import Operand, Program

__all__ = ["BoundProgram", "IOSlot", "Store", "round_store", "SPLIT_ROUND", "widened", "sentinel_saturation"]

#: (digest of the fp16 bytes, shape) -> the read-only fp32 copy, while a bound program holds it
_WIDENED: "weakref.WeakValueDictionary[tuple[bytes, tuple[int, ...]], np.ndarray]" = weakref.WeakValueDictionary()
_WIDENED_LOCK = threading.Lock()


def widened(a: np.ndarray) -> np.ndarray:
    """The fp16 constant ``a`` as a read-only fp32 array, shared with every
    other holder of a constant with the same bytes and shape (exact: fp16 ->
    fp32 loses nothing).  Hashing costs ~1/10 of the cast it saves."""
    key = (checksum.digest(memoryview(np.ascontiguousarray(a).reshape(-1).view(np.uint8))), a.shape)
    with _WIDENED_LOCK:
        w = _WIDENED.get(key)
    if w is None:
        w = a.astype(_F32)
        w.flags.writeable = False
        with _WIDENED_LOCK:
            w = _WIDENED.setdefault(key, w)
    return w

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_F32_MAX = float(np.finfo(np.float32).max)
#: stores of at least this many elements are rounded in pieces on the idle host threads.
#: Waking an idle helper costs tens to hundreds of microseconds (more in a VM),
#: rounding 32K values about 20: at 1 << 15, ShuffleNet fp16 took 32-34 ms per
#: run with the machine otherwise idle and 18-23 ms at 1 << 20 (NumPy backend
#: 13-16 ms); it looked fine only while ONNX Runtime's spinning threads kept the
#: cores awake (the benchmark's interleaved ORT session).
SPLIT_ROUND = 1 << 20


def round_store(a: np.ndarray, scratch: np.ndarray, lo: np.float32 = STORE_BOUNDS[0],
                hi: np.float32 = STORE_BOUNDS[1], src: np.ndarray | None = None) -> float | None:
    """:func:`~nnrt_npu_emu.numerics.store_fp16` of the fp16 store ``a``
    (clamped to ``lo``/``hi``; the values read from ``src`` when given):
    elementwise, so large stores are cut into pieces that
    :func:`nnrt_numpy.parallel.run_chunks` runs on the threads it finds idle
    (same bits whichever thread rounds).  Returns a value that did not fit
    fp16, or ``None``."""
    n = a.size
    k = parallel.threads() if n >= SPLIT_ROUND else 1
    if k <= 1:
        return store_fp16(a, scratch, lo, hi, src)
    flat = a.reshape(-1)
    src_flat = None if src is None else src.reshape(-1)
    step = -(-n // min(2 * k, n // (SPLIT_ROUND // 2)))
    bad: list[float | None] = [None] * -(-n // step)

    def piece(i: int) -> None:
        s = slice(i * step, min(n, (i + 1) * step))
        bad[i] = store_fp16(flat[s], scratch[s], lo, hi, None if src_flat is None else src_flat[s])

    parallel.run_chunks(piece, len(bad), k)
    return next((b for b in bad if b is not None), None)


def sentinel_saturation(fn: str, ins: Sequence[np.ndarray], out: np.ndarray) -> bool:
    """Whether every saturated element of the stored fp16 sum/difference
    ``out`` (``fn`` "add" or "sub" of ``ins``) is one where an operand already
    holds a mask sentinel of the result's sign: exactly +-FP16_MAX ("minus
    infinity" or ``finfo.min`` clipped to fp16, as an fp16 chip holds an
    additive attention mask), or in an fp32 operand float32's own extremes or
    an infinity (what :func:`~nnrt_npu_emu.numerics.fp16_unsafe_value` calls a
    sentinel, not a weight).  ``-65504 + score`` saturating there keeps the
    mask's meaning, as the fp32 sum does after a softmax; a saturated element
    with no sentinel under it (or under a value such as 7e4) is a real overflow."""
    saturated = np.abs(out) >= FP16_MAX
    covered = np.zeros(out.shape, bool)
    for i, x in enumerate(ins):
        x = np.broadcast_to(x, out.shape)
        mag = np.abs(x)
        sign = -1.0 if fn == "sub" and i else 1.0  # a - b: b's sentinel pushes the result the other way
        covered |= ((mag == FP16_MAX) | (mag >= _F32_MAX)) & (np.sign(x) * sign == np.sign(out))
    return bool(np.all(covered | ~saturated))


class Store:
    """The fp16 store of one workspace output: saturation (narrowed by a
    fused activation) and rounding, of the whole output (``store()``) or of
    a piece (``store(sel)``, ``sel`` maps an array of the output's shape to
    the piece: a kernel's epilogue while the piece is in cache).  ``src``:
    where the kernel wrote the values (default: ``out`` itself).  ``bad``:
    the first value that did not fit fp16 since the run cleared it (sticky,
    like a chip's float-status register)."""

    __slots__ = ("out", "src", "scratch", "lo", "hi", "bad")

    def __init__(self, out: np.ndarray, scratch: np.ndarray, bounds: tuple[np.float32, np.float32],
                 src: np.ndarray | None = None) -> None:
        self.out, self.src, self.lo, self.hi = out, src, bounds[0], bounds[1]
        self.scratch = scratch[:out.size].reshape(out.shape)
        self.bad: float | None = None

    def __call__(self, sel: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        if sel is None:
            bad = round_store(self.out.reshape(-1), self.scratch.reshape(-1), self.lo, self.hi,
                              None if self.src is None else self.src.reshape(-1))
        else:
            bad = store_fp16(sel(self.out), sel(self.scratch), self.lo, self.hi,
                             None if self.src is None else sel(self.src))
        if bad is not None and self.bad is None:
            self.bad = bad


class IOSlot:
    """An operand in a run's input or output tensor (resolved per run)."""

    __slots__ = ("space", "index", "dtype", "shape")

    def __init__(self, op: Operand) -> None:
        self.space = op.space
        self.index = op.offset
        self.dtype = np.dtype(op.dtype)
        self.shape = tuple(op.shape)


class BoundProgram:
    """``program``'s instructions with their ws/const operands as arrays:
    workspace at ``ws_off`` and weights at ``const_off`` in ``arena``."""

    def __init__(self, program: Program, arena: DeviceArena, ws_off: int, const_off: int) -> None:
        self.arena = arena
        self.program = program
        self.ws_off, self.const_off = ws_off, const_off
        self.widened_bytes = 0  #: host bytes of the widened fp16 constants (maybe shared: :func:`widened`)
        self._widened: dict[tuple[int, tuple[int, ...]], np.ndarray] = {}
        self._shadow: np.ndarray | None = None
        plan = plan_steps(program)
        size = max([0] + [int(np.prod(o.shape, dtype=np.int64)) for st in plan for o, r in zip(st.outs, st.rounded)
                          if r])
        self._scratch = np.empty(size, np.uint32)
        self.fused = sum(st.count - 1 for st in plan)  #: activations applied in the store before them
        #: (first instruction, instructions covered, kernel, inputs, outputs, attrs, stores after the kernel,
        #: the store passed to the kernel as its epilogue)
        self.steps: list[tuple[int, int, Callable, list[Any], list[Any], dict, list[Store], Store | None]] = []
        #: first instructions of fp16 sums/differences, whose saturation may be a mask sentinel's
        self.sentinel_steps: dict[int, str] = {}
        for st in plan:
            if st.kernel == "nary" and st.attrs.get("fn") in ("add", "sub") and st.count == 1:
                self.sentinel_steps[st.index] = st.attrs["fn"]
            args = [None if o is None else self._bind(o, program.ws_size) for o in st.ins]
            outs = [self._bind(o, program.ws_size) for o in st.outs]
            stores = [Store(a, self._scratch, st.bounds if i == 0 else STORE_BOUNDS)
                      for i, (a, r) in enumerate(zip(outs, st.rounded)) if r]
            if st.via is not None:  # the kernel writes its own buffer, the store reads it
                outs[0] = self._bind(st.via, program.ws_size)
                stores[0].src = outs[0]
            epilogue = STORE_KERNELS.get(st.kernel) if st.via is None else None
            if epilogue is not None and len(outs) == 1 and stores:
                self.steps.append((st.index, st.count, epilogue, args, outs, st.attrs, [], stores[0]))
            else:
                self.steps.append((st.index, st.count, KERNELS[st.kernel], args, outs, st.attrs, stores, None))

    def _bind(self, o: Operand, ws_size: int) -> np.ndarray | IOSlot:
        dt, shape = np.dtype(o.dtype), tuple(o.shape)
        if o.space == "ws":
            if dt != _F16:
                return self.arena.view(self.ws_off + o.offset, dt, shape)
            if self._shadow is None:
                self._shadow = np.empty(ws_size // _F16.itemsize + 1, _F32)
            start = o.offset // _F16.itemsize
            return self._shadow[start:start + int(np.prod(shape, dtype=np.int64))].reshape(shape)
        if o.space != "const":
            return IOSlot(o)
        a = self.arena.view(self.const_off + o.offset, dt, shape)
        if dt != _F16:
            a = a.view()
            a.flags.writeable = False  # the weights region is read-only
            return a
        key = (o.offset, shape)
        w = self._widened.get(key)
        if w is None:
            w = self._widened[key] = widened(a)
            self.widened_bytes += w.nbytes
        return w

    def run(self, ins: Sequence[Any], outs: Sequence[Any], trace: list[float] | None = None,
            control: RunControl | None = None) -> tuple[int, float] | None:
        """Run every instruction; ``ins``/``outs`` are the run's tensors (each
        with an ``offset`` into the arena).  ``trace`` collects host seconds per
        instruction; a stopped ``control`` (deadline, cancel) stops the run
        before the next instruction (and, as the thread's current control,
        inside kernels' long host loops).  Returns ``None``, or the first
        instruction whose fp16 store saturated and the value that did not fit
        (the run goes on, saturating, like the chip)."""
        previous = enter_control(control)  # long host loops in kernels check it (and its budget)
        try:
            return self._run_steps(ins, outs, trace, control)
        finally:
            leave_control(previous)

    def _run_steps(self, ins: Sequence[Any], outs: Sequence[Any], trace: list[float] | None,
                   control: RunControl | None) -> tuple[int, float] | None:
        view = self.arena.view
        watch = control if control is not None and control.watched else None
        overflow: tuple[int, float] | None = None

        def resolve(x: Any) -> Any:
            if x.__class__ is IOSlot:
                t = (ins if x.space == "in" else outs)[x.index]
                return view(t.offset, x.dtype, x.shape)
            return x

        for k, count, fn, args, res, attrs, stores, epilogue in self.steps:
            if watch is not None and watch.stopped():
                instr = self.program.instrs[k]
                raise watch.error(f"instruction {k} ({instr.kernel}) of node {instr.node!r} on the NPU")
            t0 = time.perf_counter() if trace is not None else 0.0
            if epilogue is None:
                operands = [None if x is None else resolve(x) for x in args]
                outputs = [resolve(x) for x in res]
                fn(operands, outputs, attrs)
                for store in stores:
                    store()
                    if store.bad is not None:
                        if not self._sentinel_only(k, store.bad, operands, outputs[0]):
                            overflow = overflow or (k, store.bad)
                        store.bad = None
            else:
                fn([None if x is None else resolve(x) for x in args], res, attrs, epilogue)
                if epilogue.bad is not None:
                    overflow = overflow or (k, epilogue.bad)
                    epilogue.bad = None
            if trace is not None:
                trace.append(time.perf_counter() - t0)
                trace.extend([0.0] * (count - 1))  # a fused activation costs no pass of its own
        return overflow

    def _sentinel_only(self, k: int, bad: float, operands: list[Any], out: np.ndarray) -> bool:
        """Whether the saturation that instruction ``k`` flagged is only a mask
        sentinel carried through a sum (:func:`sentinel_saturation`)."""
        fn = self.sentinel_steps.get(k)
        if fn is None or bad != bad or any(x is None for x in operands):  # NaN: never a sentinel's
            return False
        return sentinel_saturation(fn, operands, out)
