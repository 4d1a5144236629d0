#!/usr/bin/env python3
"""What the device check (scripts/device-check.sh) reads from its cuda-smoke run, the engine
half of issue 19: the Hopper kernel's points the tuner measured and how many it rejected as
wrong; each layer format's best point; the evaluate rows; and, per evaluate row, its GPU
latency at the kernel-tune batch beside the sum of its layers' kernel-tune latencies (the
best point of each layer's tuning: the issue asks for agreement within 10 %; a tuning's batch
is its GEMMs' columns, the evaluate batch for an MLP, whose rows these are). Writes
kernel_tune.csv, evaluate.csv and engine_latency.csv into SMOKE. A report, not a gate: it
exits 0 whatever the figures (1 only if the run's tables are missing).

    python3 scripts/cuda_smoke_check.py SMOKE   # SMOKE/out/cuda-smoke holds the run's tables
"""
import sys

import pandas as pd


def best_points(kt):
    """Each tuning's winning point of the tuned format (not the dense baseline), by key."""
    ok = kt[kt.status == "ok"]
    if "is_best" not in ok:
        return ok.iloc[0:0]
    best = ok[ok.is_best.fillna(False).astype(bool)]
    if "baseline" in best:
        best = best[~best.baseline.fillna(False).astype(bool)]
    return best.drop_duplicates("key").set_index("key")


def hopper_points(kt):
    """How many Hopper points ran, how many the tuner's check rejected, and the first reason."""
    if "kernel" not in kt or "point_error" not in kt:
        return
    hopper = kt[(kt.status == "ok") & (kt.kernel == "cuda-vnm-wgmma")]
    wrong = hopper[hopper.point_error.fillna("").str.startswith("wrong result")]
    print(f"cuda-vnm-wgmma points: {len(hopper)} measured, {len(wrong)} rejected as wrong")
    if len(wrong):
        print("  first:", wrong.point_error.iloc[0])


def pattern(e):
    """An evaluate row's pattern, "nm 2:4" or "dense"."""
    n, m = e.get("prune.n"), e.get("prune.m")
    both = pd.notna(n) and pd.notna(m)
    return f"{e.get('prune.pattern')}" + (f" {int(n)}:{int(m)}" if both else "")


def engine_latency(ev, best):
    """Per evaluate row and tuned batch size: its latency at that batch against the sum of its
    layers' tuned latencies there (rows whose layers' tunings are incomplete say so), at the
    batch sizes both ran."""
    rows = []
    for _, e in ev[ev.status == "ok"].iterrows():
        keys = list(e.get("kernel_tune_keys", []))
        tuned = best.reindex(keys).dropna(subset=["kernel_tune.batch_tokens"])
        layers = len(e.get("layer_latency_us", []))
        if len(tuned) < len(keys):
            rows.append({"key": e.key[:12], "pattern": pattern(e),
                         "note": f"{len(keys) - len(tuned)} of {len(keys)} tunings lack a best point"})
        for b, at in tuned.groupby(tuned["kernel_tune.batch_tokens"].astype(int)):
            if pd.isna(e.get(f"latency_us_b{b}")):
                continue  # not a batch size the evaluation ran
            row = {"key": e.key[:12],
                   "pattern": pattern(e),
                   "batch": b}
            if len(at) != layers or at.latency_us_median.isna().any():
                rows.append(row | {"note": f"{len(at)} of {layers} layers tuned at this batch"})
                continue
            summed = float(at.latency_us_median.sum())
            measured = float(e[f"latency_us_b{b}"])
            rows.append(row | {
                "evaluate_us": measured,
                "layers_tuned_us": summed,
                "ratio": measured / summed,
                "within_10pct": abs(measured / summed - 1) <= 0.10,
                "kernels": " + ".join(at.kernel.astype(str)),
            })
    return pd.DataFrame(rows)


def main(smoke):
    out = f"{smoke}/out/cuda-smoke"
    try:
        kt, ev = pd.read_parquet(f"{out}/kernel_tune"), pd.read_parquet(f"{out}/evaluate")
    except Exception as e:  # noqa: BLE001 - any unreadable table is reported the same way
        print(f"no cuda-smoke tables in {out}: {e}")
        return 1
    kt.to_csv(f"{smoke}/kernel_tune.csv", index=False)
    ev.to_csv(f"{smoke}/evaluate.csv", index=False)
    pd.set_option("display.max_colwidth", 90)
    pd.set_option("display.width", 200)
    hopper_points(kt)
    best = best_points(kt)
    if len(best) and "kernel" in best:
        print(best.reset_index()[["format.pattern", "format.rows", "format.cols", "kernel",
                                  "params", "latency_us_median", "speedup_vs_dense"]]
              .to_string(index=False))
    cols = [c for c in ["prune.pattern", "prune.n", "prune.m", "prune.v", "status", "accuracy",
                        "max_rel_error", "latency_us_median", "speedup_vs_dense", "error"]
            if c in ev]
    print(ev[cols].to_string(index=False))
    lat = engine_latency(ev, best)
    if len(lat):
        lat.to_csv(f"{smoke}/engine_latency.csv", index=False)
        print("evaluate latency against the sum of its layers' kernel-tune latencies:")
        print(lat.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
