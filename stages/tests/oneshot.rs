//! SparseGPT and Wanda through `prune` on a trained MLP: every pattern, exact zeros through
//! fine-tuning, per-layer output errors (SparseGPT's below magnitude's), calibration errors.

use datasets::{load, Dataset, DatasetSpec};
use kernels::Pattern;
use stages::{
    prune, train, Calibration, CalibrationInputs, Method, ModelSpec, PruneSpec, Pruned, Schedule,
    Scope, TrainSpec, Weights,
};

fn setup() -> (Dataset, Weights) {
    let data = load(&DatasetSpec::Synthetic {
        n_samples: 400,
        n_features: 32,
        n_classes: 4,
        seed: 5,
        test_fraction: 0.2,
        split_seed: 0,
    })
    .unwrap();
    let spec = TrainSpec {
        epochs: 10,
        batch_size: 32,
        lr: 1e-2,
        optimizer: Default::default(),
        weight_decay: 0.0,
    };
    let model = ModelSpec::Mlp {
        hidden: vec![64, 64],
    };
    (
        data.clone(),
        train(&data, &model, &spec, 1).unwrap().weights,
    )
}

fn calibration(inputs: CalibrationInputs) -> Calibration {
    Calibration {
        samples: 128,
        inputs,
    }
}

fn sparsegpt(inputs: CalibrationInputs) -> Method {
    Method::SparseGpt {
        calibration: calibration(inputs),
        damp: 0.01,
        block: 16,
        scope: Scope::Layer,
    }
}

fn wanda() -> Method {
    Method::Wanda {
        calibration: calibration(CalibrationInputs::Sequential),
        scope: Scope::Row,
    }
}

fn spec(pattern: &Pattern, method: Method, finetune_epochs: usize) -> PruneSpec {
    PruneSpec {
        pattern: pattern.clone(),
        method: Some(method),
        schedule: Some(Schedule::Oneshot),
        finetune_epochs,
        finetune_lr: 1e-3,
        batch_size: 32,
        optimizer: Default::default(),
        keep_dense: None,
        layer_patterns: vec![],
    }
}

fn patterns() -> Vec<Pattern> {
    vec![
        Pattern::Unstructured { sparsity: 0.875 },
        Pattern::Nm { n: 2, m: 8 },
        Pattern::Vnm { v: 16, m: 8 },
        Pattern::Vector {
            v: 16,
            sparsity: 0.75,
        },
    ]
}

fn errors(p: &Pruned) -> Vec<f64> {
    p.layers
        .iter()
        .filter_map(|l| l.output_error_after)
        .collect()
}

#[test]
fn every_pattern_prunes_and_its_zeros_survive_finetuning() {
    let (data, w) = setup();
    for pattern in patterns() {
        for method in [sparsegpt(CalibrationInputs::Sequential), wanda()] {
            let p = prune(&data, &w, &spec(&pattern, method.clone(), 2), 0).unwrap();
            for ((l, m), r) in p.weights.layers.iter().zip(&p.masks).zip(&p.layers) {
                let Some(m) = m else { continue };
                for (x, &k) in l.weight.iter().zip(m.as_slice()) {
                    if !k {
                        assert_eq!(x.to_bits(), 0, "{pattern} {}: {}", method.kind(), l.name);
                    }
                }
                assert!(r.output_error_before.is_some() && r.output_error_after.is_some());
            }
            // The packed formats accept the masks (the constructors check each pattern's
            // structure) and reproduce the weights bit for bit.
            for (name, packed) in p.packed().unwrap() {
                let layer = p.weights.layers.iter().find(|l| l.name == name).unwrap();
                assert_eq!(packed.to_dense(), layer.weight, "{pattern}: {name}");
            }
            let wanda_like = matches!(method, Method::Wanda { .. });
            for r in p.layers.iter().filter(|r| r.output_error_after.is_some()) {
                let (b, a) = (
                    r.output_error_before.unwrap(),
                    r.output_error_after.unwrap(),
                );
                if wanda_like {
                    assert_eq!(a, b, "Wanda does not update weights");
                } else {
                    assert!(
                        a <= b + 1e-9,
                        "{pattern} {}: the update raised the error",
                        r.name
                    );
                }
            }
        }
    }
}

