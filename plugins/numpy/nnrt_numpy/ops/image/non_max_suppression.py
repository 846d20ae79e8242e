"""NonMaxSuppression (opsets 10, 11): greedy per-class box suppression.

Boxes are corners ``[y1, x1, y2, x2]`` (any corner order) or, with
``center_point_box=1``, ``[x_center, y_center, width, height]``.  IoUs are
computed as one vectorized matrix per (batch, class); the greedy selection
walks the score-sorted candidates."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register


def _corners(boxes: np.ndarray, center: bool) -> np.ndarray:
    """(S, 4) -> (S, 4) as [y_min, x_min, y_max, x_max]."""
    if center:
        xc, yc, w, h = boxes.T
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=1)
    y1, x1, y2, x2 = boxes.T
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)], axis=1)


def _iou_matrix(b: np.ndarray) -> np.ndarray:
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    ih = np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0])
    iw = np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1])
    inter = np.maximum(ih, 0) * np.maximum(iw, 0)
    union = area[:, None] + area[None, :] - inter
    ok = (inter > 0) & (area[:, None] > 0) & (area[None, :] > 0) & (union > 0)
    return np.where(ok, inter / np.where(union > 0, union, 1), 0.0)


@register
class NonMaxSuppression(Kernel):
    op_type = "NonMaxSuppression"
    since_version = 10

    def _setup(self, node: NodeInfo) -> None:
        self.center = int(node.attr("center_point_box", 0))
        if self.center not in (0, 1):
            raise self.fail(f"center_point_box must be 0 or 1, got {self.center}")

    def __call__(self, boxes, scores, max_output_boxes_per_class=None, iou_threshold=None,
                 score_threshold=None) -> Sequence[Any]:
        boxes = np.asarray(boxes, dtype=np.float64)
        scores = np.asarray(scores, dtype=np.float64)
        if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 \
                or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
            raise self.fail(f"boxes must be (B, S, 4) and scores (B, C, S); got {boxes.shape}, {scores.shape}")
        max_out = 0 if max_output_boxes_per_class is None or np.asarray(max_output_boxes_per_class).size == 0 \
            else int(np.asarray(max_output_boxes_per_class).reshape(-1)[0])
        iou_t = 0.0 if iou_threshold is None or np.asarray(iou_threshold).size == 0 \
            else float(np.asarray(iou_threshold).reshape(-1)[0])
        score_t = None if score_threshold is None or np.asarray(score_threshold).size == 0 \
            else float(np.asarray(score_threshold).reshape(-1)[0])
        if not 0.0 <= iou_t <= 1.0:
            raise self.fail(f"iou_threshold must lie in [0, 1], got {iou_t}")
        selected: list[tuple[int, int, int]] = []
        if max_out <= 0:
            return (np.zeros((0, 3), dtype=np.int64),)
        for b in range(boxes.shape[0]):
            corners = _corners(boxes[b], bool(self.center))
            iou = _iou_matrix(corners)
            for c in range(scores.shape[1]):
                s = scores[b, c]
                cand = np.arange(s.shape[0]) if score_t is None else np.nonzero(s > score_t)[0]
                cand = cand[np.argsort(-s[cand], kind="stable")]
                keep: list[int] = []
                alive = np.ones(cand.shape[0], dtype=bool)
                for k in range(cand.shape[0]):
                    if not alive[k]:
                        continue
                    i = cand[k]
                    keep.append(int(i))
                    if len(keep) >= max_out:
                        break
                    alive[k + 1:] &= iou[i, cand[k + 1:]] <= iou_t
                selected.extend((b, c, i) for i in keep)
        return (np.array(selected, dtype=np.int64).reshape(-1, 3),)
