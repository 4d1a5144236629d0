//! Training: learning happens, seeds decide everything, and two processes (one and two threads)
//! produce the same weights digest.

use datasets::{load, Dataset, DatasetSpec};
use stages::{accuracy, train, LayerKind, ModelSpec, Optimizer, TrainSpec};

fn small_data() -> Dataset {
    load(&DatasetSpec::Synthetic {
        n_samples: 400,
        n_features: 10,
        n_classes: 3,
        seed: 5,
        test_fraction: 0.25,
        split_seed: 0,
    })
    .unwrap()
}

fn spec(epochs: usize, optimizer: Optimizer) -> TrainSpec {
    TrainSpec {
        epochs,
        batch_size: 32,
        lr: if optimizer == Optimizer::Sgd {
            0.2
        } else {
            1e-2
        },
        optimizer,
        weight_decay: 0.0,
    }
}

#[test]
fn training_learns_and_is_seeded() {
    let data = small_data();
    let model = ModelSpec::Mlp { hidden: vec![32] };
    let a = train(&data, &model, &spec(25, Optimizer::Adamw), 1).unwrap();
    let curve = &a.metrics.loss_curve;
    assert_eq!(curve.len(), 25);
    assert!(curve[24] < 0.6 * curve[0], "loss did not fall: {curve:?}");
    // The student must beat the majority class clearly.
    let majority = (0..3)
        .map(|c| data.test_y.iter().filter(|&&y| y == c).count())
        .max()
        .unwrap();
    let baseline = majority as f64 / data.n_test() as f64;
    assert!(
        a.metrics.test_accuracy > baseline + 0.2,
        "accuracy {} vs majority {baseline}",
        a.metrics.test_accuracy
    );
    assert_eq!(
        accuracy(&data, &a.weights).unwrap(),
        a.metrics.test_accuracy
    );
    assert!(a.metrics.samples_per_s > 0.0);

    let again = train(&data, &model, &spec(25, Optimizer::Adamw), 1).unwrap();
    assert_eq!(again.weights.digest(), a.weights.digest());
    let other = train(&data, &model, &spec(25, Optimizer::Adamw), 2).unwrap();
    assert_ne!(other.weights.digest(), a.weights.digest());

    let sgd = train(&data, &model, &spec(25, Optimizer::Sgd), 1).unwrap();
    assert!(
        sgd.metrics.test_accuracy > baseline + 0.1,
        "sgd accuracy {}",
        sgd.metrics.test_accuracy
    );
}

#[test]
fn cnn_trains_on_digits_images() {
    let data = load(&DatasetSpec::Digits {
        test_fraction: 0.2,
        split_seed: 0,
    })
    .unwrap();
    let model = ModelSpec::Cnn {
        channels: vec![4],
        hidden: vec![],
    };
    let t = train(
        &data,
        &model,
        &TrainSpec {
            epochs: 2,
            batch_size: 64,
            lr: 1e-2,
            optimizer: Optimizer::Adamw,
            weight_decay: 0.0,
        },
        0,
    )
    .unwrap();
    assert!(
        t.metrics.test_accuracy > 0.5,
        "cnn accuracy {}",
        t.metrics.test_accuracy
    );
    let linear = t
        .weights
        .layers
        .iter()
        .filter(|l| l.kind == LayerKind::Linear);
    assert_eq!(linear.count(), 1);
}

