#!/usr/bin/env python3
"""Fits the constants of the CUDA V:N:M cost model (kernels/src/cuda/cost.rs) to the H200's
measurements (kernels/cuda/results/h200_run3_bench.csv) with the ptxas register table
(kernels/cuda/ptxas_resources.csv), then checks the fit with each BERT shape held out.

The objective is what the tuner's `model` strategy needs: the regret of measuring only the
best-ranked 10 % of a point's configurations (mean + half the largest), plus 0.3 x the mean
regret of the first choice. Nelder-Mead over the log of the constants, 8 starts.
This mirrors `vnm_cycles` in cost.rs: change both together.

    pip install pandas scipy && python3 scripts/fit_cuda_cost.py [BENCH_CSV [ARCH SMS]]

BENCH_CSV is a device's `bench.csv` (scripts/device-check.sh full writes one), by default the
H200's run 3; ARCH (sm_80 or sm_90: the register table's) and SMS describe its GPU (sm_90,
132 by default).
"""
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.stats import spearmanr

ROOT = Path(__file__).resolve().parent.parent
BENCH = sys.argv[1] if len(sys.argv) > 1 else str(ROOT / "kernels/cuda/results/h200_run3_bench.csv")
ARCH = sys.argv[2] if len(sys.argv) > 2 else "sm_90"
SMS = int(sys.argv[3]) if len(sys.argv) > 3 else 132
SHARED = (164 if ARCH == "sm_80" else 228) * 1024
REGS, WARPS, BLOCKS, RESERVED = 65536, 64, 32, 1024
NAMES = ["mma_issue", "ldmatrix_issue", "copy_issue", "tensor", "l2_bytes_per_cycle",
         "sync", "fragment_latency", "copy_latency"]
START = [2, 4, 4, 8, 64, 100, 30, 100]


def load():
    d = pd.read_csv(BENCH)
    v = d[d.kind == "vnm"].copy()
    for k in ["BM", "BN", "BK", "WM", "WN", "MMA_K", "STAGES"]:
        v[k] = v.config.apply(lambda s: int(re.search(r"\b" + k + r"=(\d+)", s).group(1)))
    r = pd.read_csv(ROOT / "kernels/cuda/ptxas_resources.csv")
    r = r[r.arch == ARCH].rename(columns=str.upper)
    v = v.merge(r[["BM", "BN", "BK", "WM", "WN", "MMA_K", "STAGES", "REGISTERS"]],
                on=["BM", "BN", "BK", "WM", "WN", "MMA_K", "STAGES"])
    v["key"] = list(zip(v.rows, v.cols, v.n, v.v, v.m))
    return v.reset_index(drop=True)


def cycles(c, p):
    warps = (c.BM / c.WM) * (c.BN / c.WN)
    groups = np.ceil(c.cols / c.m)
    slots = np.ceil(2 * groups / (c.BK / 2)) * (c.BK / 2)
    ktiles = 2 * slots / c.BK
    blocks = (c.rows / c.BM) * np.ceil(c.n / c.BN)
    per_warp = np.ceil(c.REGISTERS * 32 / 256) * 256
    shared = c.STAGES * (c.BM * (c.BK / 2 + 8) * 2 + c.BK * (c.BN + 8) * 2 + c.BM * (c.BK / 16) * 2) \
        + np.ceil(4 * groups / 16) * 16 + RESERVED
    resident = np.maximum(np.minimum.reduce([
        np.full(len(c), float(BLOCKS)), np.floor(WARPS / warps),
        np.floor(REGS / (warps * per_warp)), np.floor(SHARED / shared)]), 1)
    per_sm = blocks / SMS
    overlapped = np.minimum(resident, np.maximum(per_sm, 1))
    mt, nt, steps = c.WM / 16, c.WN / 8, c.BK / c.MMA_K
    mmas = mt * nt * steps
    work = mmas * c.MMA_K / 16
    copies = (c.BM * c.BK / 16 + c.BK * c.BN / 8) / (warps * 32)
    issue = mmas * p[0] + (mt + nt) * steps * p[1] + copies * p[2]
    throughput = np.maximum.reduce([warps * work * p[3] / 4, warps * issue / 4,
                                    (c.BM * c.BK + 2 * c.BK * c.BN) / p[4]])
    latency = p[5] + p[6] * steps + np.ceil(warps / 4) * work * p[3] + p[7] / (c.STAGES - 1)
    return np.ceil(per_sm) * ktiles * np.maximum(latency / overlapped, throughput)


def metrics(x, df, with_rho=False):
    pred = cycles(df, np.exp(x))
    t = df.median_us.values
    r10, r1, rho = [], [], []
    for idx in df.groupby("key").indices.values():
        order = idx[np.argsort(pred[idx], kind="stable")]
        budget = max(1, int(round(0.1 * len(idx))))
        best = t[idx].min()
        r10.append(t[order[:budget]].min() / best - 1)
        r1.append(t[order[0]] / best - 1)
        if with_rho:
            rho.append(spearmanr(pred[idx], t[idx]).correlation)
    return np.array(r10), np.array(r1), np.array(rho)


def objective(x, df):
    r10, r1, _ = metrics(x, df)
    return r10.mean() + 0.5 * r10.max() + 0.3 * r1.mean()


def fit(df, starts=8):
    rng = np.random.default_rng(0)
    x0 = np.log(np.array(START, dtype=float))
    best = None
    for s in range(starts):
        x = x0 + (rng.normal(0, 1, len(x0)) if s else 0)
        r = minimize(objective, x, args=(df,), method="Nelder-Mead",
                     options=dict(maxiter=800, xatol=1e-2, fatol=1e-5))
        if best is None or r.fun < best.fun:
            best = r
    return best.x


def report(tag, x, df):
    r10, r1, rho = metrics(x, df, with_rho=True)
    print(f"{tag}: regret at 10 % mean {100 * r10.mean():.2f} % max {100 * r10.max():.2f} % | "
          f"first choice mean {100 * r1.mean():.2f} % max {100 * r1.max():.2f} % | "
          f"Spearman mean {rho.mean():.2f} min {rho.min():.2f}")


def main():
    v = load()
    x = fit(v)
    for name, value in zip(NAMES, np.exp(x)):
        print(f"{name} = {value:.3f}")
    report("all points (in sample)", x, v)
    for rows, cols in [(768, 768), (3072, 768), (768, 3072)]:
        held = (v.rows == rows) & (v.cols == cols)
        xh = fit(v[~held].reset_index(drop=True), starts=4)
        report(f"{rows}x{cols} held out", xh, v[held].reset_index(drop=True))


if __name__ == "__main__":
    sys.exit(main())
