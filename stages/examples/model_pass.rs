//! One forward pass through the CPU kernels, timed end to end, in its GEMMs and outside them,
//! for the dense model and 2:8, 64:2:8 and 64×1 vector-wise prunings of the same weights: a
//! benchmark of `stages::evaluate` at batch 1 and 256, with each layer's kernel chosen by the
//! cost model (no tuning run). By default the ViT of `experiments/vit-digits.toml` (2 blocks,
//! d_model 64, 4 heads, d_ff 128, 17 tokens); `mlp H1 H2 ...` runs the quickstart's MLP
//! shape instead (64 inputs, those hidden widths, 10 classes).
//!
//! `kernels_x` is what the layers' own speedups predict for the pass: the FLOP-weighted
//! harmonic mean of each layer's speedup timed alone on its input of the pass; `of_kernels` is the pass's
//! speedup divided by it (issue 18 asks for ≥ 0.85 at the largest batch). `cut` is how the
//! passes ran: slices run at once × the most samples a slice ran through the model at a time
//! (`1x256`: whole; `2x128`: two slices; `2x32`: two slices in chunks of 32 samples).
//!
//! `cargo run --release -p stages --example model_pass [-- D_MODEL D_FF | mlp 256 256]`

use datasets::Dataset;
use kernels::{build_mask, Mask, Pattern, SparseMatrix};
use stages::evaluate::{evaluate, LayerRun};
use stages::{ModelSpec, Weights};

/// As in the tool's binaries: large buffers on 64-byte lines (`kernels::LineAligned`).
#[global_allocator]
static ALLOCATOR: kernels::LineAligned = kernels::LineAligned;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    stages::tune_malloc();
    let mlp = std::env::args().nth(1).is_some_and(|a| a == "mlp");
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let spec = if mlp {
        ModelSpec::Mlp { hidden: a }
    } else {
        ModelSpec::Transformer {
            layers: 2,
            d_model: a.first().copied().unwrap_or(64),
            heads: 4,
            d_ff: a.get(1).copied().unwrap_or(128),
            patch: 2,
        }
    };
    let w = Weights::init(&spec, 64, Some((1, 8, 8)), 10, 1)?;
    let data = Dataset {
        name: "random".into(),
        n_features: 64,
        n_classes: 10,
        train_x: vec![],
        train_y: vec![],
        test_x: kernels::random_values(64 * 64, 2),
        test_y: vec![0; 64],
        image_shape: Some((1, 8, 8)),
    };
    println!(
        "pattern      batch  e2e_us  gemm_us  non_gemm_us  speedup_vs_dense  kernels_x  of_kernels       cut  dense_kernels"
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
        let mut pruned = w.clone();
        let layers: Vec<LayerRun> = w
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                // Layers the pattern does not fit (the MLP's 10-row head for V = 64) stay dense.
                let fits =
                    kernels::FormatSignature::for_pattern(&pattern, l.rows(), l.cols()).is_ok();
                let p = if w.kept_dense(i).is_some() || !fits {
                    Pattern::Dense
                } else {
                    pattern.clone()
                };
                let scores: Vec<f32> = l.weight.iter().map(|x| x.abs()).collect();
                let mask = match p {
                    Pattern::Dense => Mask::full(l.rows(), l.cols()),
                    _ => build_mask(&p, &scores, l.rows(), l.cols())?,
                };
                pruned.layers[i].weight = mask.apply(&l.weight)?;
                Ok(LayerRun {
                    name: l.name.clone(),
                    matrix: SparseMatrix::from_masked(&p, &l.weight, &mask)?,
                    bias: l.bias.clone(),
                    tunings: vec![],
                })
            })
            .collect::<Result<_, kernels::KernelError>>()?;
        let ev = evaluate(&data, &pruned, &layers, &[1, 256], 1.0, false)?;
        for b in &ev.latencies {
            let gemm = b.sparse.median_us - b.non_gemm.median_us;
            let kernels_x = ev.layers_speedup(b);
            println!(
                "{:<12} {:>5} {:>7.0} {:>8.0} {:>12.0} {:>17.2} {:>10.2} {:>11.2} {:>9}  {:?}",
                pattern.to_string(),
                b.batch,
                b.sparse.median_us,
                gemm,
                b.non_gemm.median_us,
                b.speedup.median,
                kernels_x,
                b.speedup.median / kernels_x,
                format!("{}x{}", b.pass_slices, b.pass_chunk),
                b.dense_kernels
            );
            println!(
                "   each layer alone, µs: sparse {:?} dense {:?}",
                b.per_layer
                    .iter()
                    .map(|t| t.median_us.round())
                    .collect::<Vec<_>>(),
                b.per_layer_dense
                    .iter()
                    .map(|t| t.median_us.round())
                    .collect::<Vec<_>>()
            );
        }
    }
    Ok(())
}
