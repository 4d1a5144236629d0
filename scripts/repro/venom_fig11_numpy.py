#!/usr/bin/env python3
"""Independent numpy reproduction of VENOM (Castro et al., SC'23) Figure 11.

Figure 11 of the paper ("Energy", produced by the artifact's benchmark/energy.py and
plot/energy.py in github.com/UDC-GAC/venom) plots the retained L1 norm

    ||W ⊙ mask||_1 / ||W||_1          (magnitude pruning, no fine-tuning)

of one 768×768 BERT-base weight (encoder.layer.8.attention.self.query.weight) under several
sparsity patterns. Here the same quantity is computed on cotune's i.i.d. Gaussian stand-in,
tensor `encoder.layer.0.attention.self.query.weight` of
experiments/repro/venom-fig11/gaussian-query-768.safetensors, so the numbers are NOT expected to equal the
published ones exactly (different weights), only to follow the same ordering/trend.

The safetensors file is parsed by hand (8-byte little-endian header length, JSON header with
dtype/shape/data_offsets, raw little-endian data); the `safetensors` package is not used.
Everything is computed in float64 on |w|.

Orientation conventions (W is stored row-major, rows × cols = out_features × in_features, the
PyTorch nn.Linear layout, which is also how VENOM's energy.py indexes `matrix[r, c]`):

* N:M — groups of M consecutive *columns within one row* (along the reduction / in_features
  dimension, the dimension sparse tensor cores compress). Matches cotune's mask::select::nm
  ("Top-N per group of M consecutive columns in each row") and VENOM energy.py
  (`dense[row*ncols + mcol*m + col]`).
* V:N:M — blocks of V consecutive *rows* × M consecutive *columns*; the 4 selected columns
  are shared by the V rows of a block; inside the block every row keeps its 2 largest |w|
  among those 4 columns. Matches cotune's mask::vnm (block b = rows b·V..b·V+V, group g =
  cols g·M..g·M+M) and format::vnm (`column_loc` is (rows/v) × G × 4) and VENOM energy.py
  (`t_bm_i = bm_i*tileM*ncols`, i.e. tileM = V rows).
* Vector-wise V×1 — a vector is V consecutive *rows* of one *column* (V rows × 1 column).
  Matches cotune's format::vector ("per block of V rows ... a contiguous column-vector of V
  values") and VENOM energy.py's vector_groups(d_rows=k, d_cols=1).

Column / vector scores, as VENOM's artifact (benchmark/energy.py) computes them; these give the
`numpy` values (the `independent` values of experiments/repro/venom-fig11/expected.toml):
  - V:N:M: over all C(M,4) column quadruples of a block, the one maximising the L1 the block
    actually keeps (sum over rows of each row's best 2 of the 4);
  - V×1: vectors ranked by their L1 norm.
Two variants are printed as TOML comments only: the 4 columns of largest L1 (a cheaper
heuristic) for V:N:M, and vectors ranked by L2 norm (what cotune's mask::select::vector does).

Keep counts: unstructured keeps round((1-s)·n) weights; vector-wise keeps round((1-s)·#vectors)
vectors (768·768·0.25/V is an integer for every V here, as in VENOM's elems//v).

Analytic sanity checks for i.i.d. N(0, σ²) (scale-free):
  - unstructured, density p: t = Φ⁻¹(1 - p/2); retained = E[|w|; |w|>t]/E|w| = exp(-t²/2).
  - N:M: E[sum of top N of M half-normals] / (M·E|w|), by numerical order statistics.
  - V:N:M with V → ∞: column L1s over V rows become equal, so the 4 columns are effectively
    arbitrary: limit = E[top 2 of 4 half-normals] / (8·E|w|). V:2:8 must lie between this
    limit and the 2:8 value (V = 1).
  - vector V×1 (CLT approximation, rough for small V): S = L1 of a vector ≈ N(Vμ, Vς²) with
    μ = √(2/π), ς² = 1 - 2/π; retained ≈ p + ς·φ(z)/(√V·μ), z = Φ⁻¹(1-p).

Usage:  python3 scripts/repro/venom_fig11_numpy.py [path.safetensors] [tensor name]
"""

import itertools
import json
import math
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PATH = os.path.join(HERE, "..", "..", "experiments", "repro", "venom-fig11", "gaussian-query-768.safetensors")
DEFAULT_TENSOR = "encoder.layer.0.attention.self.query.weight"

DTYPES = {
    "F64": "<f8", "F32": "<f4", "F16": "<f2",
    "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1",
}


