//! What a thread hand-off costs: one V:N:M 64:2:8 SpMM at one point (row pairs, the widest tile
//! of up to 64 columns, B read in place) on 1 and 2 threads, timed back to back (as kernel tuning
//! times it) and with a stretch of single-threaded work between calls (as a model pass runs it,
//! between its layers). The hand-off is what 2 threads take beyond half of 1 thread's time: the
//! cost model's `pool_call_s`.
//!
//! `cargo run --release -p kernels --example handoff_cost [-- GAP_US [ROWSxCOLSxN ...]]`

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

/// Median microseconds of `calls` products, each after `gap` µs of single-threaded work.
fn median_us(calls: usize, gap: f64, mut f: impl FnMut()) -> f64 {
    let mut t: Vec<f64> = (0..calls)
        .map(|_| {
            busy(gap);
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if kernels::available_cores() < 2 {
        println!("one core: there is no second thread to hand off to");
        return Ok(());
    }
    let mut args = std::env::args().skip(1);
    let gap: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(200.0);
    let mut shapes: Vec<(usize, usize, usize)> = args
        .filter_map(|s| {
            let d: Vec<usize> = s.split('x').filter_map(|x| x.parse().ok()).collect();
            (d.len() == 3).then(|| (d[0], d[1], d[2]))
        })
        .collect();
    if shapes.is_empty() {
        shapes = vec![
            (128, 64, 16),
            (256, 64, 64),
            (1024, 64, 64),
            (256, 64, 256),
            (256, 256, 256),
            (1024, 256, 64),
        ];
    }
    println!("V:N:M 64:2:8, rows 2, widest tile_n <= 64, B in place; median us; gap {gap} us");
    println!(
        "{:<14} {:>8} {:>8} {:>9} {:>8} {:>8} {:>9}",
        "shape", "t1", "t2", "hand-off", "t1 gap", "t2 gap", "hand-off"
    );
    for (rows, cols, n) in shapes {
        let sig = FormatSignature::for_pattern(&Pattern::Vnm { v: 64, m: 8 }, rows, cols)?;
        let a = synthetic(&sig, 1)?;
        let b = kernels::random_values(cols * n, 2);
        let mut c = vec![0f32; rows * n];
        // Row pairs, B in place, all of K, the widest tile up to 64 columns the space offers
        // at this thread count (AVX2's accumulators allow fewer than AVX-512's).
        let space = cpu_space(&sig, n).points();
        let point = |threads: i64| -> ParamPoint {
            let fits = |p: &&ParamPoint| {
                let v = |k: &str| p.0.get(k).copied();
                v("threads") == Some(threads)
                    && v("rows").is_none_or(|r| r == 2)
                    && v("pack_b") == Some(0)
                    && v("k_chunk") == Some(0)
                    && v("tile_n").is_some_and(|w| w <= 64)
            };
            space
                .iter()
                .filter(fits)
                .max_by_key(|p| p.0.get("tile_n").copied())
                .or_else(|| space.iter().find(|p| p.0.get("threads") == Some(&threads)))
                .cloned()
                .expect("a point at this thread count")
        };
        let mut cells = vec![];
        for g in [0.0, gap] {
            // Fewer calls after a gap: each costs the gap too.
            let calls = if g > 0.0 { 300 } else { 2000 };
            let mut run = |threads| {
                let p = point(threads);
                median_us(calls, g, || {
                    spmm(&a, &b, n, &mut c, &p).expect("a point of the space");
                })
            };
            let (t1, t2) = (run(1), run(2));
            cells.extend([t1, t2, t2 - t1 / 2.0]);
        }
        println!(
            "{:<14} {:>8.1} {:>8.1} {:>9.1} {:>8.1} {:>8.1} {:>9.1}",
            format!("{rows}x{cols}x{n}"),
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            cells[4],
            cells[5]
        );
    }
    Ok(())
}
