//! A ViT on the shipped digits, as `experiments/vit-digits.toml` trains it (patches of 2×2,
//! class token, pre-LayerNorm blocks), with its shape and schedule from the command line:
//! dense test accuracy, training time, then magnitude pruning one-shot to 2:8 and 64:2:8 with
//! fine-tuning.
//!
//! `cargo run --release -p stages --example vit_digits -- LAYERS D_MODEL HEADS D_FF PATCH EPOCHS LR WEIGHT_DECAY`

use datasets::{load, DatasetSpec};
use kernels::Pattern;
use stages::{prune, train, Method, ModelSpec, Optimizer, PruneSpec, Schedule, TrainSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    stages::tune_malloc();
    let a: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: f64| a.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let data = load(&DatasetSpec::Digits {
        test_fraction: 0.2,
        split_seed: 7,
    })?;
    let model = ModelSpec::Transformer {
        layers: num(0, 2.0) as usize,
        d_model: num(1, 64.0) as usize,
        heads: num(2, 4.0) as usize,
        d_ff: num(3, 128.0) as usize,
        patch: num(4, 2.0) as usize,
    };
    let spec = TrainSpec {
        epochs: num(5, 60.0) as usize,
        batch_size: 32,
        lr: num(6, 1e-3),
        optimizer: Optimizer::Adamw,
        weight_decay: num(7, 0.0),
    };
    let trained = train(&data, &model, &spec, 7)?;
    let m = &trained.metrics;
    println!(
        "{model:?}: dense test accuracy {:.4}, final loss {:.4}, {:.1} s",
        m.test_accuracy, m.final_train_loss, m.train_seconds
    );
    for pattern in [Pattern::Nm { n: 2, m: 8 }, Pattern::Vnm { v: 64, m: 8 }] {
        let p = prune(
            &data,
            &trained.weights,
            &PruneSpec {
                pattern: pattern.clone(),
                method: Some(Method::Magnitude),
                schedule: Some(Schedule::Oneshot),
                finetune_epochs: 10,
                finetune_lr: spec.lr,
                batch_size: spec.batch_size,
                optimizer: spec.optimizer,
                keep_dense: None,
                layer_patterns: vec![],
            },
            7,
        )?;
        println!(
            "{pattern:?}: after prune {:.4}, after fine-tune {:.4}, sparsity {:.3}",
            p.accuracy_after_prune, p.accuracy_after_finetune, p.sparsity
        );
    }
    Ok(())
}
