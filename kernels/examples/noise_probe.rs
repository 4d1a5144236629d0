//! How far a measured ratio between two kernel configurations can be trusted on a shared
//! machine, measured back to back (each point's repeats in a row, the two a second or so
//! apart, as a tuning that walks its space point by point takes them) against interleaved
//! rounds (one call of each per round, as `stages::kernel_tune::rounds` takes them).
//!
//! Runs two points of N:M 2:8 at 768×768×512 on one thread (the cost model's first and sixth),
//! alternating, for `SECONDS` (default 20), and a scalar dependency chain on the same core
//! for comparison; then draws 2,000 estimates of their ratio from the record each way (3
//! samples per point) and prints the 5th, 50th and 95th percentiles.
//!
//! `cargo run --release -p kernels --example noise_probe [-- SECONDS]`

use kernels::{cpu_space, spmm, synthetic, FormatSignature, Pattern};
use rand::{Rng, SeedableRng};
use std::time::Instant;

/// As in the tool's binaries: large buffers on 64-byte lines (`kernels::LineAligned`).
#[global_allocator]
static ALLOCATOR: kernels::LineAligned = kernels::LineAligned;

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentiles(mut v: Vec<f64>) -> [f64; 3] {
    v.sort_by(f64::total_cmp);
    [0.05, 0.5, 0.95].map(|q| v[((v.len() - 1) as f64 * q).round() as usize])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20.0);
    let (rows, cols, n) = (768, 768, 512);
    let sig = FormatSignature::for_pattern(&Pattern::Nm { n: 2, m: 8 }, rows, cols)?;
    let a = synthetic(&sig, 1)?;
    let b = kernels::random_values(cols * n, 2);
    let mut c = vec![0f32; rows * n];
    let mut points: Vec<_> = cpu_space(&sig, n)
        .points()
        .into_iter()
        .filter(|p| p.0.get("threads").is_none_or(|&t| t == 1))
        .collect();
    points.sort_by(|p, q| {
        kernels::predicted_cost(&sig, n, p).total_cmp(&kernels::predicted_cost(&sig, n, q))
    });
    let pair = [&points[0], &points[5.min(points.len() - 1)]];
    let (mut x, mut y, mut chain) = (vec![], vec![], vec![]);
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < seconds {
        for (p, out) in pair.iter().zip([&mut x, &mut y]) {
            let t = Instant::now();
            spmm(&a, &b, n, &mut c, p)?;
            out.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let t = Instant::now();
        let mut v = std::hint::black_box(1.0f64);
        for _ in 0..200_000 {
            v = v * 1.000_000_1 + 1e-9;
        }
        std::hint::black_box(v);
        chain.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let rounds = x.len();
    let per_round_s = seconds / rounds as f64;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let (mut apart, mut interleaved) = (vec![], vec![]);
    for _ in 0..2000 {
        let i = rng.random_range(0..rounds - 3);
        // The second point measured 0.3–2.4 s after the first.
        let gap = rng.random_range((0.3 / per_round_s) as usize..(2.4 / per_round_s) as usize + 1);
        let j = (i + gap).min(rounds - 3);
        apart.push(median(&y[j..j + 3]) / median(&x[i..i + 3]));
        interleaved.push(median(&y[i..i + 3]) / median(&x[i..i + 3]));
    }
    let spread = |v: &[f64]| {
        let [lo, mid, hi] = percentiles(v.to_vec());
        format!("{lo:8.0} {mid:8.0} {hi:8.0}")
    };
    println!("{rounds} rounds over {seconds} s; microseconds per call, 5th/50th/95th percentile");
    println!("point A            {}", spread(&x));
    println!("point B            {}", spread(&y));
    println!("scalar chain       {}", spread(&chain));
    println!("ratio B/A from 3 samples each, 5th/50th/95th percentile of 2,000 draws");
    for (name, v) in [("back to back", apart), ("interleaved", interleaved)] {
        let [lo, mid, hi] = percentiles(v);
        println!("{name:<18} {lo:8.3} {mid:8.3} {hi:8.3}");
    }
    Ok(())
}
