//! The one-shot methods on the quickstart's model: the shipped digits, a 64-256-256-10 MLP
//! trained as `experiments/quickstart.toml` trains it (40 epochs, batch 64, AdamW lr 1e-3, seed
//! and split seed 7), pruned one-shot to 2:8, 64:2:8 and unstructured 87.5 % by magnitude, OBS,
//! SparseGPT and Wanda with the experiment file's defaults (512 calibration samples,
//! sequential; SparseGPT dampening 0.01, block 128, unstructured per layer; Wanda per row). Prints a table: accuracy right after
//! pruning (no fine-tuning), after 10 fine-tune epochs, and each pruned layer's relative output
//! error on the calibration inputs.
//!
//! `cargo run --release -p stages --example oneshot_table`

use datasets::{load, DatasetSpec};
use kernels::Pattern;
use stages::{
    prune, train, Calibration, CalibrationInputs, Method, ModelSpec, Optimizer, PruneSpec,
    Schedule, Scope, TrainSpec,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    stages::tune_malloc();
    let data = load(&DatasetSpec::Digits {
        test_fraction: 0.2,
        split_seed: 7,
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
    println!(
        "dense 64-256-256-10: test accuracy {:.4}",
        trained.metrics.test_accuracy
    );
    let calibration = Calibration {
        samples: stages::prune::ONE_SHOT_DEFAULTS.0,
        inputs: CalibrationInputs::Sequential,
    };
    let methods = [
        Method::Magnitude,
        Method::Obs {
            grads: 256,
            block: 64,
            damp: 1e-2,
        },
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
    ];
    let patterns = [
        Pattern::Nm { n: 2, m: 8 },
        Pattern::Vnm { v: 64, m: 8 },
        Pattern::Unstructured { sparsity: 0.875 },
    ];
    println!("| pattern | method | acc. after prune | acc. after 10 fine-tune epochs | output error per layer (fc0, fc1, fc2) | seconds |");
    println!("|---|---|---|---|---|---|");
    for pattern in &patterns {
        for method in &methods {
            let spec = |epochs| PruneSpec {
                pattern: pattern.clone(),
                method: Some(method.clone()),
                schedule: Some(Schedule::Oneshot),
                finetune_epochs: epochs,
                finetune_lr: 1e-3,
                batch_size: 64,
                optimizer: Optimizer::Adamw,
                keep_dense: None,
                layer_patterns: vec![],
            };
            let t0 = std::time::Instant::now();
            let one = prune(&data, &trained.weights, &spec(0), 7)?;
            let seconds = t0.elapsed().as_secs_f64();
            let tuned = prune(&data, &trained.weights, &spec(10), 7)?;
            let errors: Vec<String> = one
                .layers
                .iter()
                .map(|l| match l.output_error_after {
                    Some(e) => format!("{e:.3}"),
                    None => "dense".into(),
                })
                .collect();
            println!(
                "| {pattern} | {} | {:.4} | {:.4} | {} | {seconds:.2} |",
                method.kind(),
                one.accuracy_after_prune,
                tuned.accuracy_after_finetune,
                errors.join(", ")
            );
        }
    }
    Ok(())
}
