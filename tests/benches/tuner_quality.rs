//! Tuner quality on the BERT-base shapes (the kernel-only study of
//! `experiments/spmm-bert-shapes.toml`): one exhaustive tuning per (format, shape) measures the
//! whole space; the `model` strategy with a budget of 10 % of the space would have measured the
//! cost model's top points, so its regret is (best latency among those) / (exhaustive best) − 1,
//! read from the same measurements. Also prints the Spearman correlation of predicted vs
//! measured cost over the whole space. Run: `cargo bench -p e2e --bench tuner_quality`
//! (`-- --quick` for two formats only).

use kernels::{FormatSignature, Pattern};
use stages::kernel_tune::{tune, Strategy, TuneSpec};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let shapes = [(768, 768), (3072, 768), (768, 3072)];
    let mut patterns = vec![Pattern::Vnm { v: 64, m: 8 }, Pattern::Nm { n: 2, m: 8 }];
    if !quick {
        patterns.extend([
            Pattern::Vnm { v: 64, m: 4 },
            Pattern::Vnm { v: 64, m: 16 },
            Pattern::Vnm { v: 128, m: 32 },
            Pattern::Unstructured { sparsity: 0.875 },
            Pattern::Dense,
        ]);
    }
    let n = 512;
    println!(
        "{:<28} {:>11} {:>6} {:>7} {:>9} {:>9}",
        "format", "shape", "space", "budget", "regret%", "spearman"
    );
    let mut regrets = vec![];
    for p in &patterns {
        for &(rows, cols) in &shapes {
            let sig = FormatSignature::for_pattern(p, rows, cols).expect("fits");
            let spec = TuneSpec {
                sig,
                n,
                strategy: Strategy::Exhaustive,
                seconds_per_point: 0.02,
                backend: stages::kernel_tune::Backend::Cpu,
            };
            let t = tune(&spec).expect("tune");
            let budget = t.space_size.div_ceil(10);
            // Over the same kind of measurement as `model_best` (the tuner's choice, re-measured
            // in rounds, may come out slower than some point's first pass).
            let best = t
                .points
                .iter()
                .map(|m| m.timing.median_us)
                .fold(f64::INFINITY, f64::min);
            let model_best = t
                .points
                .iter()
                .filter(|m| m.predicted_rank < budget)
                .map(|m| m.timing.median_us)
                .fold(f64::INFINITY, f64::min);
            let regret = model_best / best - 1.0;
            regrets.push(regret);
            println!(
                "{:<28} {:>11} {:>6} {:>7} {:>9.2} {:>9.3}",
                format!("{p:?}"),
                format!("{rows}x{cols}"),
                t.space_size,
                budget,
                100.0 * regret,
                t.spearman
            );
        }
    }
    let within = regrets.iter().filter(|&&r| r <= 0.05).count();
    println!(
        "model strategy at 10 % budget within 5 % of exhaustive best: {within}/{} cases",
        regrets.len()
    );
}
