//! A layer study of a user's checkpoint through the real `cotune` (`[model] kind =
//! "checkpoint"`): the test writes its own safetensors file. Each matched tensor is pruned to
//! every point (one row per tensor and point, with its retained L1, output error and where its
//! calibration inputs came from) and tuned at its real shape; a re-run computes nothing; a
//! changed file re-runs the study (its blake3 is in the key); every bad input stops the run with
//! exit 2 and `path:line:col`, naming the file and the tensor or glob, before anything runs.

use e2e::harness::{counts, run_json, strip, Workspace};
use e2e::safetensors_io::write as write_safetensors;
use results::Value;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_cotune-real");

fn f32s(n: usize, seed: u64) -> Vec<u8> {
    stages::prune::gaussian(n, seed)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

/// Two attention projections (64×64, 128×64), a bias, a 4-D kernel and integer ids.
fn write_model(path: &Path, seed: u64) {
    write_safetensors(
        path,
        &[
            (
                "enc.0.attn.query.weight",
                "F32",
                vec![64, 64],
                f32s(64 * 64, seed),
            ),
            (
                "enc.0.mlp.up.weight",
                "F32",
                vec![128, 64],
                f32s(128 * 64, seed + 1),
            ),
            ("enc.0.attn.query.bias", "F32", vec![64], f32s(64, seed + 2)),
            ("conv.weight", "F32", vec![8, 2, 3, 3], f32s(144, seed + 3)),
            ("ids", "I64", vec![2, 2], vec![0; 32]),
        ],
    );
}

fn experiment(layers: &str, extra: &str) -> String {
    format!(
        r#"name = "study"
seed = 3
[model]
kind = "checkpoint"
path = "model.safetensors"
layers = {layers}
calibration_tokens = 96
{extra}
[prune]
pattern = ["dense", "unstructured", "nm", "vnm"]
sparsity = [0.75]
nm = ["2:8"]
v = [32]
method = ["magnitude", "wanda", "sparsegpt"]
[kernel_tune]
strategy = "model"
budget = 2
batch_tokens = [16]
"#
    )
}

const GOOD: &str = r#"["enc.*.weight"]"#;

fn run(ws: &Workspace) -> std::process::Output {
    ws.run(BIN, "exp.toml", "store", "out", &[])
}

#[test]
fn a_checkpoints_tensors_are_studied_at_every_point_and_a_changed_file_re_runs() {
    let ws = Workspace::new();
    write_model(&ws.path("model.safetensors"), 1);
    ws.write("exp.toml", &experiment(GOOD, ""));
    let o = run(&ws);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = results::current(&ws.path("out"), "study").unwrap();
    let studies = strip(results::read_table(&dir.join("layer_study")).unwrap());
    let tunings = strip(results::read_table(&dir.join("kernel_tune")).unwrap());
    // 1 dense + 3 patterns × 3 methods points, each one row per tensor.
    let per_tensor: Vec<_> = studies.iter().filter(|r| r.contains_key("layer")).collect();
    assert_eq!(per_tensor.len(), 10 * 2, "{studies:?}");
    assert_eq!(studies.len(), per_tensor.len(), "{studies:?}");
    // Each row carries its point's summary: sparsity weighted by size, retained L1 weighted
    // by L1 norm (so between its tensors' own).
    let mut points: std::collections::BTreeMap<String, Vec<&results::Row>> = Default::default();
    for r in &per_tensor {
        points
            .entry(format!("{:?}", r.get("key")))
            .or_default()
            .push(r);
    }
    assert_eq!(points.len(), 10);
    for rows in points.values() {
        let num = |r: &results::Row, c: &str| r.get(c).and_then(Value::as_f64).unwrap();
        let size = |r: &results::Row| num(r, "rows") * num(r, "cols");
        let total: f64 = rows.iter().map(|r| size(r)).sum();
        let sparsity = rows
            .iter()
            .map(|r| num(r, "layer_sparsity") * size(r))
            .sum::<f64>()
            / total;
        let retained: Vec<f64> = rows.iter().map(|r| num(r, "retained_l1")).collect();
        let (lo, hi) = (
            retained.iter().copied().fold(f64::MAX, f64::min),
            retained.iter().copied().fold(f64::MIN, f64::max),
        );
        for r in rows {
            assert!((num(r, "point_sparsity") - sparsity).abs() < 1e-12, "{r:?}");
            let p = num(r, "point_retained_l1");
            assert!(
                p >= lo - 1e-12 && p <= hi + 1e-12,
                "{p} outside {lo}..{hi}: {r:?}"
            );
        }
    }
    let mut statuses = std::collections::BTreeMap::new();
    for r in &per_tensor {
        let num = |c: &str| r.get(c).and_then(Value::as_f64).unwrap();
        assert_eq!(r.get("calibration"), Some(&Value::Str("gaussian".into())));
        assert_eq!(num("calibration_tokens"), 96.0);
        // The tensor's own status, beside the trial's `status` (ok).
        assert_eq!(r.get("status"), Some(&Value::Str("ok".into())));
        let status = match r.get("layer_status") {
            Some(Value::Str(s)) => s.clone(),
            other => panic!("layer_status {other:?}"),
        };
        *statuses.entry(status.clone()).or_insert(0) += 1;
        if status == "pruned" {
            assert!((num("layer_sparsity") - 0.75).abs() < 1e-9, "{r:?}");
            assert!(
                num("retained_l1") > 0.25 && num("retained_l1") < 1.0,
                "{r:?}"
            );
            assert!(num("output_error_before") > 0.0, "{r:?}");
        }
    }
    // 9 sparse points and the dense one, two tensors each (V = 32 divides both).
    let want = [("dense".to_string(), 2), ("pruned".to_string(), 18)];
    assert_eq!(statuses, want.into_iter().collect(), "{statuses:?}");
    // SparseGPT's update lowers the output error its mask alone would leave.
    for r in per_tensor
        .iter()
        .filter(|r| r.get("prune.method") == Some(&Value::Str("sparsegpt".into())))
    {
        let num = |c: &str| r.get(c).and_then(Value::as_f64).unwrap();
        assert!(
            num("output_error_after") < num("output_error_before"),
            "{r:?}"
        );
    }
    // Tuned at the tensors' real shapes.
    let shapes: Vec<(f64, f64)> = tunings
        .iter()
        .map(|r| {
            let n = |c: &str| r.get(c).and_then(Value::as_f64).unwrap();
            (n("format.rows"), n("format.cols"))
        })
        .collect();
    assert!(shapes.contains(&(64.0, 64.0)) && shapes.contains(&(128.0, 64.0)));

    let o = run(&ws);
    assert!(o.status.success());
    let report = run_json(&ws.path("out"), "study");
    assert_eq!(
        counts(&report, "layer_study"),
        (0, 10, 0),
        "a re-run computes nothing"
    );
    // Regression: the file's name was in the keys, so a renamed checkpoint re-ran every study.
    std::fs::create_dir_all(ws.path("moved")).unwrap();
    std::fs::copy(
        ws.path("model.safetensors"),
        ws.path("moved/renamed.safetensors"),
    )
    .unwrap();
    let moved = experiment(GOOD, "").replace("model.safetensors", "moved/renamed.safetensors");
    ws.write("exp.toml", &moved);
    let o = run(&ws);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = run_json(&ws.path("out"), "study");
    assert_eq!(counts(&report, "checkpoint"), (0, 1, 0), "renamed: cached");
    assert_eq!(
        counts(&report, "layer_study"),
        (0, 10, 0),
        "renamed: cached"
    );
    ws.write("exp.toml", &experiment(GOOD, ""));

    write_model(&ws.path("model.safetensors"), 2);
    let o = run(&ws);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = run_json(&ws.path("out"), "study");
    assert_eq!(
        counts(&report, "checkpoint"),
        (1, 0, 0),
        "a changed file re-runs"
    );
    assert_eq!(counts(&report, "layer_study"), (10, 0, 0));
    assert_eq!(
        counts(&report, "kernel_tune").0,
        0,
        "tunings depend on shapes only"
    );
}

/// The file, the line and column, and the names in the first line of stderr.
fn refused(ws: &Workspace, text: &str, line: usize, col: usize, needles: &[&str]) {
    ws.write("exp.toml", text);
    let o = run(ws);
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{err}");
    let first = err.lines().next().unwrap_or("");
    let want = format!("{}:{line}:{col}: ", ws.path("exp.toml").display());
    assert!(
        first.starts_with(&want),
        "expected `{want}…`, got `{first}`"
    );
    for n in needles {
        assert!(first.contains(n), "`{first}` should mention `{n}`");
    }
    assert!(!ws.path("store").exists(), "nothing may run");
}

#[test]
fn bad_checkpoints_are_refused_before_anything_runs() {
    let ws = Workspace::new();
    let model = ws.path("model.safetensors");
    // Missing.
    refused(&ws, &experiment(GOOD, ""), 5, 8, &["model.safetensors"]);
    write_model(&model, 1);
    // A glob that matches nothing; a 1-D tensor; a 4-D one not declared; an integer tensor.
    refused(
        &ws,
        &experiment(r#"["enc.*.weight", "*.key.weight"]"#, ""),
        6,
        10,
        &["model.safetensors", "`*.key.weight` matches no tensor"],
    );
    refused(
        &ws,
        &experiment(r#"["*.bias"]"#, ""),
        6,
        10,
        &["model.safetensors", "enc.0.attn.query.bias", "2-D"],
    );
    refused(
        &ws,
        &experiment(r#"["conv.weight"]"#, ""),
        6,
        10,
        &["conv.weight", "conv = true"],
    );
    refused(&ws, &experiment(r#"["ids"]"#, ""), 6, 10, &["ids", "I64"]);
    // `[evaluate]`: a layer study evaluates no model; the table would be read and ignored.
    refused(
        &ws,
        &format!("{}[evaluate]\nbatch_sizes = [16]\n", experiment(GOOD, "")),
        19,
        1,
        &["a layer study evaluates none", "remove [evaluate]"],
    );
    // A V that divides no tensor's rows; OBS.
    refused(
        &ws,
        &experiment(GOOD, "").replace("v = [32]", "v = [48]"),
        13,
        6,
        &["v = 48 divides none"],
    );
    refused(
        &ws,
        &experiment(GOOD, "").replace("\"sparsegpt\"]", "\"obs\"]"),
        14,
        33,
        &["OBS"],
    );
    // Calibration settings of a model's prunings, which a study does not use.
    refused(
        &ws,
        &experiment(GOOD, "").replace("[prune]\n", "[prune]\ncalibration_samples = 64\n"),
        10,
        23,
        &["`calibration_samples` does not apply to a layer study"],
    );
    // Sizes past what a run holds, from the file's shapes: SparseGPT's cols × cols Hessian,
    // and the Gaussian inputs of `calibration_tokens`.
    write_safetensors(
        &ws.path("wide.safetensors"),
        &[("wide.weight", "F32", vec![2, 40_000], f32s(80_000, 4))],
    );
    let wide = experiment(r#"["wide.*"]"#, "").replace("model.safetensors", "wide.safetensors");
    refused(
        &ws,
        &wide,
        14,
        33,
        &["SparseGPT's Hessian of tensor wide.weight", "40000 × 40000"],
    );
    refused(
        &ws,
        &wide.replace("calibration_tokens = 96", "calibration_tokens = 30000"),
        7,
        22,
        &["tensor wide.weight (30000 tokens)", "more than 1073741824"],
    );
    // Truncated, and not safetensors at all.
    let bytes = std::fs::read(&model).unwrap();
    std::fs::write(&model, &bytes[..bytes.len() - 100]).unwrap();
    refused(
        &ws,
        &experiment(GOOD, ""),
        5,
        8,
        &["model.safetensors", "not a readable safetensors file"],
    );
    std::fs::write(&model, b"PK\x03\x04 a zip file").unwrap();
    refused(
        &ws,
        &experiment(GOOD, ""),
        5,
        8,
        &["not a readable safetensors file"],
    );
    // 4-D declared as convolutions: accepted.
    write_model(&model, 1);
    ws.write(
        "exp.toml",
        &experiment(r#"["conv.weight"]"#, "conv = true").replace("v = [32]", "v = [8]"),
    );
    let o = run(&ws);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// VENOM Fig. 11 through the engine: a 768×768 i.i.d. Gaussian tensor at 75 % under
/// unstructured, 2:8, V:2:8 and vector-wise V×1 (V = 2 … 128), by magnitude; each study row's
/// retained L1 matches the independent computation within 0.005.
#[test]
fn retained_l1_of_a_gaussian_layer_matches_an_independent_computation() {
    let ws = Workspace::new();
    let (rows, cols) = (768, 768);
    let w = stages::prune::gaussian(rows * cols, 11);
    let tensor = stages::model::CheckpointTensor {
        name: "gaussian.weight".into(),
        shape: vec![rows, cols],
        rows,
        cols,
        values: w.clone(),
    };
    stages::model::write_matrices(&ws.path("model.safetensors"), &[tensor]).unwrap();
    let text = experiment(r#"["gaussian.weight"]"#, "")
        .replace(
            r#"pattern = ["dense", "unstructured", "nm", "vnm"]"#,
            r#"pattern = ["unstructured", "nm", "vnm", "vector"]"#,
        )
        .replace("v = [32]", "v = [2, 4, 8, 16, 32, 64, 128]")
        .replace(
            r#"method = ["magnitude", "wanda", "sparsegpt"]"#,
            r#"method = ["magnitude"]"#,
        );
    ws.write("exp.toml", &text);
    let o = run(&ws);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = results::current(&ws.path("out"), "study").unwrap();
    let studies = strip(results::read_table(&dir.join("layer_study")).unwrap());
    let mut checked = 0;
    for r in studies.iter().filter(|r| r.contains_key("layer")) {
        let int = |c: &str| r.get(c).and_then(Value::as_f64).unwrap_or(0.0) as usize;
        let sparsity = r
            .get("prune.sparsity")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let pattern = match r.get("prune.pattern") {
            Some(Value::Str(p)) if p == "unstructured" => {
                kernels::Pattern::Unstructured { sparsity }
            }
            Some(Value::Str(p)) if p == "nm" => kernels::Pattern::Nm {
                n: int("prune.n"),
                m: int("prune.m"),
            },
            Some(Value::Str(p)) if p == "vnm" => kernels::Pattern::Vnm {
                v: int("prune.v"),
                m: int("prune.m"),
            },
            Some(Value::Str(p)) if p == "vector" => kernels::Pattern::Vector {
                v: int("prune.v"),
                sparsity,
            },
            other => panic!("unexpected pattern {other:?}"),
        };
        let got = r.get("retained_l1").and_then(Value::as_f64).unwrap();
        let want = e2e::oracle::retained_l1(&w, rows, cols, &pattern);
        assert!((got - want).abs() <= 0.005, "{pattern:?}: {got} vs {want}");
        checked += 1;
    }
    // unstructured, 2:8, 7 V:2:8 and 7 vector-wise points.
    assert_eq!(checked, 16);
}

/// Calibration inputs from a file where it has a tensor's (under the tensor's name), Gaussian
/// elsewhere, each row saying which; inputs of the wrong width are refused before anything runs.
#[test]
fn calibration_inputs_come_from_the_file_where_it_has_them() {
    let ws = Workspace::new();
    write_model(&ws.path("model.safetensors"), 1);
    let q = "enc.0.attn.query.weight";
    write_safetensors(
        &ws.path("inputs.safetensors"),
        &[(q, "F32", vec![32, 64], f32s(32 * 64, 9))],
    );
    ws.write(
        "exp.toml",
        &experiment(GOOD, "calibration = \"inputs.safetensors\""),
    );
    let o = run(&ws);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let dir = results::current(&ws.path("out"), "study").unwrap();
    let studies = strip(results::read_table(&dir.join("layer_study")).unwrap());
    for r in studies.iter().filter(|r| r.contains_key("layer")) {
        let from_file = r.get("layer") == Some(&Value::Str(q.into()));
        let (source, tokens) = if from_file {
            ("file", 32.0)
        } else {
            ("gaussian", 96.0)
        };
        assert_eq!(
            r.get("calibration"),
            Some(&Value::Str(source.into())),
            "{r:?}"
        );
        assert_eq!(
            r.get("calibration_tokens").and_then(Value::as_f64),
            Some(tokens)
        );
    }
    std::fs::remove_dir_all(ws.path("store")).unwrap();
    write_safetensors(
        &ws.path("inputs.safetensors"),
        &[(q, "F32", vec![32, 60], f32s(32 * 60, 9))],
    );
    refused(
        &ws,
        &experiment(GOOD, "calibration = \"inputs.safetensors\""),
        8,
        15,
        &["inputs.safetensors", q, "32x60"],
    );
}

/// A tensor with a NaN fails every study of it, with the reason (they were "ok" rows with a
/// retained L1 of 1 and no output error; and where it was kept dense, or at the dense point, its
/// L1 made the point's retained L1 NaN, or 1); a calibration file naming none of the studied
/// tensors leaves them on Gaussian inputs (every trial failed on it).
#[test]
fn non_finite_weights_fail_their_studies_and_a_calibration_file_of_other_tensors_is_unused() {
    let ws = Workspace::new();
    let (q, up) = ("enc.0.attn.query.weight", "enc.0.mlp.up.weight");
    let mut bad = f32s(64 * 64, 1);
    bad[4 * (3 * 64 + 5)..][..4].copy_from_slice(&f32::NAN.to_le_bytes());
    write_safetensors(
        &ws.path("model.safetensors"),
        &[
            (q, "F32", vec![64, 64], bad),
            (up, "F32", vec![128, 64], f32s(128 * 64, 2)),
        ],
    );
    write_safetensors(
        &ws.path("inputs.safetensors"),
        &[("other", "F32", vec![8, 64], f32s(8 * 64, 9))],
    );
    let calibration = "calibration = \"inputs.safetensors\"";
    let table = |ws: &Workspace| {
        let dir = results::current(&ws.path("out"), "study").unwrap();
        strip(results::read_table(&dir.join("layer_study")).unwrap())
    };
    ws.write("exp.toml", &experiment(GOOD, calibration));
    let o = run(&ws);
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Every study failed naming it: each point's summary weighs the tensor's L1.
    let studies = table(&ws);
    assert_eq!(studies.len(), 10, "{studies:?}");
    for r in &studies {
        assert_eq!(r.get("status"), Some(&Value::Str("failed".into())), "{r:?}");
        match r.get("error") {
            Some(Value::Str(e)) => assert!(
                e.contains(&format!("tensor {q}")) && e.contains("NaN at row 3, column 5"),
                "{e}"
            ),
            other => panic!("no error: {other:?}"),
        }
    }
    // The finite tensor alone: every study completes, on Gaussian inputs.
    ws.write("exp.toml", &experiment(&format!("[\"{up}\"]"), calibration));
    let o = run(&ws);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let studies = table(&ws);
    let layers: Vec<_> = studies.iter().filter(|r| r.contains_key("layer")).collect();
    assert!(!layers.is_empty());
    for r in layers {
        assert_eq!(r.get("layer"), Some(&Value::Str(up.into())), "{r:?}");
        assert_eq!(
            r.get("calibration"),
            Some(&Value::Str("gaussian".into())),
            "{r:?}"
        );
    }
}
