//! Evaluation runs every pattern's pruned model (an MLP, a CNN through im2col, a transformer on
//! image patches and on runs of features) through the sparse kernels with tuned configs and
//! agrees with the masked dense reference and with candle's forward pass; a model whose packed
//! weights do not fit it is refused.

use datasets::{load, Dataset, DatasetSpec};
use kernels::Pattern;
use stages::evaluate::{evaluate, LayerRun, LayerTuning, TOLERANCE};
use stages::kernel_tune::{tune, Strategy, TuneSpec};
use stages::{prune, train, Method, ModelSpec, PruneSpec, Schedule, TrainSpec, Weights};

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

/// The synthetic data as 1×4×6 images (24 features).
fn images() -> Dataset {
    Dataset {
        image_shape: Some((1, 4, 6)),
        ..data()
    }
}

fn mlp() -> ModelSpec {
    ModelSpec::Mlp {
        hidden: vec![32, 16],
    }
}

/// `model` trained briefly on `data`, pruned to `pattern`, and each layer tuned at 8 samples'
/// columns.
fn model_layers(data: &Dataset, model: &ModelSpec, pattern: &Pattern) -> (Weights, Vec<LayerRun>) {
    let spec = TrainSpec {
        epochs: 2,
        batch_size: 32,
        lr: 1e-2,
        optimizer: Default::default(),
        weight_decay: 0.0,
    };
    let trained = train(data, model, &spec, 5).unwrap();
    let sparse = *pattern != Pattern::Dense;
    let ps = PruneSpec {
        pattern: pattern.clone(),
        method: sparse.then_some(Method::Magnitude),
        schedule: sparse.then_some(Schedule::Oneshot),
        finetune_epochs: 1,
        finetune_lr: 1e-2,
        batch_size: 32,
        optimizer: Default::default(),
        keep_dense: None,
        layer_patterns: vec![],
    };
    let pruned = prune(data, &trained.weights, &ps, 5).unwrap();
    let tokens = pruned.weights.layer_tokens();
    let runs = pruned
        .packed()
        .unwrap()
        .into_iter()
        .zip(&pruned.weights.layers)
        .zip(tokens)
        .map(|(((name, matrix), layer), tokens)| {
            let sig = matrix.signature();
            let t = tune(&TuneSpec {
                sig,
                n: 8 * tokens,
                strategy: Strategy::Model { budget: 2 },
                seconds_per_point: 0.0,
                backend: stages::kernel_tune::Backend::Cpu,
                calibration: None,
            })
            .unwrap();
            LayerRun {
                name,
                matrix,
                bias: layer.bias.clone(),
                tunings: vec![LayerTuning {
                    batch_tokens: 8 * tokens,
                    params: t.best().params.clone(),
                    dense_params: t.dense_best().params.clone(),
                }],
            }
        })
        .collect();
    (pruned.weights, runs)
}

fn patterns() -> Vec<Pattern> {
    vec![
        Pattern::Dense,
        Pattern::Unstructured { sparsity: 0.75 },
        Pattern::Nm { n: 2, m: 4 },
        Pattern::Nm { n: 2, m: 8 },
        Pattern::Vnm { v: 8, m: 8 },
        Pattern::Vector {
            v: 8,
            sparsity: 0.5,
        },
    ]
}

#[test]
fn every_pattern_agrees_with_the_masked_dense_reference() {
    let data = data();
    for pattern in patterns() {
        let (model, l) = model_layers(&data, &mlp(), &pattern);
        let ev = evaluate(&data, &model, &l, &[1, 7, 64], 0.0, false).unwrap();
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
        // The layers' prediction: their speedups weighted by rows × columns (one token each).
        let macs: Vec<f64> = model
            .layers
            .iter()
            .map(|l| (l.rows() * l.cols()) as f64)
            .collect();
        assert_eq!(ev.layer_macs, macs);
        for b in &ev.latencies {
            let want = macs.iter().sum::<f64>()
                / b.per_layer_speedup
                    .iter()
                    .zip(&macs)
                    .map(|(s, m)| m / s.median)
                    .sum::<f64>();
            assert_eq!(
                ev.layers_speedup(b).to_bits(),
                want.to_bits(),
                "{pattern:?}"
            );
        }
    }
}