#[test]
fn sparsegpt_leaves_a_lower_output_error_than_magnitude_on_every_layer() {
    let (data, w) = setup();
    for pattern in patterns() {
        let mag = prune(&data, &w, &spec(&pattern, Method::Magnitude, 0), 0).unwrap();
        for inputs in [CalibrationInputs::Sequential, CalibrationInputs::Dense] {
            let sg = prune(&data, &w, &spec(&pattern, sparsegpt(inputs), 0), 0).unwrap();
            let (s, m) = (errors(&sg), errors(&mag));
            assert_eq!(s.len(), m.len());
            for (i, (s, m)) in s.iter().zip(&m).enumerate() {
                assert!(
                    s < m,
                    "{pattern} ({inputs}) layer {i}: sparsegpt {s} vs magnitude {m}"
                );
            }
        }
    }
}

#[test]
fn bad_calibration_is_a_clear_error() {
    let (data, w) = setup();
    let n = data.n_train();
    let mut method = wanda();
    if let Method::Wanda { calibration, .. } = &mut method {
        calibration.samples = n + 1;
    }
    let e = prune(&data, &w, &spec(&Pattern::Nm { n: 2, m: 4 }, method, 0), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("the training split holds {n}")), "{e}");
    let bad = Method::SparseGpt {
        calibration: calibration(CalibrationInputs::Sequential),
        damp: 0.0,
        block: 16,
        scope: Scope::Layer,
    };
    let e = prune(&data, &w, &spec(&Pattern::Nm { n: 2, m: 4 }, bad, 0), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("damp > 0"), "{e}");
}

#[test]
fn one_shot_pruning_is_deterministic() {
    let (data, w) = setup();
    let s = spec(
        &Pattern::Vnm { v: 16, m: 8 },
        sparsegpt(CalibrationInputs::Sequential),
        1,
    );
    let (a, b) = (
        prune(&data, &w, &s, 3).unwrap(),
        prune(&data, &w, &s, 3).unwrap(),
    );
    assert_eq!(a.weights.digest(), b.weights.digest());
}

#[test]
fn convolutions_calibrate_on_their_im2col_patches() {
    let data = load(&DatasetSpec::Digits {
        test_fraction: 0.2,
        split_seed: 0,
    })
    .unwrap();
    let model = ModelSpec::Cnn {
        channels: vec![8, 16],
        hidden: vec![32],
    };
    let spec_t = TrainSpec {
        epochs: 3,
        batch_size: 64,
        lr: 1e-2,
        optimizer: Default::default(),
        weight_decay: 0.0,
    };
    let w = train(&data, &model, &spec_t, 2).unwrap().weights;
    let pattern = Pattern::Vnm { v: 8, m: 8 };
    let mag = prune(&data, &w, &spec(&pattern, Method::Magnitude, 0), 0).unwrap();
    for method in [sparsegpt(CalibrationInputs::Sequential), wanda()] {
        let p = prune(&data, &w, &spec(&pattern, method.clone(), 1), 0).unwrap();
        for (name, packed) in p.packed().unwrap() {
            let layer = p.weights.layers.iter().find(|l| l.name == name).unwrap();
            assert_eq!(packed.to_dense(), layer.weight, "{name}");
        }
        let conv = p.layers.iter().find(|l| l.name == "conv1").unwrap();
        assert!(
            conv.output_error_after.is_some(),
            "the second convolution was pruned"
        );
    }
    let sg = prune(
        &data,
        &w,
        &spec(&pattern, sparsegpt(CalibrationInputs::Sequential), 0),
        0,
    )
    .unwrap();
    for (s, m) in errors(&sg).iter().zip(errors(&mag)) {
        assert!(*s < m, "sparsegpt {s} vs magnitude {m}");
    }
}
