//! Batch 1 (a matrix–vector product) in every sparse format against dense, on one shape:
//! each format's cost-model point per thread count (the tile parameters do not apply to the
//! matrix-vector kernels of N:M, V:N:M and CSR) and every dense point, timed in interleaved
//! rounds (blocks of 200 calls, 15 rounds), medians compared. Issue 18 asks that no sparse
//! model be slower than dense at batch 1, and 64:2:8 ≥ 2× on 3072×768.
//!
//! `cargo run --release -p kernels --example gemv_formats [-- ROWS COLS [N]]` (N columns of B
//! instead of 1: the same comparison for small batches, e.g. a ViT's 17 tokens at batch 1).

use kernels::{cpu_space, dense_space, spmm, synthetic, FormatSignature, ParamPoint, Pattern};
use std::time::Instant;

/// As in the tool's binaries: large buffers on 64-byte lines (`kernels::LineAligned`).
#[global_allocator]
static ALLOCATOR: kernels::LineAligned = kernels::LineAligned;

const CALLS: usize = 200;
const ROUNDS: usize = 15;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (rows, cols) = (
        a.first().copied().unwrap_or(3072),
        a.get(1).copied().unwrap_or(768),
    );
    let n = a.get(2).copied().unwrap_or(1);
    let x = kernels::random_values(cols * n, 2);
    let mut y = vec![0f32; rows * n];
    let dense_sig = FormatSignature::for_pattern(&Pattern::Dense, rows, cols)?;
    let dense = synthetic(&dense_sig, 1)?;
    println!("{rows}x{cols}, n = {n}, cpu {}", kernels::cpu_fingerprint());
    println!(
        "{:<36} {:>9} {:>9} {:>8}",
        "format", "sparse_us", "dense_us", "speedup"
    );
    for pattern in [
        Pattern::Nm { n: 2, m: 4 },
        Pattern::Nm { n: 2, m: 8 },
        Pattern::Nm { n: 2, m: 16 },
        Pattern::Vnm { v: 64, m: 8 },
        Pattern::Vnm { v: 64, m: 16 },
        Pattern::Unstructured { sparsity: 0.75 },
        Pattern::Unstructured { sparsity: 0.875 },
        Pattern::Vector {
            v: 64,
            sparsity: 0.75,
        },
    ] {
        let sig = FormatSignature::for_pattern(&pattern, rows, cols)?;
        let sparse = synthetic(&sig, 1)?;
        // Per thread count the cost model's best point (what evaluate runs at a batch no tuning
        // guides), and every dense point.
        let mut points = cpu_space(&sig, n).points();
        let cost = |p: &ParamPoint| kernels::predicted_cost(&sig, n, p);
        points.sort_by(|p, q| cost(p).total_cmp(&cost(q)));
        let mut runs: Vec<(&kernels::SparseMatrix, ParamPoint, bool)> = vec![];
        for p in points {
            if !runs
                .iter()
                .any(|(_, q, _)| q.0.get("threads") == p.0.get("threads"))
            {
                runs.push((&sparse, p, true));
            }
        }
        for p in dense_space(rows, cols, n).points() {
            runs.push((&dense, p, false));
        }
        let mut times = vec![vec![]; runs.len()];
        for round in 0..=ROUNDS {
            for (i, (m, p, _)) in runs.iter().enumerate() {
                let t = Instant::now();
                for _ in 0..CALLS {
                    spmm(m, &x, n, &mut y, p)?;
                }
                // Round 0 warms up.
                if round > 0 {
                    times[i].push(t.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
                }
            }
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (mut best_sparse, mut best_dense) = (f64::INFINITY, f64::INFINITY);
        for ((_, _, is_sparse), t) in runs.iter().zip(&mut times) {
            let m = median(t);
            if *is_sparse {
                best_sparse = best_sparse.min(m);
            } else {
                best_dense = best_dense.min(m);
            }
        }
        println!(
            "{:<36} {best_sparse:>9.1} {best_dense:>9.1} {:>7.2}x",
            format!("{pattern:?}"),
            best_dense / best_sparse
        );
    }
    Ok(())
}
