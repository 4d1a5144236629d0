//! Key stability: golden keys pin the scheme, and cosmetic edits of an experiment file (order,
//! comments, spacing, `1e-3` vs `0.001`) change no key.

use pipeline::experiment::{parse_str, validate};
use pipeline::key::{stage_key, CanonConfig, CanonValue};
use pipeline::kinds::Train;
use pipeline::plan::Plan;
use std::path::Path;

fn plan(text: &str) -> Plan {
    let (raw, map) = parse_str(Path::new("exp.toml"), text).expect("parses");
    let exp = validate(&raw, &map).expect("valid");
    e2e::table().plan(&exp, &map).expect("plans")
}

const A: &str = r#"
name = "keys"
seed = 7
[dataset]
source = "synthetic"
samples = 100
features = 16
classes = 4
[model]
kind = "mlp"
hidden = [32, 32]
[train]
epochs = 2
batch_size = 8
lr = [1e-3, 3e-3]
[prune]
pattern = ["dense", "nm", "vnm"]
sparsity = [0.75]
v = [8]
method = ["magnitude", "obs"]
[kernel_tune]
batch_tokens = [16]
"#;

// The same experiment: sections and keys reordered, comments, spacing, other float spellings.
const B: &str = r#"
# a comment
seed = 7
name   =   "keys"

[prune]
method = ["obs", "magnitude"]   # order of an axis is not meaning
v = 8
sparsity = 0.750
pattern = ["vnm", "nm", "dense"]

[kernel_tune]
batch_tokens = 16

[train]
lr = [0.003, 0.001]
batch_size = 8
epochs = 2

[model]
hidden = [32, 32]
kind = "mlp"

[dataset]
classes = 4
features = 16
samples = 100
source = "synthetic"
"#;

#[test]
fn cosmetic_edits_change_no_key() {
    let (a, b) = (plan(A), plan(B));
    assert!(a.nodes.len() > 20);
    assert_eq!(
        a.nodes.keys().collect::<Vec<_>>(),
        b.nodes.keys().collect::<Vec<_>>()
    );
    assert_eq!(a.digest(), b.digest());
}

#[test]
fn a_meaningful_edit_changes_keys() {
    let c = plan(&A.replace("epochs = 2", "epochs = 3"));
    let a = plan(A);
    assert_ne!(a.digest(), c.digest());
    // Kernel tunings do not depend on training: they are shared.
    let tunes = |p: &Plan| {
        p.nodes
            .iter()
            .filter(|(_, n)| n.stage == "kernel_tune")
            .map(|(k, _)| *k)
            .collect::<Vec<_>>()
    };
    assert_eq!(tunes(&a), tunes(&c));
}

#[test]
fn golden_keys() {
    let cfg = CanonConfig::new()
        .with("lr", CanonValue::f64(1e-3))
        .with(
            "hidden",
            CanonValue::List(vec![CanonValue::U64(256), CanonValue::U64(256)]),
        )
        .with("optimizer", CanonValue::Str("adamw".into()));
    let k = stage_key::<Train>(1, &cfg, &[]);
    assert_eq!(
        k.hex(),
        GOLDEN_TRAIN,
        "the key scheme changed: if deliberate, update the golden value"
    );
    // -0.0 and 0.0 are one value.
    assert_eq!(CanonValue::f64(-0.0), CanonValue::f64(0.0));
    let p = plan(A);
    assert_eq!(
        p.digest(),
        GOLDEN_PLAN,
        "the key scheme changed: if deliberate, update the golden value"
    );
}

