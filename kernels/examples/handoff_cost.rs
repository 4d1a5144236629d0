//! What a thread hand-off costs inside a model pass: one SpMM timed back to back (as kernel
//! tuning times it) and with a stretch of single-threaded work between calls (as a model pass
//! runs it, between its layers), at 1 and 2 threads.
//!
//! `cargo run --release -p kernels --example handoff_cost [-- ROWS COLS N GAP_US]`

use kernels::{cpu_space, spmm, synthetic, FormatSignature, ParamPoint, Pattern};
use std::time::Instant;

/// As in the tool's binaries: large buffers on 64-byte lines (`kernels::LineAligned`).
#[global_allocator]
static ALLOCATOR: kernels::LineAligned = kernels::LineAligned;

fn busy(us: f64) {
    let t = Instant::now();
    let mut x = 1.0f64;
    while t.elapsed().as_secs_f64() * 1e6 < us {
        x = std::hint::black_box(x * 1.000_001);
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (rows, cols, n, gap) = (
        a.first().copied().unwrap_or(256),
        a.get(1).copied().unwrap_or(256),
        a.get(2).copied().unwrap_or(256),
        a.get(3).copied().unwrap_or(200) as f64,
    );
    let sig = FormatSignature::for_pattern(&Pattern::Vnm { v: 64, m: 8 }, rows, cols)?;
    let m = synthetic(&sig, 1)?;
    let b = kernels::random_values(cols * n, 2);
    let mut c = vec![0f32; rows * n];
    let space = cpu_space(&sig, n);
    let best = |threads: i64| -> ParamPoint {
        space
            .points()
            .into_iter()
            .filter(|p| p.0.get("threads") == Some(&threads))
            .min_by(|p, q| {
                kernels::predicted_cost(&sig, n, p).total_cmp(&kernels::predicted_cost(&sig, n, q))
            })
            .expect("a point")
    };
    println!("{rows}x{cols}x{n} V:N:M 64:2:8, gap {gap} us; median us over 200 calls");
    for threads in [1, 2] {
        let p = best(threads);
        for with_gap in [false, true] {
            let mut t = vec![];
            for _ in 0..200 {
                if with_gap {
                    busy(gap);
                }
                let s = Instant::now();
                spmm(&m, &b, n, &mut c, &p)?;
                t.push(s.elapsed().as_secs_f64() * 1e6);
            }
            t.sort_by(f64::total_cmp);
            println!(
                "threads {threads} {:<14} {:8.1}",
                if with_gap {
                    "after a gap"
                } else {
                    "back to back"
                },
                t[t.len() / 2]
            );
        }
    }
    Ok(())
}