/// A CNN (convolutions through im2col, max-pooling) and transformers (attention, norms, GELU
/// around the GEMMs) agree with the masked dense reference under every pattern, and their
/// accuracy is candle's on the same weights.
#[test]
fn cnns_and_transformers_run_end_to_end_through_the_sparse_kernels() {
    let images = images();
    let runs_of_features = data();
    let cnn = ModelSpec::Cnn {
        channels: vec![8, 16],
        hidden: vec![16],
    };
    let vit = ModelSpec::Transformer {
        layers: 2,
        d_model: 16,
        heads: 2,
        d_ff: 32,
        patch: 2,
    };
    let seq = ModelSpec::Transformer {
        layers: 1,
        d_model: 8,
        heads: 4,
        d_ff: 16,
        patch: 3,
    };
    for (data, model) in [(&images, cnn), (&images, vit), (&runs_of_features, seq)] {
        for pattern in patterns() {
            let (weights, l) = model_layers(data, &model, &pattern);
            let ev = evaluate(data, &weights, &l, &[1, 5], 0.0, false)
                .unwrap_or_else(|e| panic!("{model:?} {pattern:?}: {e}"));
            assert!(
                ev.max_rel_error <= TOLERANCE,
                "{model:?} {pattern:?}: error {}",
                ev.max_rel_error
            );
            // Same weights in candle: the same predictions (up to a near-tie or two).
            let candle = stages::accuracy(data, &weights).unwrap();
            let one = 1.0 / data.test_y.len() as f64;
            assert!(
                (ev.accuracy - candle).abs() <= 2.0 * one + 1e-12,
                "{model:?} {pattern:?}: {} through the kernels, {candle} in candle",
                ev.accuracy
            );
            for b in &ev.latencies {
                assert_eq!(b.per_layer.len(), l.len());
                assert_eq!(b.per_layer_dense.len(), l.len());
                assert!(b.non_gemm.median_us > 0.0, "{:?}", b.non_gemm);
            }
        }
    }
}

/// With `dense_where_faster`, the sparse layers whose kernel lost to the dense one when timed
/// alone at that batch run dense in the passes, all of them or (the model was faster without)
/// none, and the layers' prediction counts them at 1; the accuracy is the sparse kernels'
/// either way. A dense model runs nothing "dense".
#[test]
fn layers_whose_kernel_lost_to_dense_run_dense_on_request() {
    let data = data();
    for pattern in [
        Pattern::Unstructured { sparsity: 0.75 },
        Pattern::Nm { n: 2, m: 4 },
        Pattern::Dense,
    ] {
        let (model, l) = model_layers(&data, &mlp(), &pattern);
        let off = evaluate(&data, &model, &l, &[1, 8], 0.0, false).unwrap();
        let on = evaluate(&data, &model, &l, &[1, 8], 0.0, true).unwrap();
        assert_eq!(on.layer_names, ["fc0", "fc1", "fc2"]);
        assert_eq!(on.accuracy, off.accuracy);
        assert_eq!(on.max_rel_error, off.max_rel_error);
        assert!(off.latencies.iter().all(|b| b.ran_dense == [false; 3]));
        for b in &on.latencies {
            let lost: Vec<bool> = b
                .per_layer_speedup
                .iter()
                .map(|s| pattern != Pattern::Dense && s.median < 1.0)
                .collect();
            // All the layers that lost alone, or none (the model was faster all sparse).
            assert!(
                b.ran_dense == lost || b.ran_dense == [false; 3],
                "{pattern:?} at batch {}: {:?} {lost:?}",
                b.batch,
                b.ran_dense
            );
            let lost = &b.ran_dense;
            let want = on.layer_macs.iter().sum::<f64>()
                / b.per_layer_speedup
                    .iter()
                    .zip(&on.layer_macs)
                    .zip(lost)
                    .map(|((s, m), &ran)| m / if ran { 1.0 } else { s.median })
                    .sum::<f64>();
            assert_eq!(
                on.layers_speedup(b).to_bits(),
                want.to_bits(),
                "{pattern:?}"
            );
            assert!(b.sparse.median_us > 0.0 && b.speedup.median > 0.0);
        }
    }
}

#[test]
fn a_model_missing_its_classifier_is_refused() {
    let data = data();
    let (model, mut l) = model_layers(&data, &mlp(), &Pattern::Nm { n: 2, m: 4 });
    l.pop();
    let err = evaluate(&data, &model, &l, &[4], 0.0, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not the model's layers"), "{err}");
    let (model, l) = model_layers(&data, &mlp(), &Pattern::Nm { n: 2, m: 4 });
    let five = Dataset {
        n_classes: 5,
        ..data
    };
    let err = evaluate(&five, &model, &l, &[4], 0.0, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("classes"), "{err}");
}
