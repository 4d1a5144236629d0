//! How long SparseGPT and Wanda take on one BERT-sized layer: a 768×3072 weight (K = 3072, so
//! a 3072×3072 Hessian) with 256 calibration inputs, per pattern, on one core (the solves and
//! products run sequentially). Random weights and inputs; each time is the best of 3.
//!
//! `cargo run --release -p stages --example sparsegpt_speed`

use kernels::Pattern;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use stages::prune::{output_error, prune_layer, LayerInputs};
use stages::{Calibration, CalibrationInputs, Layer, LayerKind, Method, Scope};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (rows, cols, tokens) = (768, 3072, 256);
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let layer = Layer {
        name: "up".into(),
        kind: LayerKind::Linear,
        shape: vec![rows, cols],
        weight: (0..rows * cols)
            .map(|_| rng.random_range(-0.05..0.05))
            .collect(),
        bias: vec![0.0; rows],
    };
    let x = LayerInputs {
        p: (0..tokens * cols)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect(),
        tokens,
        cols,
    };
    let calibration = Calibration {
        samples: tokens,
        inputs: CalibrationInputs::Sequential,
    };
    let patterns = [
        Pattern::Unstructured { sparsity: 0.5 },
        Pattern::Unstructured { sparsity: 0.875 },
        Pattern::Nm { n: 2, m: 4 },
        Pattern::Nm { n: 2, m: 8 },
        Pattern::Vnm { v: 64, m: 8 },
        Pattern::Vnm { v: 128, m: 16 },
        Pattern::Vector {
            v: 64,
            sparsity: 0.75,
        },
    ];
    println!("768x3072 layer, {tokens} calibration inputs, one core");
    println!("| pattern | sparsegpt s | sparsegpt output error | wanda s | wanda output error |");
    println!("|---|---|---|---|---|");
    for pattern in &patterns {
        let mut cells = vec![];
        for method in [
            Method::SparseGpt {
                calibration,
                damp: 1e-2,
                block: 128,
                scope: Scope::Layer,
            },
            Method::Wanda {
                calibration,
                scope: Scope::Row,
            },
        ] {
            let mut best = f64::INFINITY;
            let mut error = 0.0;
            for _ in 0..3 {
                let mut l = layer.clone();
                let t0 = std::time::Instant::now();
                prune_layer(&mut l, &x, pattern, &method)?;
                best = best.min(t0.elapsed().as_secs_f64());
                error = output_error(&layer.weight, &l.weight, rows, &x);
            }
            cells.push(format!("{best:.2} | {error:.3}"));
        }
        println!("| {pattern} | {} |", cells.join(" | "));
    }
    Ok(())
}