const GOLDEN_TRAIN: &str = "483b40dad1015d63faebabc507008b689241c51385088e6706088249dd8c722d";
// The test stages plan their calibrations from the product's samples (CalibrationPlan::cpu).
// Since 2026-12-05 the plan also tunes the evaluated batch sizes no tuned batch guides (A's
// default batch sizes 1 and 256 against its batch_tokens 16): new kernel-tune instances, and
// new keys for the evaluations that read them.
// Since 2026-12-06 OBS reaches V:2:M down its nested structure (`vnm_steps` in the keys of
// its V:2:M prunings, M > 4, and of gradual V:2:M): A's two 8:2:8 OBS prunings and their
// evaluations have new keys; no other instance's changed.
// Since 2026-12-07 a calibration plan names its patterns as written (`2:4`), not by their Rust
// names: every calibration, and the tunings and evaluations after it, re-keyed.
const GOLDEN_PLAN: &str = "3b9ab42d54bb4a4259570a5805fc82b5ca122319da272670c95bb45d46a43fc9";

#[test]
fn every_key_tag_is_frozen() {
    use keytag::Tagged;
    // Keys, files and columns spell enum values by these tags, never by their Rust names, so
    // renaming a variant changes no key. Changing a tag here changes keys: only deliberately.
    assert_eq!(
        kernels::PatternKind::tags(),
        ["dense", "unstructured", "nm", "vnm", "vector"]
    );
    assert_eq!(
        stages::MethodKind::tags(),
        ["magnitude", "obs", "sparsegpt", "wanda"]
    );
    assert_eq!(stages::Scope::tags(), ["layer", "row"]);
    assert_eq!(stages::CalibrationInputs::tags(), ["sequential", "dense"]);
    assert_eq!(stages::ScheduleKind::tags(), ["oneshot", "gradual"]);
    assert_eq!(stages::Optimizer::tags(), ["adamw", "sgd"]);
    assert_eq!(
        stages::ModelKind::tags(),
        ["mlp", "cnn", "transformer", "checkpoint"]
    );
    assert_eq!(stages::kernel_tune::Backend::tags(), ["cpu", "cuda"]);
    assert_eq!(
        stages::kernel_tune::StrategyKind::tags(),
        ["exhaustive", "random", "model", "guided"]
    );
    assert_eq!(
        datasets::Source::tags(),
        ["digits", "synthetic", "idx", "parquet", "csv"]
    );
    assert_eq!(
        pipeline::experiment::schema::SearchStrategy::tags(),
        ["grid", "unified"]
    );
    assert_eq!(
        kernels::KernelFamily::tags(),
        [
            "cpu-dense",
            "cpu-csr",
            "cpu-nm",
            "cpu-vnm",
            "cpu-vector",
            "cuda-vnm",
            "cuda-csr",
            "cuda-dense"
        ]
    );
}

/// The quickstart planned with the product's stages.
fn quickstart() -> Plan {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../experiments/quickstart.toml"
    );
    let text = std::fs::read_to_string(file).expect("quickstart.toml");
    let (raw, map) = parse_str(Path::new(file), &text).expect("parses");
    let exp = validate(&raw, &map).expect("valid");
    let store = tempfile::tempdir().expect("temp dir");
    pipeline::real::table(store.path())
        .plan(&exp, &map)
        .expect("plans")
}

