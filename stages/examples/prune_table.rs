//! Reproduces the accuracy figures of issue 3 on the shipped digits: a 64-256-256-10 MLP trained
//! as in `experiments/quickstart` (40 epochs, batch 64, AdamW lr 1e-3, seed 7), then every
//! pattern × method × sparsity pruned one-shot (and a few gradually) with 10 fine-tune epochs.
//! Prints training throughput and a table: accuracy right after pruning (no fine-tune), after
//! fine-tuning, achieved sparsity and retained L1.
//!
//! `cargo run --release -p stages --example prune_table` (optionally `-- quick` for fewer rows).

use std::time::Instant;

use datasets::{load, DatasetSpec};
use kernels::Pattern;
use stages::{prune, train, Method, ModelSpec, Optimizer, PruneSpec, Schedule, TrainSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    stages::tune_malloc();
    let quick = std::env::args().any(|a| a == "quick");
    let data = load(&DatasetSpec::Digits {
        test_fraction: 0.2,
        split_seed: 0,
    })?;
    let model = ModelSpec::Mlp {
        hidden: vec![256, 256],
    };
    let spec = TrainSpec {
        epochs: 40,
        batch_size: 64,
        lr: 1e-3,
        optimizer: Optimizer::Adamw,
        weight_decay: 0.0,
    };
    let trained = train(&data, &model, &spec, 7)?;
    let m = &trained.metrics;
    println!(
        "dense 64-256-256-10: test accuracy {:.4}, final train loss {:.5}, {:.0} samples/s ({} train samples x {} epochs in {:.2} s), digest {}",
        m.test_accuracy,
        m.final_train_loss,
        m.samples_per_s,
        data.n_train(),
        spec.epochs,
        m.train_seconds,
        trained.weights.digest()
    );

    let obs = Method::Obs {
        grads: 256,
        block: 64,
        damp: 1e-2,
    };
    let mut rows: Vec<(Pattern, Schedule)> = Vec::new();
    for s in [0.5, 0.75, 0.875] {
        rows.push((Pattern::Unstructured { sparsity: s }, Schedule::Oneshot));
    }
    for m in [4, 8, 16] {
        rows.push((Pattern::Nm { n: 2, m }, Schedule::Oneshot));
    }
    for (v, m) in [(64, 8), (16, 8), (64, 16)] {
        rows.push((Pattern::Vnm { v, m }, Schedule::Oneshot));
    }
    rows.push((
        Pattern::Vector {
            v: 16,
            sparsity: 0.75,
        },
        Schedule::Oneshot,
    ));
    rows.push((
        Pattern::Unstructured { sparsity: 0.875 },
        Schedule::Gradual { steps: 4 },
    ));
    rows.push((Pattern::Nm { n: 2, m: 8 }, Schedule::Gradual { steps: 4 }));
    if quick {
        rows.retain(|(p, s)| *s == Schedule::Oneshot && (1.0 - p.density() - 0.75).abs() < 1e-9);
    }

    println!();
    println!("| pattern | schedule | method | sparsity | acc. after prune | acc. after fine-tune | Δ vs dense | retained L1 | seconds |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (pattern, schedule) in rows {
        for method in [Method::Magnitude, obs.clone()] {
            let sparse = pattern != Pattern::Dense;
            let spec = PruneSpec {
                pattern: pattern.clone(),
                method: sparse.then(|| method.clone()),
                schedule: sparse.then(|| schedule.clone()),
                finetune_epochs: 10,
                finetune_lr: 1e-3,
                batch_size: 64,
                optimizer: Optimizer::Adamw,
                keep_dense: None,
                layer_patterns: vec![],
            };
            let start = Instant::now();
            let p = prune(&data, &trained.weights, &spec, 7)?;
            let kept_dense: Vec<&str> = p
                .layers
                .iter()
                .filter(|l| matches!(l.status, stages::LayerStatus::KeptDense { .. }))
                .map(|l| l.name.as_str())
                .collect();
            println!(
                "| {pattern}{} | {} | {} | {:.4} | {:.4} | {:.4} | {:+.4} | {:.4} | {:.2} |",
                if kept_dense.is_empty() {
                    String::new()
                } else {
                    format!(" ({} dense)", kept_dense.join(","))
                },
                match schedule {
                    Schedule::Oneshot => "oneshot".to_string(),
                    Schedule::Gradual { steps } => format!("gradual({steps})"),
                },
                method.kind(),
                p.sparsity,
                p.accuracy_after_prune,
                p.accuracy_after_finetune,
                p.accuracy_after_finetune - m.test_accuracy,
                p.retained_l1,
                start.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}
