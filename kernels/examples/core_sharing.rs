//! Does this machine give two threads a core each? Times a fixed piece of FMA-bound arithmetic
//! on one thread, then on two threads at once (each doing the same piece), round after round,
//! and prints the ratio: 1.0 when each thread has a core of its own, towards 2.0 when the two
//! share one (SMT siblings on the host, or one vCPU descheduled).
//!
//! On the 2-vCPU KVM guests this project runs on (Zen 4, 2026-12-02) the ratio moved between
//! 0.7 and 1.9 from one round (~0.1 s) to the next, and 2-thread model passes ran 1.7× slower
//! for seconds at a time: read it before trusting a 2-thread timing.
//!
//! `cargo run --release -p kernels --example core_sharing [-- ROUNDS]`

use std::hint::black_box;
use std::time::Instant;

/// About 0.1 s of dependent multiply-adds over 8 × 8 independent lanes.
fn work() -> f32 {
    let mut acc = [[1.0f32; 8]; 8];
    let (mul, add) = (black_box(0.999_9f32), black_box(1e-4f32));
    for _ in 0..20_000_000 {
        for chain in &mut acc {
            for x in chain.iter_mut() {
                *x = *x * mul + add;
            }
        }
    }
    acc.iter().flatten().sum()
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let mut ratios = Vec::with_capacity(rounds);
    println!("round  one thread s  two threads s  ratio");
    for r in 0..rounds {
        let t = Instant::now();
        black_box(work());
        let one = t.elapsed().as_secs_f64();
        let t = Instant::now();
        std::thread::scope(|s| {
            let h = s.spawn(|| black_box(work()));
            black_box(work());
            let _ = h.join();
        });
        let two = t.elapsed().as_secs_f64();
        ratios.push(two / one);
        println!("{r:>5}  {one:>12.3}  {two:>13.3}  {:>5.2}", two / one);
    }
    ratios.sort_by(f64::total_cmp);
    let q = |p: f64| ratios[((ratios.len() - 1) as f64 * p).round() as usize];
    println!(
        "ratio two/one: min {:.2}, median {:.2}, max {:.2} ({} rounds; 1.0 = a core per thread)",
        q(0.0),
        q(0.5),
        q(1.0),
        rounds
    );
}
