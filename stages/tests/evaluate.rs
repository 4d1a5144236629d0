//! Evaluation runs every pattern's pruned model through the sparse kernels with tuned configs
//! and agrees with the masked dense reference; a model whose packed weights disagree with its
//! reference is refused.

use datasets::{load, Dataset, DatasetSpec};
use kernels::Pattern;
use stages::evaluate::{evaluate, LayerRun, LayerTuning, TOLERANCE};
use stages::kernel_tune::{tune, Strategy, TuneSpec};
use stages::{prune, train, Method, ModelSpec, PruneSpec, Schedule, TrainSpec};

fn data() -> Dataset {
    load(&DatasetSpec::Synthetic {
        n_samples: 200,
        n_features: 24,
        n_classes: 4,
        seed: 1,
        test_fraction: 0.3,
        split_seed: 0,
    })
    .unwrap()
}

fn layers(data: &Dataset, pattern: &Pattern) -> Vec<LayerRun> {
    let spec = TrainSpec {
        epochs: 2,
        batch_size: 32,
        lr: 1e-2,
        optimizer: Default::default(),
        weight_decay: 0.0,
    };
    let trained = train(
        data,
        &ModelSpec::Mlp {
            hidden: vec![32, 16],
        },
        &spec,
        5,
    )
    .unwrap();
    let sparse = *pattern != Pattern::Dense;
    let ps = PruneSpec {
        pattern: pattern.clone(),
        method: sparse.then_some(Method::Magnitude),
        schedule: sparse.then_some(Schedule::Oneshot),
        finetune_epochs: 1,
        finetune_lr: 1e-2,
        batch_size: 32,
        optimizer: Default::default(),
    };
    let pruned = prune(data, &trained.weights, &ps, 5).unwrap();
    pruned
        .packed()
        .unwrap()
        .into_iter()
        .zip(&pruned.weights.layers)
        .map(|((name, matrix), layer)| {
            let sig = matrix.signature();
            let t = tune(&TuneSpec {
                sig,
                n: 8,
                strategy: Strategy::Model { budget: 2 },
                seconds_per_point: 0.0,
                backend: stages::kernel_tune::Backend::Cpu,
            })
            .unwrap();
            LayerRun {
                name,
                matrix,
                bias: layer.bias.clone(),
                tunings: vec![LayerTuning {
                    batch_tokens: 8,
                    params: t.best().params.clone(),
                    dense_params: t.dense_best().params.clone(),
                }],
            }
        })
        .collect()
}

#[test]
fn every_pattern_agrees_with_the_masked_dense_reference() {
    let data = data();
    for pattern in [
        Pattern::Dense,
        Pattern::Unstructured { sparsity: 0.75 },
        Pattern::Nm { n: 2, m: 4 },
        Pattern::Nm { n: 2, m: 8 },
        Pattern::Vnm { v: 8, m: 8 },
        Pattern::Vector {
            v: 8,
            sparsity: 0.5,
        },
    ] {
        let l = layers(&data, &pattern);
        let ev = evaluate(&data, &l, &[1, 7, 64], 0.0).unwrap();
        assert!(
            ev.max_rel_error <= TOLERANCE,
            "{pattern:?}: error {}",
            ev.max_rel_error
        );
        assert!((0.0..=1.0).contains(&ev.accuracy));
        assert_eq!(ev.latencies.len(), 3);
        assert!(ev
            .latencies
            .iter()
            .all(|b| b.sparse.median_us > 0.0 && b.dense.median_us > 0.0));
        if pattern != Pattern::Dense {
            assert!(
                ev.weight_bytes < ev.dense_weight_bytes,
                "{pattern:?} packs smaller than dense"
            );
        }
    }
}

#[test]
fn a_model_missing_its_classifier_is_refused() {
    let data = data();
    let mut l = layers(&data, &Pattern::Nm { n: 2, m: 4 });
    l.pop();
    let err = evaluate(&data, &l, &[4], 0.0).unwrap_err().to_string();
    assert!(err.contains("classes"), "{err}");
}
