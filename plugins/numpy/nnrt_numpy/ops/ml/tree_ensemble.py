"""TreeEnsemble (ai.onnx.ml, opset 5): sum (or average / min / max) the leaf
weights reached by every tree, per target, then apply ``post_transform``.

The trees are validated and flattened into arrays at compile time; a run walks
all samples through one tree level at a time (vectorised over the batch).
Targets that no tree reaches score 0 under MIN / MAX (as onnxruntime does).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from nnrt_numpy.special import erfinv

from nnrt_numpy.kernel import Kernel, NodeInfo, dtypes, register

from ._util import ML

LEQ, LT, GTE, GT, EQ, NEQ, MEMBER = range(7)
AVERAGE, SUM, MIN, MAX = range(4)
_POST = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


@register
class TreeEnsemble(Kernel):
    uses_scipy = True  # PROBIT post-transform
    op_type = "TreeEnsemble"
    domain = ML
    since_version = 5
    input_dtypes = dtypes(np.float16, np.float32, np.float64)

    def _req(self, node: NodeInfo, name: str) -> Any:
        v = node.attr(name)
        if v is None:
            raise self.fail(f"missing required attribute {name!r}")
        return v

    def _setup(self, node: NodeInfo) -> None:
        modes = np.asarray(self._req(node, "nodes_modes")).astype(np.int64).ravel()
        feats = np.asarray(self._req(node, "nodes_featureids"), dtype=np.int64)
        splits = np.asarray(self._req(node, "nodes_splits"), dtype=np.float64).ravel()
        tnode = np.asarray(self._req(node, "nodes_truenodeids"), dtype=np.int64)
        fnode = np.asarray(self._req(node, "nodes_falsenodeids"), dtype=np.int64)
        tleaf = np.asarray(self._req(node, "nodes_trueleafs"), dtype=np.int64)
        fleaf = np.asarray(self._req(node, "nodes_falseleafs"), dtype=np.int64)
        n = modes.size
        for name, a in (("nodes_featureids", feats), ("nodes_splits", splits),
                        ("nodes_truenodeids", tnode), ("nodes_falsenodeids", fnode),
                        ("nodes_trueleafs", tleaf), ("nodes_falseleafs", fleaf)):
            if a.size != n:
                raise self.fail(f"{name} has {a.size} entries, nodes_modes has {n}: all nodes_* must have the same length")
        track = node.attr("nodes_missing_value_tracks_true")
        track = np.zeros(n, bool) if track is None else np.asarray(track, dtype=np.int64) != 0
        if track.size != n:
            raise self.fail(f"nodes_missing_value_tracks_true has {track.size} entries, expected {n}")
        if n and (modes.min() < 0 or modes.max() > MEMBER):
            raise self.fail("nodes_modes entries must be in 0..6 (BRANCH_LEQ .. BRANCH_MEMBER)")
        if n and feats.min() < 0:
            raise self.fail("nodes_featureids must be non-negative")
        weights = np.asarray(self._req(node, "leaf_weights"), dtype=np.float64).ravel()
        targets = np.asarray(self._req(node, "leaf_targetids"), dtype=np.int64)
        if weights.size != targets.size:
            raise self.fail(f"leaf_weights ({weights.size}) and leaf_targetids ({targets.size}) must have the same length")
        n_targets = node.attr("n_targets")
        if n_targets is None or int(n_targets) < 1:
            raise self.fail(f"n_targets must be a positive integer, got {n_targets}")
        self.n_targets = int(n_targets)
        if targets.size and (targets.min() < 0 or targets.max() >= self.n_targets):
            raise self.fail(f"leaf_targetids must be in [0, n_targets={self.n_targets})")
        for name, ids, leaf in (("nodes_truenodeids", tnode, tleaf), ("nodes_falsenodeids", fnode, fleaf)):
            limit = np.where(leaf != 0, weights.size, n)
            if np.any((ids < 0) | (ids >= limit)):
                raise self.fail(f"{name} holds an index out of range of the nodes_* / leaf_* attributes")
        roots = np.asarray(self._req(node, "tree_roots"), dtype=np.int64)
        if roots.size == 0 or roots.min() < 0 or roots.max() >= n:
            raise self.fail(f"tree_roots must be a non-empty list of indices into the {n} nodes")
        self.agg = int(node.attr("aggregate_function", SUM))
        if self.agg not in (AVERAGE, SUM, MIN, MAX):
            raise self.fail(f"aggregate_function must be 0..3 (AVERAGE, SUM, MIN, MAX), got {self.agg}")
        self.post = int(node.attr("post_transform", 0))
        if not 0 <= self.post < len(_POST):
            raise self.fail(f"post_transform must be 0..4 ({', '.join(_POST)}), got {self.post}")
        # Set-membership nodes: the sets, in node order, separated by NaN.
        is_member = modes == MEMBER
        sets: list[np.ndarray] = []
        mv = node.attr("membership_values")
        if mv is None:
            if is_member.any():
                raise self.fail("BRANCH_MEMBER nodes need membership_values")
        else:
            mv = np.asarray(mv, dtype=np.float64).ravel()
            cur: list[float] = []
            for v in mv.tolist():
                if np.isnan(v):
                    sets.append(np.array(cur))
                    cur = []
                else:
                    cur.append(v)
            if cur:
                sets.append(np.array(cur))
            if len(sets) != int(is_member.sum()):
                raise self.fail(f"membership_values holds {len(sets)} NaN-delimited set(s) but "
                                f"{int(is_member.sum())} node(s) are BRANCH_MEMBER")
        self.member_sets = dict(zip(np.flatnonzero(is_member).tolist(), sets))
        # A root whose two branches are the same leaf is a one-leaf tree.
        self.root_leaf = (tleaf[roots] != 0) & (fleaf[roots] != 0) & (tnode[roots] == fnode[roots])
        self.modes, self.feats, self.splits, self.track = modes, feats, splits, track
        self.tnode, self.fnode, self.tleaf, self.fleaf = tnode, fnode, tleaf != 0, fleaf != 0
        self.weights, self.targets, self.roots = weights, targets, roots
        self.max_feature = int(feats.max()) if n else -1
        self._check_acyclic()

    def _check_acyclic(self) -> None:
        for r, leaf in zip(self.roots.tolist(), self.root_leaf.tolist()):
            if leaf:
                continue
            seen: set[int] = set()
            stack = [r]
            while stack:
                i = stack.pop()
                if i in seen:
                    raise self.fail(f"tree rooted at node {r} is not a tree (node {i} is reached twice)")
                seen.add(i)
                if not self.tleaf[i]:
                    stack.append(int(self.tnode[i]))
                if not self.fleaf[i]:
                    stack.append(int(self.fnode[i]))

    def _decide(self, nodes: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Whether each sample (row of ``x``) takes the true branch at its node."""
        rows = np.arange(x.shape[0])
        v = x[rows, self.feats[nodes]]
        thr = self.splits[nodes].astype(x.dtype)
        mode = self.modes[nodes]
        with np.errstate(invalid="ignore"):
            res = np.select([mode == LEQ, mode == LT, mode == GTE, mode == GT, mode == EQ, mode == NEQ],
                            [v <= thr, v < thr, v >= thr, v > thr, v == thr, v != thr], False)
        for i in np.unique(nodes[mode == MEMBER]).tolist():
            at = nodes == i
            res[at] = np.isin(v[at], self.member_sets[i].astype(x.dtype))
        return res | (self.track[nodes] & np.isnan(v))

    def _leaves(self, root: int, x: np.ndarray) -> np.ndarray:
        """Leaf index reached by every sample in the tree rooted at ``root``."""
        n = x.shape[0]
        nodes = np.full(n, root, np.int64)
        leaf = np.full(n, -1, np.int64)
        active = np.arange(n)
        while active.size:
            cur = nodes[active]
            go = self._decide(cur, x[active])
            nxt = np.where(go, self.tnode[cur], self.fnode[cur])
            is_leaf = np.where(go, self.tleaf[cur], self.fleaf[cur])
            leaf[active[is_leaf]] = nxt[is_leaf]
            nodes[active] = nxt
            active = active[~is_leaf]
        return leaf

    def __call__(self, x) -> Sequence[Any]:
        x = np.asarray(x)
        if x.dtype not in self.input_dtypes:
            raise self.fail(f"X must be float16, float or double, got {x.dtype}")
        if x.ndim != 2:
            raise self.fail(f"X must be 2-D [N, F], got shape {x.shape}")
        if self.max_feature >= x.shape[1]:
            raise self.fail(f"nodes_featureids reference feature {self.max_feature} but X has {x.shape[1]} features")
        n = x.shape[0]
        rows = np.arange(n)
        acc = np.zeros((n, self.n_targets), np.float64)
        hit = np.zeros((n, self.n_targets), bool)
        if self.agg in (MIN, MAX):
            acc[:] = np.inf if self.agg == MIN else -np.inf
        for root, one_leaf in zip(self.roots.tolist(), self.root_leaf.tolist()):
            leaf = np.full(n, self.tnode[root], np.int64) if one_leaf else self._leaves(root, x)
            w, t = self.weights[leaf], self.targets[leaf]
            if self.agg in (SUM, AVERAGE):
                np.add.at(acc, (rows, t), w)
            elif self.agg == MIN:
                np.minimum.at(acc, (rows, t), w)
            else:
                np.maximum.at(acc, (rows, t), w)
            hit[rows, t] = True
        if self.agg == AVERAGE:
            acc /= self.roots.size
        elif self.agg in (MIN, MAX):
            acc[~hit] = 0.0
        return (self._post_transform(acc).astype(x.dtype),)

    def _post_transform(self, s: np.ndarray) -> np.ndarray:
        name = _POST[self.post]
        if name == "SOFTMAX":
            e = np.exp(s - s.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        if name == "LOGISTIC":
            return 1.0 / (1.0 + np.exp(-s))
        if name == "SOFTMAX_ZERO":  # softmax over the non-zero scores; zeros stay zero
            nz = s != 0
            m = np.where(nz, s, -np.inf).max(axis=1, keepdims=True)
            m = np.where(np.isfinite(m), m, 0.0)
            e = np.where(nz, np.exp(s - m), 0.0)
            tot = e.sum(axis=1, keepdims=True)
            return np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
        if name == "PROBIT":
            return np.sqrt(2.0) * erfinv(2.0 * s - 1.0)
        return s