# ----------------------------------------------------------------------------- safetensors
def read_safetensors_tensor(path, name):
    with open(path, "rb") as f:
        raw = f.read()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    if name not in header:
        raise KeyError(f"{name!r} not in {path}; tensors: {sorted(k for k in header if k != '__metadata__')}")
    info = header[name]
    dtype = info["dtype"]
    if dtype == "BF16":
        lo, hi = info["data_offsets"]
        u16 = np.frombuffer(raw, dtype="<u2", count=(hi - lo) // 2, offset=8 + hlen + lo)
        arr = (u16.astype(np.uint32) << 16).view(np.float32)
    else:
        np_dtype = np.dtype(DTYPES[dtype])
        lo, hi = info["data_offsets"]
        count = (hi - lo) // np_dtype.itemsize
        assert count * np_dtype.itemsize == hi - lo
        arr = np.frombuffer(raw, dtype=np_dtype, count=count, offset=8 + hlen + lo)
    shape = tuple(info["shape"])
    assert arr.size == int(np.prod(shape)), (arr.size, shape)
    return arr.reshape(shape).astype(np.float64)


# ----------------------------------------------------------------------------- masks (on A = |W|)
def retained(a, keep):
    return float(a[keep].sum() / a.sum())


def mask_unstructured(a, sparsity):
    k = int(round((1.0 - sparsity) * a.size))
    flat = a.ravel()
    idx = np.argpartition(-flat, k - 1)[:k]
    keep = np.zeros(a.size, dtype=bool)
    keep[idx] = True
    return keep.reshape(a.shape)


def _topk_along_last(x, k):
    """Boolean mask of the k largest entries along the last axis (ties: lower index)."""
    order = np.argsort(-x, axis=-1, kind="stable")[..., :k]
    keep = np.zeros(x.shape, dtype=bool)
    np.put_along_axis(keep, order, True, axis=-1)
    return keep


def mask_nm(a, n, m):
    r, c = a.shape
    assert c % m == 0
    g = a.reshape(r, c // m, m)
    return _topk_along_last(g, n).reshape(r, c)


def mask_vnm_l1(a, v, n, m, kcols=4):
    """V:N:M: per V×M block keep the `kcols` columns with largest block L1, then per row the
    N largest among them."""
    r, c = a.shape
    assert r % v == 0 and c % m == 0
    b = a.reshape(r // v, v, c // m, m)                  # (rb, v, cb, m)
    col_l1 = b.sum(axis=1)                               # (rb, cb, m)
    col_keep = _topk_along_last(col_l1, kcols)           # (rb, cb, m)
    # within the block, entries outside the chosen columns cannot be kept
    cand = np.where(col_keep[:, None, :, :], b, -np.inf)  # (rb, v, cb, m)
    keep = _topk_along_last(cand, n)
    keep &= col_keep[:, None, :, :]
    return keep.reshape(r, c)


def mask_vnm_exhaustive(a, v, n, m, kcols=4):
    """V:N:M with the block's column set chosen over all C(m, kcols) subsets, maximising the
    L1 the block keeps (as VENOM's artifact benchmark/energy.py does)."""
    r, c = a.shape
    b = a.reshape(r // v, v, c // m, m)
    quads = list(itertools.combinations(range(m), kcols))
    best_val = None
    best_q = None
    for qi, q in enumerate(quads):
        sub = b[..., list(q)]                                   # (rb, v, cb, kcols)
        val = np.sort(sub, axis=-1)[..., -n:].sum(axis=(-1, 1))  # (rb, cb)
        if best_val is None:
            best_val, best_q = val, np.zeros(val.shape, dtype=np.int64)
        else:
            better = val > best_val                              # strict: first quad wins ties
            best_val = np.where(better, val, best_val)
            best_q = np.where(better, qi, best_q)
    qarr = np.array(quads)                                       # (nq, kcols)
    col_keep = np.zeros(best_q.shape + (m,), dtype=bool)
    np.put_along_axis(col_keep, qarr[best_q], True, axis=-1)
    cand = np.where(col_keep[:, None, :, :], b, -np.inf)
    keep = _topk_along_last(cand, n) & col_keep[:, None, :, :]
    return keep.reshape(r, c)


def mask_vector(a, v, sparsity, norm="l1"):
    """V×1 vectors (V consecutive rows of one column); keep the top (1-s) fraction by norm."""
    r, c = a.shape
    assert r % v == 0
    blocks = a.reshape(r // v, v, c)
    score = blocks.sum(axis=1) if norm == "l1" else np.sqrt((blocks ** 2).sum(axis=1))
    kv = int(round((1.0 - sparsity) * score.size))
    idx = np.argpartition(-score.ravel(), kv - 1)[:kv]
    vkeep = np.zeros(score.size, dtype=bool)
    vkeep[idx] = True
    vkeep = vkeep.reshape(score.shape)                   # (rb, c)
    return np.broadcast_to(vkeep[:, None, :], blocks.shape).reshape(r, c)


# ----------------------------------------------------------------------------- analytics
def _phi(x):
    return np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _Phi_inv(p):
    lo, hi = -10.0, 10.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def analytic_unstructured(sparsity):
    p = 1.0 - sparsity
    t = _Phi_inv(1.0 - p / 2.0)
    return math.exp(-t * t / 2.0)


def _halfnormal_top_sum(n_top, m):
    """E[sum of the n_top largest of m i.i.d. half-normal(1)] by quadrature."""
    x = np.linspace(0.0, 12.0, 400001)
    erf = np.frompyfunc(math.erf, 1, 1)
    F = erf(x / math.sqrt(2)).astype(np.float64)
    f = 2.0 * _phi(x)
    total = 0.0
    for j in range(1, n_top + 1):          # j-th largest = order stat (m - j + 1) of m
        coef = math.factorial(m) / (math.factorial(j - 1) * math.factorial(m - j))
        dens = coef * f * F ** (m - j) * (1.0 - F) ** (j - 1)
        total += np.trapezoid(x * dens, x) if hasattr(np, "trapezoid") else np.trapz(x * dens, x)
    return total


MU = math.sqrt(2.0 / math.pi)               # E|w| for N(0,1)


def analytic_nm(n, m):
    return _halfnormal_top_sum(n, m) / (m * MU)


def analytic_vnm_limit(n, m, kcols=4):
    return _halfnormal_top_sum(n, kcols) / (m * MU)


def analytic_vector_clt(v, sparsity):
    p = 1.0 - sparsity
    z = _Phi_inv(1.0 - p)
    sig = math.sqrt(1.0 - 2.0 / math.pi)
    return p + sig * float(_phi(z)) / (math.sqrt(v) * MU)


# ----------------------------------------------------------------------------- main
def main():
    path = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_PATH
    name = sys.argv[2] if len(sys.argv) > 2 else DEFAULT_TENSOR
    w = read_safetensors_tensor(path, name)
    a = np.abs(w)
    rows, cols = a.shape

    out = []
    out.append("# VENOM Fig. 11 reproduction (independent numpy), retained L1 = ||W*mask||_1/||W||_1")
    out.append(f"# tensor {name} {rows}x{cols} from {os.path.basename(path)}; "
               f"mean {w.mean():.4g}, std {w.std():.4g}")
    out.append("# orientation: N:M groups along a row (M consecutive cols); V:N:M blocks = V rows x M cols;"
               " vector Vx1 = V consecutive rows of one column")

    def emit(pattern, sparsity, value, n=None, m=None, v=None, comments=()):
        out.append("")
        out.append("[[value]]")
        out.append(f'pattern = "{pattern}"')
        out.append(f"sparsity = {sparsity}")
        if n is not None:
            out.append(f"n = {n}")
        if m is not None:
            out.append(f"m = {m}")
        if v is not None:
            out.append(f"v = {v}")
        out.append(f"numpy = {value:.4f}")
        for cmt in comments:
            out.append(f"# {cmt}")

    for s in (0.75,):
        keep = mask_unstructured(a, s)
        emit("unstructured", s, retained(a, keep),
             comments=[f"kept {keep.mean():.4f}; analytic iid Gaussian exp(-t^2/2) = {analytic_unstructured(s):.4f}"])

    keep = mask_nm(a, 2, 8)
    emit("nm", 0.75, retained(a, keep), n=2, m=8,
         comments=[f"kept {keep.mean():.4f}; analytic iid Gaussian E[top2 of 8 |w|]/(8 E|w|) = {analytic_nm(2, 8):.4f}"])

    lim = analytic_vnm_limit(2, 8)
    for v in (16, 32, 64, 128):
        kl1 = mask_vnm_l1(a, v, 2, 8)
        keep = mask_vnm_exhaustive(a, v, 2, 8)
        emit("vnm", 0.75, retained(a, keep), n=2, m=8, v=v,
             comments=[f"kept {keep.mean():.4f}; the 4 columns of largest L1 instead of the best of all C(8,4) = "
                       f"{retained(a, kl1):.4f}",
                       f"analytic bounds iid Gaussian: V->inf limit {lim:.4f} <= value <= 2:8 {analytic_nm(2, 8):.4f}"])

    for v in (2, 4, 8, 16, 32):
        keep = mask_vector(a, v, 0.75, "l1")
        k2 = mask_vector(a, v, 0.75, "l2")
        emit("vector", 0.75, retained(a, keep), v=v,
             comments=[f"kept {keep.mean():.4f}; L2-ranked vectors (cotune's rule) = {retained(a, k2):.4f}",
                       f"CLT approx iid Gaussian = {analytic_vector_clt(v, 0.75):.4f}"])

    keep = mask_unstructured(a, 0.9)
    emit("unstructured", 0.9, retained(a, keep),
         comments=[f"kept {keep.mean():.4f}; analytic iid Gaussian exp(-t^2/2) = {analytic_unstructured(0.9):.4f}"])

    print("\n".join(out))


if __name__ == "__main__":
    main()
