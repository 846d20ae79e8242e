"""``nnrt quantize MODEL --calibration DATA -o OUT`` (registered by ``nnrt_core.tools.cli``)."""
from __future__ import annotations

import argparse
import json

from nnrt_core.errors import InputError

__all__ = ["add_quantize_parser", "cmd_quantize"]


def add_quantize_parser(sub: "argparse._SubParsersAction") -> argparse.ArgumentParser:
    from nnrt_core.quantization.config import ACTIVATION_TYPES, METHODS, QuantizationConfig

    d = QuantizationConfig()
    p = sub.add_parser("quantize", help="post-training int8 quantization to an ONNX QDQ model",
                       description="Run MODEL on calibration data with the NumPy backend, collect activation "
                                   "ranges and write an int8 ONNX QDQ model (per-channel int8 weights, "
                                   "per-tensor int8 activations, int32 biases).")
    p.add_argument("model")
    p.add_argument("--calibration", required=True, metavar="DATA",
                   help=".npz file or folder of .npz files: one array per model input, keyed by input name, "
                        "with a leading sample axis")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="where to write the quantized .onnx model")
    p.add_argument("--method", choices=METHODS, default=d.method, help="activation range calibration (default: %(default)s)")
    p.add_argument("--percentile", type=float, default=d.percentile,
                   help="for --method percentile: percentage of values kept (default: %(default)s)")
    sym = p.add_mutually_exclusive_group()
    sym.add_argument("--symmetric", dest="symmetric", action="store_true",
                     help="symmetric int8 activations (zero point 0)")
    sym.add_argument("--asymmetric", dest="symmetric", action="store_false",
                     help="asymmetric activations with a zero point (default)")
    p.set_defaults(symmetric=d.symmetric)
    p.add_argument("--activation-type", choices=ACTIVATION_TYPES, default=d.activation_type,
                   help="element type of asymmetric activations (default: %(default)s)")
    p.add_argument("--per-tensor-weights", action="store_true", help="one scale per weight tensor, not per channel")
    p.add_argument("--batch-size", type=int, default=d.batch_size,
                   help="samples per run when the model's batch dimension is dynamic (default: %(default)s)")
    p.add_argument("--op-types", metavar="A,B", help="quantize only these op types (default: every float op)")
    p.add_argument("--exclude-node", action="append", default=[], metavar="NODE", help="keep NODE in float (repeatable)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (it shows only on a terminal anyway)")
    p.add_argument("--json", action="store_true", help="print the full report as JSON")
    p.set_defaults(func=cmd_quantize)
    return p


def cmd_quantize(args: argparse.Namespace) -> int:
    from nnrt_core.quantization import QuantizationConfig, quantize

    op_types = None
    if args.op_types is not None:
        op_types = tuple(o.strip() for o in args.op_types.split(",") if o.strip())
        if not op_types:
            raise InputError("--op-types expects a comma-separated list of op types")
    cfg = QuantizationConfig(method=args.method, percentile=args.percentile, symmetric=args.symmetric,
                             activation_type=args.activation_type, per_channel=not args.per_tensor_weights,
                             batch_size=args.batch_size, op_types=op_types, exclude_nodes=tuple(args.exclude_node))
    result = quantize(args.model, args.calibration, args.output, config=cfg,
                      progress=False if args.no_progress else None)
    if args.json:
        print(json.dumps({"model": str(args.model), "output": str(args.output), **result.report.to_dict()},
                         indent=2, default=str))
    else:
        print(result.report.summary())
        print(f"wrote {args.output}")
    return 0
