//! What a product's fused epilogue costs: each format's cost-model point (and dense's) with no
//! epilogue, bias + ReLU and bias + GELU, timed in interleaved rounds (15 rounds of 20 calls,
//! medians). GELU is the transformer MLP's activation; fused, it is applied as the kernels store
//! C, and a dense product applies it to each thread's rows right after them.
//!
//! `cargo run --release -p kernels --example epilogue_cost [-- ROWS COLS N]`

use kernels::{
    cpu_space, dense_space, predicted_cost, spmm_with, synthetic, Activation, Epilogue,
    FormatSignature, Pattern,
};
use std::time::Instant;

/// As in the tool's binaries: large buffers on 64-byte lines (`kernels::LineAligned`).
#[global_allocator]
static ALLOCATOR: kernels::LineAligned = kernels::LineAligned;

const CALLS: usize = 20;
const ROUNDS: usize = 15;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (rows, cols, n) = (
        a.first().copied().unwrap_or(1024),
        a.get(1).copied().unwrap_or(256),
        a.get(2).copied().unwrap_or(4352),
    );
    let x = kernels::random_values(cols * n, 2);
    let bias = kernels::random_values(rows, 3);
    let mut y = vec![0f32; rows * n];
    println!("{rows}x{cols}, n = {n}, cpu {}", kernels::cpu_fingerprint());
    println!(
        "{:<24} {:>9} {:>9} {:>9}  {:>8} {:>8}",
        "format", "none_us", "relu_us", "gelu_us", "relu/none", "gelu/none"
    );
    for pattern in [
        Pattern::Dense,
        Pattern::Nm { n: 2, m: 8 },
        Pattern::Vnm { v: 64, m: 8 },
        Pattern::Vector {
            v: 64,
            sparsity: 0.75,
        },
    ] {
        let sig = FormatSignature::for_pattern(&pattern, rows, cols)?;
        let m = synthetic(&sig, 1)?;
        let space = match pattern {
            Pattern::Dense => dense_space(rows, cols, n),
            _ => cpu_space(&sig, n),
        };
        // The cost model's best point.
        let p = space
            .points()
            .into_iter()
            .min_by(|a, b| predicted_cost(&sig, n, a).total_cmp(&predicted_cost(&sig, n, b)))
            .ok_or("empty space")?;
        let epilogues =
            [Activation::None, Activation::Relu, Activation::Gelu].map(|activation| Epilogue {
                bias: Some(&bias),
                activation,
            });
        let mut times = vec![vec![]; epilogues.len()];
        for _ in 0..ROUNDS {
            for (e, t) in epilogues.iter().zip(&mut times) {
                let start = Instant::now();
                for _ in 0..CALLS {
                    spmm_with(&m, &x, n, &mut y, &p, *e)?;
                }
                t.push(start.elapsed().as_secs_f64() * 1e6 / CALLS as f64);
            }
        }
        let med: Vec<f64> = times
            .iter_mut()
            .map(|t| {
                t.sort_by(f64::total_cmp);
                t[t.len() / 2]
            })
            .collect();
        println!(
            "{:<24} {:>9.1} {:>9.1} {:>9.1}  {:>8.2} {:>8.2}",
            pattern.to_string(),
            med[0],
            med[1],
            med[2],
            med[1] / med[0],
            med[2] / med[0]
        );
    }
    Ok(())
}
