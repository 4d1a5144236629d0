//! A few columns (n = 2..48) in every sparse format against dense, at one thread count: for each
//! n the sparse format's cost-model point and every dense point, timed in interleaved rounds
//! (blocks of calls of ~1 ms, 11 rounds), medians compared. Products of up to
//! `MAX_COLUMNS` (32) columns run the panel kernels across rows; `COTUNE_PANEL_COLUMNS=1` in
//! the environment sends them to the tile kernels instead, for comparison (run both, in
//! alternation).
//!
//! `cargo run --release -p kernels --example few_columns [-- ROWS COLS THREADS [N...]]`

use kernels::{cpu_space, dense_space, spmm, synthetic, FormatSignature, ParamPoint, Pattern};
use std::time::Instant;

/// As in the tool's binaries: large buffers on 64-byte lines (`kernels::LineAligned`).
#[global_allocator]
static ALLOCATOR: kernels::LineAligned = kernels::LineAligned;

const ROUNDS: usize = 11;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (rows, cols, threads) = (
        a.first().copied().unwrap_or(192),
        a.get(1).copied().unwrap_or(768),
        a.get(2).copied().unwrap_or(1) as i64,
    );
    let ns: Vec<usize> = match a.get(3..) {
        Some(rest) if !rest.is_empty() => rest.to_vec(),
        _ => vec![2, 4, 8, 17, 24, 32, 48],
    };
    let panel = std::env::var("COTUNE_PANEL_COLUMNS").unwrap_or_else(|_| "default".into());
    println!(
        "{rows}x{cols}, {threads} thread(s), cpu {}, COTUNE_PANEL_COLUMNS={panel}",
        kernels::cpu_fingerprint()
    );
    let patterns = [
        Pattern::Nm { n: 2, m: 4 },
        Pattern::Nm { n: 2, m: 8 },
        Pattern::Vnm { v: 64, m: 8 },
        Pattern::Vnm { v: 64, m: 16 },
        Pattern::Unstructured { sparsity: 0.75 },
    ];
    print!("{:<8}", "n");
    for p in &patterns {
        print!(" {:>14}", short(p));
    }
    println!("   dense_us");
    let dense_sig = FormatSignature::for_pattern(&Pattern::Dense, rows, cols)?;
    let dense = synthetic(&dense_sig, 1)?;
    let sparse: Vec<_> = patterns
        .iter()
        .map(|p| synthetic(&FormatSignature::for_pattern(p, rows, cols).unwrap(), 1))
        .collect::<Result<_, _>>()?;
    for &n in &ns {
        let x = kernels::random_values(cols * n, 2);
        let mut y = vec![0f32; rows * n];
        let with_threads = |p: &ParamPoint| p.0.get("threads") == Some(&threads);
        let mut runs: Vec<(&kernels::SparseMatrix, ParamPoint)> = vec![];
        for m in &sparse {
            let sig = m.signature();
            let cost = |p: &ParamPoint| kernels::predicted_cost(&sig, n, p);
            let best = cpu_space(&sig, n)
                .points()
                .into_iter()
                .filter(with_threads)
                .min_by(|p, q| cost(p).total_cmp(&cost(q)))
                .ok_or("no point")?;
            runs.push((m, best));
        }
        let dense_points: Vec<_> = dense_space(rows, cols, n)
            .points()
            .into_iter()
            .filter(with_threads)
            .collect();
        for p in dense_points {
            runs.push((&dense, p));
        }
        // Calls per block: about a millisecond of the dense product.
        let t = Instant::now();
        spmm(&dense, &x, n, &mut y, &runs[patterns.len()].1)?;
        let calls = (1e-3 / t.elapsed().as_secs_f64().max(1e-7)).clamp(10.0, 2000.0) as usize;
        let mut times = vec![vec![]; runs.len()];
        for round in 0..=ROUNDS {
            for (i, (m, p)) in runs.iter().enumerate() {
                let t = Instant::now();
                for _ in 0..calls {
                    spmm(m, &x, n, &mut y, p)?;
                }
                if round > 0 {
                    times[i].push(t.elapsed().as_secs_f64() * 1e6 / calls as f64);
                }
            }
        }
        let med: Vec<f64> = times
            .iter_mut()
            .map(|v| {
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            })
            .collect();
        let dense_us = med[patterns.len()..]
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        print!("{n:<8}");
        for s in &med[..patterns.len()] {
            print!(" {:>13.2}x", dense_us / s);
        }
        println!("   {dense_us:>8.1}");
    }
    Ok(())
}

fn short(p: &Pattern) -> String {
    match p {
        Pattern::Nm { n, m } => format!("{n}:{m}"),
        Pattern::Vnm { v, m } => format!("{v}:2:{m}"),
        Pattern::Unstructured { sparsity } => format!("csr {}%", sparsity * 100.0),
        other => format!("{other:?}"),
    }
}
