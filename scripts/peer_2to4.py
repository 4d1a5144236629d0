#!/usr/bin/env python3
"""NVIDIA's own 2:4 path as the peer of cotune's Hopper kernel (issue 19): PyTorch's
semi-structured sparse tensors (cuSPARSELt where PyTorch has it, else its CUTLASS kernels)
against PyTorch's dense fp16 matmul (cuBLAS), on the BERT shapes at the benchmark's batch
sizes. Run by scripts/device-check.sh on the GPU machine; writes OUT/peer_2to4.csv and prints
a compact table. Skips (exit 0, with the reason) where PyTorch or a GPU is missing.

    python3 scripts/peer_2to4.py OUT [N,N,...]
"""
import csv
import statistics
import sys


def timed_us(fn, torch, reps=20, warmup=5):
    """Median of `reps` device-event timings of fn, in microseconds."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(samples)


def two_four(a, torch):
    """a with the 2 largest |values| of every 4 consecutive in a row kept."""
    rows, cols = a.shape
    groups = a.reshape(rows, cols // 4, 4)
    keep = groups.abs().topk(2, dim=-1).indices
    mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(-1, keep, True)
    return (groups * mask).reshape(rows, cols)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    ns = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "4096,16384").split(",")]
    try:
        import torch
        from torch.sparse import SparseSemiStructuredTensor, to_sparse_semi_structured
    except ImportError as e:
        print(f"peer 2:4: skipped, no PyTorch semi-structured sparsity here ({e})")
        return 0
    if not torch.cuda.is_available():
        print("peer 2:4: skipped, no GPU")
        return 0
    rows_out = []
    backends = [("cusparselt", False), ("cutlass", True)]
    for r, k in [(768, 768), (3072, 768), (768, 3072)]:
        for n in ns:
            g = torch.Generator(device="cuda").manual_seed(r + k + n)
            a = two_four(torch.randn(r, k, device="cuda", dtype=torch.float16, generator=g), torch)
            b = torch.randn(k, n, device="cuda", dtype=torch.float16, generator=g)
            dense_us = timed_us(lambda: torch.mm(a, b), torch)
            want = torch.mm(a, b).float()
            for name, force_cutlass in backends:
                try:
                    SparseSemiStructuredTensor._FORCE_CUTLASS = force_cutlass
                    sa = to_sparse_semi_structured(a)
                    got = torch.mm(sa, b).float()
                    err = ((got - want).norm() / want.norm()).item()
                    us = timed_us(lambda: torch.mm(sa, b), torch)
                    rows_out.append([r, k, n, name, dense_us, us, dense_us / us, err, ""])
                except Exception as e:  # a backend this PyTorch lacks is a row, not a crash
                    rows_out.append([r, k, n, name, dense_us, "", "", "", str(e)[:200]])
    with open(f"{out}/peer_2to4.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rows", "cols", "n", "backend", "dense_us", "sparse_us", "speedup", "rel_err", "error"])
        w.writerows(rows_out)
    print(f"2:4 peer (PyTorch {torch.__version__}) vs torch.mm fp16 on {torch.cuda.get_device_name()}:")
    print(f"{'shape':>10} {'N':>6} {'backend':>10} {'dense_us':>9} {'sparse_us':>9} {'speedup':>7}")
    for r, k, n, name, d, s, sp, _, e in rows_out:
        if e:
            print(f"{r}x{k:<5} {n:>6} {name:>10} {d:>9.1f}  failed: {e[:60]}")
        else:
            print(f"{r}x{k:<5} {n:>6} {name:>10} {d:>9.1f} {s:>9.1f} {sp:>7.2f}")
    for name, _ in backends:
        for n in ns:
            sp = [row[6] for row in rows_out if row[3] == name and row[2] == n and row[6] != ""]
            if sp:
                print(f"mean N={n:>5} 2:4 {name}: {sum(sp) / len(sp):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