#[test]
fn golden_keys_of_the_real_stages() {
    // Dataset, train and prune keys depend on no device: the quickstart's are pinned whole.
    // (They equal the keys the engine before the typed stage seam gave: a store it filled plans
    // its dataset, training and 11 prunes as cached.)
    let plan = quickstart();
    let mut h = blake3::Hasher::new();
    let mut n = 0;
    for (k, node) in &plan.nodes {
        if ["dataset", "train", "prune"].contains(&node.stage) {
            h.update(node.stage.as_bytes());
            h.update(k.as_bytes());
            n += 1;
        }
    }
    assert_eq!(
        n,
        1 + 1 + 11,
        "the quickstart's dataset, training and prunes"
    );
    assert_eq!(
        h.finalize().to_hex().as_str(),
        GOLDEN_REAL_MODEL,
        "the real stages' keys changed: if deliberate, update the golden value"
    );
    // Tuning and evaluation keys cover the device and the kernels' digests: pinned here on
    // fixed ones, with the real stages' versions.
    use kernels::Pattern;
    use pipeline::kinds::{
        Calibrate, CalibrateTrial, DeviceState, EvalTrial, Evaluate, KernelTune, TuneTrial,
    };
    use pipeline::stage::Trial;
    use stages::kernel_tune::calibrate::CalibrationPlan;
    use stages::kernel_tune::{Backend, Strategy};
    let device = DeviceState::Ready("golden-cpu avx512".into());
    let family = kernels::KernelFamily::CpuVnm;
    let cal = CalibrateTrial {
        plan: CalibrationPlan::cpu(family).unwrap(),
        device: device.clone(),
        kernel_version: "cpu-vnm:0123456789abcdef".into(),
    };
    let tune = TuneTrial {
        pattern: Pattern::Vnm { v: 64, m: 8 },
        rows: 256,
        cols: 256,
        batch_tokens: 64,
        backend: Backend::Cpu,
        dtype: "f32".into(),
        strategy: Strategy::Model { budget: 24 },
        device: device.clone(),
        kernel_version: "cpu-vnm:0123456789abcdef+cpu-dense:fedcba9876543210".into(),
    };
    let table = pipeline::real::table(tempfile::tempdir().unwrap().path());
    let ck = stage_key::<Calibrate>(table.version("calibrate").unwrap(), &cal.canon(), &[]);
    let tk = stage_key::<KernelTune>(
        table.version("kernel_tune").unwrap(),
        &tune.canon(),
        &[ck.any()],
    );
    // The same budget spent by the guided search is other work: its own key.
    let guided = TuneTrial {
        strategy: Strategy::Guided { budget: 24 },
        ..tune.clone()
    };
    let gk = stage_key::<KernelTune>(
        table.version("kernel_tune").unwrap(),
        &guided.canon(),
        &[ck.any()],
    );
    assert_ne!(gk.hex(), tk.hex());
    let eval = EvalTrial {
        backend: Backend::Cpu,
        batch_sizes: vec![1, 256],
        device,
        dense_where_faster: false,
    };
    let prune = plan
        .nodes
        .values()
        .find(|n| n.stage == "prune")
        .unwrap()
        .key;
    let ek = stage_key::<Evaluate>(
        table.version("evaluate").unwrap(),
        &eval.canon(),
        &[prune, tk.any()],
    );
    // Running the losing layers dense is other work: its own key (and, unset, none of the key).
    let dense_where_faster = EvalTrial {
        dense_where_faster: true,
        ..eval.clone()
    };
    let dk = stage_key::<Evaluate>(
        table.version("evaluate").unwrap(),
        &dense_where_faster.canon(),
        &[prune, tk.any()],
    );
    assert_ne!(dk.hex(), ek.hex());
    assert_eq!(
        (ck.hex().as_str(), tk.hex().as_str(), ek.hex().as_str()),
        GOLDEN_REAL_TUNE_EVAL,
        "the real stages' keys changed: if deliberate, update the golden values"
    );
}

// The quickstart's 64:2:8 OBS pruning re-keyed on 2026-12-06 (`vnm_steps`, above); its other ten
// prunings, its training and its dataset kept their keys.
const GOLDEN_REAL_MODEL: &str = "176da1de785b85415b580c4d4433db24427443fababb6125c2cc44b5c916021c";
const GOLDEN_REAL_TUNE_EVAL: (&str, &str, &str) = (
    // calibrate version 2 (rounds), on the vnm family's sample of CalibrationPlan::cpu, its
    // patterns as written (2026-12-07), the family digest of COTUNE_ISA's new warning.
    "137c23d5255b5f7099a476e5468c2029a304d8699154daaa1347f6fbf5d9177d",
    // kernel_tune version 4 (a dense format its own baseline) reading that calibration.
    "4370766812150a72122afc9197eb40813b4cb015d455dd22b320209511edd099",
    // evaluate version 15 (slices also timed in chunks of samples that fit the L2 cache).
    "c45276661cf21a0200772f62e49aabc689ec1def6718b4cf7f2828cfe7d42541",
);

