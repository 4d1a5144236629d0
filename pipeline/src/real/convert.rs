//! Conversions from the engine's trials to the stage crates' configs.

use crate::experiment::schema::{
    DatasetSource, Method, ModelKind, Optimizer, PatternKind, Schedule,
};
use crate::trial::{DatasetTrial, ModelTrial, PatternTrial, PruneTrial, TrainTrial};

/// The kernels' pattern of a trial pattern.
pub fn pattern(p: &PatternTrial) -> kernels::Pattern {
    let (n, m) = p.nm.unwrap_or((2, 4));
    let v = p.v.unwrap_or(1) as usize;
    let s = p.sparsity.unwrap_or(0.0);
    match p.kind {
        PatternKind::Dense => kernels::Pattern::Dense,
        PatternKind::Unstructured => kernels::Pattern::Unstructured { sparsity: s },
        PatternKind::Nm => kernels::Pattern::Nm {
            n: n as usize,
            m: m as usize,
        },
        PatternKind::Vnm => kernels::Pattern::Vnm { v, m: m as usize },
        PatternKind::Vector => kernels::Pattern::Vector { v, sparsity: s },
    }
}

/// The loader spec of a dataset trial (paths already resolved).
pub fn dataset_spec(d: &DatasetTrial) -> datasets::DatasetSpec {
    use datasets::DatasetSpec as D;
    let (test_fraction, split_seed) = (d.test_fraction, d.seed);
    match d.source {
        DatasetSource::Digits => D::Digits {
            test_fraction,
            split_seed,
        },
        DatasetSource::Synthetic => {
            let (n_samples, n_features, n_classes) = d.synthetic.unwrap_or((0, 0, 0));
            D::Synthetic {
                n_samples: n_samples as usize,
                n_features: n_features as usize,
                n_classes: n_classes as usize,
                seed: d.seed,
                test_fraction,
                split_seed,
            }
        }
        DatasetSource::Idx => D::Idx {
            images: d.paths[0].clone(),
            labels: d.paths[1].clone(),
            test_images: d.paths.get(2).cloned(),
            test_labels: d.paths.get(3).cloned(),
            n_classes: None,
            test_fraction,
            split_seed,
        },
        DatasetSource::Parquet | DatasetSource::Csv => {
            let table = datasets::TableSpec {
                test_fraction,
                split_seed,
                ..datasets::TableSpec::new(&d.paths[0], d.label.clone().unwrap_or_default())
            };
            if d.source == DatasetSource::Parquet {
                D::Parquet(table)
            } else {
                D::Csv(table)
            }
        }
    }
}

/// The stages' model spec.
pub fn model_spec(m: &ModelTrial) -> stages::ModelSpec {
    let hidden = m.hidden.iter().map(|&h| h as usize).collect();
    match m.kind {
        ModelKind::Mlp => stages::ModelSpec::Mlp { hidden },
        ModelKind::Cnn => stages::ModelSpec::Cnn {
            channels: m.channels.iter().map(|&c| c as usize).collect(),
            hidden,
        },
    }
}

fn optimizer(o: Optimizer) -> stages::Optimizer {
    match o {
        Optimizer::Adamw => stages::Optimizer::Adamw,
        Optimizer::Sgd => stages::Optimizer::Sgd,
    }
}

/// The stages' train spec.
pub fn train_spec(t: &TrainTrial) -> stages::TrainSpec {
    stages::TrainSpec {
        epochs: t.epochs as usize,
        batch_size: t.batch_size as usize,
        lr: t.lr,
        optimizer: optimizer(t.optimizer),
        weight_decay: t.weight_decay,
    }
}

/// The stages' prune spec (fine-tuning batch size and optimiser follow the training).
pub fn prune_spec(p: &PruneTrial, t: &TrainTrial) -> stages::PruneSpec {
    let method = match (p.method, &p.obs) {
        (Some(Method::Obs), Some(o)) => stages::Method::Obs {
            grads: o.gradients as usize,
            block: o.block as usize,
            damp: o.damp,
        },
        _ => stages::Method::Magnitude,
    };
    let schedule = match p.schedule {
        Some(Schedule::Gradual) => stages::Schedule::Gradual {
            steps: p.gradual_steps.unwrap_or(4) as usize,
        },
        _ => stages::Schedule::Oneshot,
    };
    stages::PruneSpec {
        pattern: pattern(&p.pattern),
        method,
        schedule,
        finetune_epochs: p.finetune_epochs as usize,
        finetune_lr: p.finetune_lr,
        batch_size: t.batch_size as usize,
        optimizer: optimizer(t.optimizer),
    }
}
