//! The cost model's calibration as a stage: one per (kernel family, device), shared by every
//! tuning and experiment of a store, requested only by prunes that succeeded, and in the keys
//! of the tunings that read it.

use e2e::harness::{counts, keys, log_lines, run_json, tables, Workspace};
use results::{Row, Value};

const BIN: &str = env!("CARGO_BIN_EXE_cotune-test");

fn experiment(name: &str, lr: &str, patterns: &str, sparsity: &str, extra: &str) -> String {
    format!(
        r#"name = "{name}"
[dataset]
source = "synthetic"
samples = 100
features = 16
classes = 4
[model]
kind = "mlp"
hidden = [32]
[train]
epochs = 1
batch_size = 8
lr = {lr}
[prune]
pattern = {patterns}
sparsity = {sparsity}
[kernel_tune]
batch_tokens = [16]
budget = 4
{extra}"#
    )
}

fn col<'r>(r: &'r Row, c: &str) -> &'r Value {
    r.get(c).unwrap_or(&Value::Null)
}

fn calibrate_lines(log: &std::path::Path) -> Vec<String> {
    log_lines(log)
        .into_iter()
        .filter(|l| l.starts_with("calibrate "))
        .collect()
}

#[test]
fn a_calibration_runs_once_per_family_and_serves_every_tuning_and_experiment() {
    let ws = Workspace::new();
    let log = ws.path("log");
    let run = |file: &str, text: &str, out: &str| {
        ws.write(file, text);
        let (f, s, o) = (ws.path(file), ws.path("store"), ws.path(out));
        let args = [
            "run",
            f.to_str().unwrap(),
            "--store",
            s.to_str().unwrap(),
            "--out",
            o.to_str().unwrap(),
            "-q",
        ];
        ws.cotune(BIN, &args, Some(&log))
    };

    // The 0.666 prune fails on purpose: its tunings are requested by nobody that succeeded, so
    // they do not run although their family's calibration (asked for by the 0.75 prune) is
    // done.
    let a = experiment("a", "1e-3", r#"["unstructured"]"#, "[0.666, 0.75]", "");
    let o = run("a.toml", &a, "out");
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(calibrate_lines(&log), ["calibrate cpu-csr"]);
    let t = tables(&ws.path("out"), "a");
    assert_eq!(t["calibrate"].len(), 1);
    let cal_key = col(&t["calibrate"][0], "key").clone();
    let tunes = &t["kernel_tune"];
    assert!(!tunes.is_empty());
    for r in tunes {
        assert_eq!(col(r, "status"), &Value::Str("ok".into()));
        if col(r, "format.pattern") == &Value::Str("unstructured".into()) {
            assert_eq!(col(r, "format.sparsity"), &Value::F64(0.75), "{r:?}");
            assert_eq!(col(r, "calibrate_key"), &cal_key);
        }
    }
    let run_a = run_json(&ws.path("out"), "a");
    assert_eq!(counts(&run_a, "calibrate"), (1, 0, 0));
    assert_eq!(counts(&run_a, "kernel_tune").0 as usize, keys(tunes).len());

    // Another experiment in the same store: the CSR calibration is a cache hit, N:M's is new.
    let b = experiment("b", "2e-3", r#"["unstructured", "nm"]"#, "[0.75]", "");
    let o = run("b.toml", &b, "out");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        calibrate_lines(&log),
        ["calibrate cpu-csr", "calibrate cpu-nm"]
    );
    let run_b = run_json(&ws.path("out"), "b");
    assert_eq!(counts(&run_b, "calibrate"), (1, 1, 0));
    let tb = tables(&ws.path("out"), "b");
    let csr_tunes = |t: &std::collections::BTreeMap<String, Vec<Row>>| -> Vec<String> {
        let rows: Vec<Row> = t["kernel_tune"]
            .iter()
            .filter(|r| col(r, "format.pattern") == &Value::Str("unstructured".into()))
            .cloned()
            .collect();
        keys(&rows)
    };
    assert_eq!(csr_tunes(&tb), csr_tunes(&t), "the same tunings, shared");

    // Without calibration: no calibrate instance, and tunings keyed apart from calibrated ones.
    let c = experiment(
        "c",
        "2e-3",
        r#"["unstructured", "nm"]"#,
        "[0.75]",
        "calibrate = false\n",
    );
    // `plan` says why its tunings are new: they lack the calibration the stored ones had.
    let f = ws.write("c.toml", &c);
    let store = ws.path("store");
    let args = [
        "plan",
        f.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--verbose",
    ];
    let p = ws.cotune(BIN, &args, None);
    let said = String::from_utf8_lossy(&p.stdout);
    assert!(said.contains("no calibrate input"), "{said}");
    let o = run("c.toml", &c, "out");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(calibrate_lines(&log).len(), 2);
    let run_c = run_json(&ws.path("out"), "c");
    assert_eq!(counts(&run_c, "calibrate"), (0, 0, 0));
    let tc = tables(&ws.path("out"), "c");
    assert!(tc["kernel_tune"]
        .iter()
        .all(|r| col(r, "calibrate_key") == &Value::Null));
    let (kb, kc) = (csr_tunes(&tb), csr_tunes(&tc));
    assert!(!kb.is_empty());
    assert!(
        kb.iter().all(|k| !kc.contains(k)),
        "calibration is in the tunings' keys"
    );
}