/// A ViT on the digits' 2×2 patches learns (one epoch is far above chance), saves and loads
/// exactly, and its block layers carry their names.
#[test]
fn transformer_trains_on_digit_patches() {
    let data = load(&DatasetSpec::Digits {
        test_fraction: 0.2,
        split_seed: 0,
    })
    .unwrap();
    let model = ModelSpec::Transformer {
        layers: 1,
        d_model: 32,
        heads: 4,
        d_ff: 64,
        patch: 2,
    };
    let t = train(&data, &model, &spec(3, Optimizer::Adamw), 0).unwrap();
    assert!(
        t.metrics.test_accuracy > 0.5,
        "transformer accuracy {}",
        t.metrics.test_accuracy
    );
    let names: Vec<&str> = t.weights.layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "embed",
            "block.0.attn.q",
            "block.0.attn.k",
            "block.0.attn.v",
            "block.0.attn.o",
            "block.0.mlp.up",
            "block.0.mlp.down",
            "head"
        ]
    );
    assert_eq!(t.weights.layer_tokens(), [16, 17, 17, 17, 17, 17, 17, 1]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vit.safetensors");
    t.weights.save(&path).unwrap();
    let back = stages::Weights::load(&path).unwrap();
    assert_eq!(back, t.weights);
    assert_eq!(back.digest(), t.weights.digest());
    assert_eq!(accuracy(&data, &back).unwrap(), t.metrics.test_accuracy);
    let bad = ModelSpec::Transformer {
        layers: 1,
        d_model: 30,
        heads: 4,
        d_ff: 8,
        patch: 2,
    };
    let e = train(&data, &bad, &spec(1, Optimizer::Adamw), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("divisible by heads"), "{e}");
}

#[test]
fn bad_configs_are_errors_not_panics() {
    let data = small_data();
    let model = ModelSpec::Mlp { hidden: vec![4] };
    let mut s = spec(1, Optimizer::Adamw);
    s.batch_size = 0;
    assert!(train(&data, &model, &s, 0).is_err());
    s = spec(1, Optimizer::Adamw);
    s.lr = f64::NAN;
    assert!(train(&data, &model, &s, 0).is_err());
    let cnn = ModelSpec::Cnn {
        channels: vec![2],
        hidden: vec![],
    };
    let e = train(&data, &cnn, &spec(1, Optimizer::Adamw), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("image"), "{e}");
    let other = load(&DatasetSpec::Synthetic {
        n_samples: 50,
        n_features: 3,
        n_classes: 2,
        seed: 0,
        test_fraction: 0.2,
        split_seed: 0,
    })
    .unwrap();
    let w = train(&data, &model, &spec(1, Optimizer::Adamw), 0)
        .unwrap()
        .weights;
    assert!(accuracy(&other, &w)
        .unwrap_err()
        .to_string()
        .contains("features"));
}

const CHILD_ENV: &str = "COTUNE_TRAIN_DIGEST_CHILD";

/// Helper run in a child process by `two_processes_give_the_same_digest`: prints the digest of a
/// small training run. In a normal test run it does nothing.
#[test]
fn child_prints_training_digest() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    stages::tune_malloc();
    let data = load(&DatasetSpec::Digits {
        test_fraction: 0.2,
        split_seed: 0,
    })
    .unwrap();
    let t = train(
        &data,
        &ModelSpec::Mlp { hidden: vec![32] },
        &spec(2, Optimizer::Adamw),
        7,
    )
    .unwrap();
    let vit = train(
        &data,
        &ModelSpec::Transformer {
            layers: 2,
            d_model: 16,
            heads: 2,
            d_ff: 32,
            patch: 2,
        },
        &spec(1, Optimizer::Adamw),
        7,
    )
    .unwrap();
    println!(
        "DIGEST={} LOSS={:08x} VIT={}",
        t.weights.digest(),
        t.metrics.final_train_loss.to_bits(),
        vit.weights.digest()
    );
}

#[test]
fn two_processes_give_the_same_digest() {
    let run = |threads: &str| {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_prints_training_digest",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, "1")
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "child failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let at = text.find("DIGEST=").expect("child printed no digest");
        text[at..].lines().next().unwrap_or_default().to_owned()
    };
    let one = run("1");
    let two = run("2");
    assert_eq!(one, two, "1 thread vs 2 threads in separate processes");
    assert_eq!(one.len(), "DIGEST= LOSS= VIT=".len() + 64 + 8 + 64);
}