/// Every CPU and CUDA format the tuner keys, as (backend, pattern, rows, cols).
fn formats() -> Vec<(stages::kernel_tune::Backend, kernels::Pattern, u64, u64)> {
    use kernels::Pattern as P;
    use stages::kernel_tune::Backend::{Cpu, Cuda};
    let patterns = [
        P::Dense,
        P::Unstructured { sparsity: 0.75 },
        P::Nm { n: 2, m: 4 },
        P::Nm { n: 2, m: 8 },
        P::Vnm { v: 64, m: 8 },
        P::Vector {
            v: 64,
            sparsity: 0.5,
        },
    ];
    let mut out = vec![];
    for backend in [Cpu, Cuda] {
        for p in &patterns {
            out.push((backend, p.clone(), 256, 768));
        }
    }
    out
}

/// A source file and how to edit its text.
type Edit<'a> = (&'a str, &'a dyn Fn(&str) -> String);

/// The tuning keys of [`formats`] with the kernel digests of the sources, one file edited.
fn tune_keys(edit: Option<Edit>) -> Vec<String> {
    use pipeline::kinds::{DeviceState, KernelTune, TuneTrial};
    use pipeline::stage::Trial;
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../kernels/");
    let digests = kernels::family::digests_from(|f| {
        let text = std::fs::read_to_string(format!("{root}{f}"))?;
        Ok::<_, std::io::Error>(match edit {
            Some((path, change)) if path == f => change(&text),
            _ => text,
        })
    })
    .unwrap();
    formats()
        .into_iter()
        .map(|(backend, pattern, rows, cols)| {
            let version = pipeline::real::kernel_version_with(backend, &pattern, rows, cols, |f| {
                digests[&f].clone()
            });
            let t = TuneTrial {
                pattern,
                rows,
                cols,
                batch_tokens: 64,
                backend,
                dtype: "f32".into(),
                strategy: stages::kernel_tune::Strategy::Model { budget: 24 },
                device: DeviceState::Ready("test".into()),
                kernel_version: version,
            };
            stage_key::<KernelTune>(2, &t.canon(), &[]).hex()
        })
        .collect()
}

/// Which of [`formats`] changed key, as "backend pattern" labels.
fn changed(a: &[String], b: &[String]) -> Vec<String> {
    formats()
        .iter()
        .zip(a.iter().zip(b))
        .filter(|(_, (x, y))| x != y)
        .map(|((backend, p, _, _), _)| format!("{backend} {}", pipeline::kinds::pattern_label(p)))
        .collect()
}

