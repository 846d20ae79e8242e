"""TfIdfVectorizer (opset 9): count the pool's n-grams (lengths
``min_gram_length..max_gram_length``, with up to ``max_skip_count`` skipped
tokens between items; unigrams are counted once) in each row of an int or
string tensor and output TF, IDF or TF-IDF values at ``ngram_indexes``.

N-grams are matched as integer keys (tokens mapped to dense pool ids), so
counting is vectorized over the batch and positions."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from nnrt_numpy.kernel import Kernel, NodeInfo, register

from ._strings import str_attr


@register
class TfIdfVectorizer(Kernel):
    op_type = "TfIdfVectorizer"
    since_version = 9

    def _setup(self, node: NodeInfo) -> None:
        self.mode = str_attr(node.attr("mode"), "")
        if self.mode not in ("TF", "IDF", "TFIDF"):
            raise self.fail(f"mode must be TF, IDF or TFIDF, got {self.mode!r}")
        self.min_n = int(node.attr("min_gram_length", 0))
        self.max_n = int(node.attr("max_gram_length", 0))
        self.max_skip = int(node.attr("max_skip_count", 0))
        if not 1 <= self.min_n <= self.max_n or self.max_skip < 0:
            raise self.fail("need 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0")
        counts = [int(c) for c in (node.attr("ngram_counts") or [])]
        indexes = [int(i) for i in (node.attr("ngram_indexes") or [])]
        pool_i = node.attr("pool_int64s")
        pool_s = node.attr("pool_strings")
        if (pool_i is None) == (pool_s is None):
            raise self.fail("exactly one of pool_int64s and pool_strings must be given")
        self.strings = pool_s is not None
        pool = [str_attr(s) for s in pool_s] if self.strings else [int(v) for v in pool_i]
        if not indexes or any(i < 0 for i in indexes):
            raise self.fail("ngram_indexes must be non-empty and non-negative")
        self.out_size = max(indexes) + 1
        weights = node.attr("weights")
        w_out = np.ones(self.out_size, dtype=np.float32)
        if weights is not None:
            weights = [float(w) for w in weights]
            if len(weights) != len(indexes):
                raise self.fail("weights must have one entry per n-gram")
            w_out[np.asarray(indexes)] = weights
        self.weights = w_out
        # dense ids for the pool vocabulary
        self.vocab = {tok: k for k, tok in enumerate(dict.fromkeys(pool))}
        self.base = len(self.vocab) + 1
        # per n: sorted keys and their output positions
        self.grams: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        g = 0
        for i, start in enumerate(counts):
            n = i + 1
            end = counts[i + 1] if i + 1 < len(counts) else len(pool)
            if end < start or (end - start) % n:
                raise self.fail(f"ngram_counts do not split the pool into {n}-grams")
            k = (end - start) // n
            if g + k > len(indexes):
                raise self.fail("ngram_indexes is shorter than the number of n-grams in the pool")
            if k and self.min_n <= n <= self.max_n:
                ids = np.array([self.vocab[t] for t in pool[start:end]], dtype=np.int64).reshape(k, n)
                keys = self._keys(ids)
                order = np.argsort(keys, kind="stable")
                self.grams[n] = (keys[order], np.asarray(indexes[g:g + k], dtype=np.int64)[order])
            g += k
        if self.base ** self.max_n >= 2 ** 62:
            raise self.fail("pool vocabulary too large for the requested n-gram length")

    def _keys(self, ids: np.ndarray) -> np.ndarray:
        key = np.zeros(ids.shape[:-1], dtype=np.int64)
        for j in range(ids.shape[-1]):
            key = key * self.base + ids[..., j]
        return key

    def __call__(self, x) -> Sequence[Any]:
        x = np.asarray(x)
        if x.ndim not in (1, 2):
            raise self.fail(f"input must be [C] or [N, C], got shape {x.shape}")
        rows = x.reshape(1, -1) if x.ndim == 1 else x
        if self.strings:
            if rows.dtype.kind not in "OUS":
                raise self.fail("string pool needs a string input")
            lookup = np.frompyfunc(lambda t: self.vocab.get(t, -1), 1, 1)
            ids = np.asarray(lookup(rows), dtype=np.int64)
        else:
            if rows.dtype.kind not in "iu":
                raise self.fail("integer pool needs an int32/int64 input")
            vals = np.array(list(self.vocab.keys()), dtype=np.int64)
            dense = np.array(list(self.vocab.values()), dtype=np.int64)
            order = np.argsort(vals)
            vals, dense = vals[order], dense[order]
            if len(vals):
                pos = np.clip(np.searchsorted(vals, rows.astype(np.int64)), 0, len(vals) - 1)
                ids = np.where(vals[pos] == rows, dense[pos], -1)
            else:
                ids = np.full(rows.shape, -1, dtype=np.int64)
        b, length = ids.shape
        counts = np.zeros((b, self.out_size), dtype=np.float32)
        for n, (keys, outs) in self.grams.items():
            for skip in range(self.max_skip + 1 if n > 1 else 1):
                step = skip + 1
                span = (n - 1) * step
                if span >= length:
                    break
                starts = np.arange(length - span)
                win = ids[:, starts[:, None] + np.arange(n)[None, :] * step]  # (B, L', n)
                ok = (win >= 0).all(axis=-1)
                key = self._keys(np.maximum(win, 0))
                pos = np.clip(np.searchsorted(keys, key), 0, len(keys) - 1)
                hit = ok & (keys[pos] == key)
                bi, wi = np.nonzero(hit)
                np.add.at(counts, (bi, outs[pos[bi, wi]]), 1.0)
        if self.mode == "IDF":
            out = (counts > 0).astype(np.float32) * self.weights
        elif self.mode == "TFIDF":
            out = counts * self.weights
        else:
            out = counts
        return (out[0] if x.ndim == 1 else out,)
