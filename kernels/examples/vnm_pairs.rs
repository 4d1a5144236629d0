//! V:N:M's row pairs (`rows = 2`, even V: a column two rows share in a group is loaded once for
//! both) against its row loop (`rows` 1, 3, 4) and dense, in one process: every V:N:M point of
//! one thread is measured once, the 3 fastest of each kind and the dense points are then timed
//! in 15 interleaved rounds, and the medians compared (the VM's speed drifts by 10–30 % between
//! runs, so only ratios taken in the same rounds are compared).
//!
//! `cargo run --release -p kernels --example vnm_pairs [-- ROWS COLS N]` (default 3072 768 512).

use kernels::{cpu_space, dense_space, spmm, synthetic, FormatSignature, ParamPoint, Pattern};
use std::time::Instant;

/// As in the tool's binaries: large buffers on 64-byte lines (`kernels::LineAligned`).
#[global_allocator]
static ALLOCATOR: kernels::LineAligned = kernels::LineAligned;

const ROUNDS: usize = 15;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (rows, cols, n) = (
        a.first().copied().unwrap_or(3072),
        a.get(1).copied().unwrap_or(768),
        a.get(2).copied().unwrap_or(512),
    );
    println!(
        "{rows}x{cols}x{n}, 1 thread, cpu {}",
        kernels::cpu_fingerprint()
    );
    let x = kernels::random_values(cols * n, 2);
    let mut y = vec![0f32; rows * n];
    let one = |p: &ParamPoint| p.0.get("threads") == Some(&1);
    let dense = synthetic(
        &FormatSignature::for_pattern(&Pattern::Dense, rows, cols)?,
        1,
    )?;
    let dense_points: Vec<ParamPoint> = dense_space(rows, cols, n)
        .points()
        .into_iter()
        .filter(one)
        .collect();
    let time = |m: &kernels::SparseMatrix, p: &ParamPoint, y: &mut [f32]| {
        let t = Instant::now();
        spmm(m, &x, n, y, p).map(|_| t.elapsed().as_secs_f64())
    };
    for (v, m) in [(64, 8), (128, 8), (64, 16), (128, 16)] {
        let sig = FormatSignature::for_pattern(&Pattern::Vnm { v, m }, rows, cols)?;
        let sparse = synthetic(&sig, 1)?;
        // One pass over the space (after a warm-up call that builds the derived layouts).
        let mut pairs = vec![];
        let mut row_loop = vec![];
        let points: Vec<ParamPoint> = cpu_space(&sig, n)
            .points()
            .into_iter()
            .filter(one)
            .collect();
        time(&sparse, &points[0], &mut y)?;
        for p in points {
            let t = time(&sparse, &p, &mut y)?;
            if p.0.get("rows") == Some(&2) {
                pairs.push((t, p));
            } else {
                row_loop.push((t, p));
            }
        }
        let mut runs: Vec<(&str, &kernels::SparseMatrix, ParamPoint)> = vec![];
        for (kind, list) in [("pairs", &mut pairs), ("row loop", &mut row_loop)] {
            list.sort_by(|a, b| a.0.total_cmp(&b.0));
            runs.extend(list.iter().take(3).map(|(_, p)| (kind, &sparse, p.clone())));
        }
        runs.extend(dense_points.iter().map(|p| ("dense", &dense, p.clone())));
        let mut times = vec![vec![]; runs.len()];
        for _ in 0..ROUNDS {
            for (i, (_, m, p)) in runs.iter().enumerate() {
                times[i].push(time(m, p, &mut y)?);
            }
        }
        let median = |t: &mut Vec<f64>| {
            t.sort_by(|a, b| a.total_cmp(b));
            t[t.len() / 2]
        };
        let medians: Vec<f64> = times.iter_mut().map(median).collect();
        let best = |kind: &str| {
            runs.iter()
                .zip(&medians)
                .filter(|((k, ..), _)| *k == kind)
                .min_by(|a, b| a.1.total_cmp(b.1))
                .map(|((_, _, p), &t)| (t, p.clone()))
                .ok_or("no point")
        };
        let (d, _) = best("dense")?;
        let (tp, pp) = best("pairs")?;
        let (tr, pr) = best("row loop")?;
        let show = |p: &ParamPoint| {
            p.0.iter()
                .filter(|(k, _)| k.as_str() != "threads")
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        println!(
            "{v}:2:{m}  dense {:7.0} us   pairs {:.2}x ({})   row loop {:.2}x ({})   pairs/row loop {:.2}",
            d * 1e6,
            d / tp,
            show(&pp),
            d / tr,
            show(&pr),
            tr / tp
        );
    }
    Ok(())
}