#[test]
fn editing_a_kernel_re_tunes_only_its_family() {
    let base = tune_keys(None);
    let comment = |t: &str| {
        format!(
            "// a comment\n{}\n/* another */\n",
            t.replace('\n', "\n  \n")
        )
    };
    let code = |t: &str| format!("{t}\nconst _EDITED: u8 = 1;\n");
    let define = |t: &str| format!("{t}\n#define COTUNE_EDITED 1\n");
    // A comment or reformatting in a CPU kernel file or a .cu file changes no key.
    assert_eq!(
        changed(
            &base,
            &tune_keys(Some(("src/cpu/kernels/vnm.rs", &comment)))
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        changed(&base, &tune_keys(Some(("cuda/spmm_csr_f32.cu", &comment)))),
        Vec::<String>::new()
    );
    // A line of code re-tunes only the tunings that measured that kernel (N:M 2:M in row
    // pairs runs the V:N:M kernel).
    assert_eq!(
        changed(&base, &tune_keys(Some(("src/cpu/kernels/vnm.rs", &code)))),
        ["cpu nm 2:4", "cpu nm 2:8", "cpu vnm 64:2:8"]
    );
    assert_eq!(
        changed(
            &base,
            &tune_keys(Some(("src/cpu/kernels/vector.rs", &code)))
        ),
        ["cpu vector 64x1 0.5"]
    );
    // The CUDA CSR kernel runs unstructured, N:M other than 2:4 (and 1:4), and vector-wise.
    assert_eq!(
        changed(&base, &tune_keys(Some(("cuda/spmm_csr_f32.cu", &define)))),
        [
            "cuda unstructured 0.75",
            "cuda nm 2:8",
            "cuda vector 64x1 0.5"
        ]
    );
    // The dense baseline is measured by every tuning of its backend.
    assert_eq!(
        changed(&base, &tune_keys(Some(("src/dense.rs", &code)))).len(),
        6
    );
}

#[test]
fn one_shot_parameters_are_in_their_keys_only() {
    let base = A.replace(
        r#"method = ["magnitude", "obs"]"#,
        r#"method = ["magnitude", "obs", "sparsegpt", "wanda"]"#,
    );
    let prunes = |text: &str| -> Vec<(String, pipeline::key::AnyKey)> {
        plan(text)
            .nodes
            .values()
            .filter(|n| n.stage == "prune")
            .map(|n| (n.label(), n.key))
            .collect()
    };
    let a = prunes(&base);
    let b = prunes(&base.replace("[prune]", "[prune]\nsparsegpt_damp = 0.1"));
    let c = prunes(&base.replace("[prune]", "[prune]\ncalibration_samples = 64"));
    let changed = |x: &[(String, pipeline::key::AnyKey)], y: &[(String, pipeline::key::AnyKey)]| {
        let mut out: Vec<String> = x
            .iter()
            .filter(|p| !y.contains(p))
            .map(|(l, _)| l.split(' ').next_back().unwrap().to_owned())
            .collect();
        out.sort();
        out.dedup();
        out
    };
    assert_eq!(changed(&a, &b), ["sparsegpt"]);
    assert_eq!(changed(&a, &c), ["sparsegpt", "wanda"]);
    // The magnitude and OBS keys are those of the file without the one-shot methods.
    let before = prunes(A);
    assert!(before.iter().all(|p| a.contains(p)));
}

/// A unified search's round 0 on the real stages: its prunings' keys (the dense reference and
/// the per-layer proxies, whose keys cover each layer's pattern) are pinned, and its dense
/// reference is the quickstart's own dense pruning (the two share the store's entries).
#[test]
fn golden_keys_of_a_unified_search() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../experiments/search/per-layer.toml"
    );
    let text = std::fs::read_to_string(file).expect("per-layer.toml");
    let (raw, map) = parse_str(Path::new(file), &text).expect("parses");
    let exp = validate(&raw, &map).expect("valid");
    let dir = tempfile::tempdir().expect("temp dir");
    let table = std::sync::Arc::new(pipeline::real::table(dir.path()));
    let store = pipeline::store::Store::open(&dir.path().join("store")).expect("store");
    let (_, plan) =
        pipeline::search::Unified::new(exp, map, table, store, false).expect("round 0 plans");
    let mut h = blake3::Hasher::new();
    let mut n = 0;
    for (k, node) in &plan.nodes {
        if node.stage == "prune" {
            h.update(k.as_bytes());
            n += 1;
        }
    }
    // The dense reference and 26 proxies: fc0 and fc1 take 5 sparse patterns each, fc2 3
    // (V = 64 does not divide its 10 rows), for each of the two methods.
    assert_eq!(n, 1 + 2 * (5 + 5 + 3));
    assert_eq!(
        h.finalize().to_hex().as_str(),
        GOLDEN_UNIFIED_PRUNES,
        "a unified search's prune keys changed: if deliberate, update the golden value"
    );
    let dense = |p: &Plan| {
        p.nodes
            .values()
            .find(|n| n.stage == "prune" && n.label() == "dense")
            .map(|n| n.key)
    };
    assert!(dense(&plan).is_some(), "round 0 plans the dense reference");
    assert_eq!(dense(&plan), dense(&quickstart()));
}

// The two OBS proxies that prune one layer to 64:2:8 re-keyed on 2026-12-06 (`vnm_steps`).
const GOLDEN_UNIFIED_PRUNES: &str =
    "9f192ecda73e86c7778dca36be2ece6298b29d6b6dd8e0295ed577f843dce947";
