//! Incremental runs equal fresh runs: run, add a point, remove it, put it back; each state's
//! tables must equal a fresh run of the same experiment file (same keys, same metric values),
//! and `run.json` must count exactly what changed.

use e2e::harness::{counts, keys, log_lines, run_json, tables, Workspace};

const BIN: &str = env!("CARGO_BIN_EXE_cotune-test");

fn experiment(v: &str) -> String {
    format!(
        r#"
name = "inc"
seed = 3
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
lr = [1e-3]
[prune]
pattern = ["dense", "unstructured", "nm", "vnm"]
sparsity = [0.5, 0.75]
v = {v}
method = ["magnitude", "obs"]
finetune_epochs = 1
[kernel_tune]
batch_tokens = [16]
budget = 4
[evaluate]
batch_sizes = [1, 8]
"#
    )
}

fn run(ws: &Workspace, file: &str, store: &str, out: &str, log: &std::path::Path) {
    let o = ws.cotune(
        BIN,
        &[
            "run",
            ws.path(file).to_str().unwrap(),
            "--store",
            ws.path(store).to_str().unwrap(),
            "--out",
            ws.path(out).to_str().unwrap(),
            "-q",
        ],
        Some(log),
    );
    assert!(
        o.status.success(),
        "run failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The front holds exactly the evaluations no other evaluation dominates.
fn assert_front_is_pareto(ws: &Workspace) {
    let t = tables(&ws.path("out"), "inc");
    let obj = |r: &results::Row| {
        let f = |c: &str| r.get(c).and_then(results::Value::as_f64).unwrap();
        (f("accuracy"), f("latency_us_median"), f("weight_bytes"))
    };
    let dominated = |a: (f64, f64, f64), b: (f64, f64, f64)| {
        b.0 >= a.0 && b.1 <= a.1 && b.2 <= a.2 && (b.0 > a.0 || b.1 < a.1 || b.2 < a.2)
    };
    let evals: Vec<_> = t["evaluate"].iter().map(obj).collect();
    let want: Vec<_> = t["evaluate"]
        .iter()
        .filter(|r| !evals.iter().any(|&e| dominated(obj(r), e)))
        .cloned()
        .collect();
    assert!(!want.is_empty());
    assert_eq!(
        keys(&t["pareto"]),
        keys(&want),
        "pareto.parquet is not the non-dominated set"
    );
}

fn fresh_equals(ws: &Workspace, text: &str, tag: &str) {
    assert_front_is_pareto(ws);
    let f = format!("fresh-{tag}.toml");
    ws.write(&f, text);
    let log = ws.path(&format!("fresh-{tag}.log"));
    run(
        ws,
        &f,
        &format!("fresh-store-{tag}"),
        &format!("fresh-out-{tag}"),
        &log,
    );
    let a = tables(&ws.path("out"), "inc");
    let b = tables(&ws.path(&format!("fresh-out-{tag}")), "inc");
    for (stage, rows) in &a {
        assert_eq!(
            keys(rows),
            keys(&b[stage]),
            "{tag}: keys of {stage} differ from a fresh run"
        );
        assert_eq!(
            rows, &b[stage],
            "{tag}: rows of {stage} differ from a fresh run"
        );
    }
}

#[test]
fn add_remove_restore_a_point_matches_fresh_runs() {
    let ws = Workspace::new();
    let log = ws.path("log");
    ws.write("exp.toml", &experiment("[8]"));
    run(&ws, "exp.toml", "store", "out", &log);
    let first = log_lines(&log).len();
    let r = run_json(&ws.path("out"), "inc");
    assert_eq!(counts(&r, "train"), (1, 0, 0));
    // dense 1 + unstructured 2×2 + nm 2×2 + vnm 2×1×2 = 13
    assert_eq!(counts(&r, "prune"), (13, 0, 0));
    assert_eq!(counts(&r, "evaluate"), (13, 0, 0));
    fresh_equals(&ws, &experiment("[8]"), "a");

    // A second identical run executes nothing.
    run(&ws, "exp.toml", "store", "out", &log);
    assert_eq!(
        log_lines(&log).len(),
        first,
        "a no-op re-run computed something"
    );
    let r = run_json(&ws.path("out"), "inc");
    assert_eq!(counts(&r, "prune"), (0, 13, 0));

    // Add v = 16: only the vnm prunes/evals of V=16 and tunings of new structures run.
    let before = log_lines(&log).len();
    ws.write("exp.toml", &experiment("[8, 16]"));
    run(&ws, "exp.toml", "store", "out", &log);
    let new: Vec<String> = log_lines(&log)[before..].to_vec();
    let r = run_json(&ws.path("out"), "inc");
    assert_eq!(counts(&r, "train"), (0, 1, 0));
    assert_eq!(
        counts(&r, "prune"),
        (4, 13, 0),
        "only the 4 new vnm prunes execute"
    );
    assert_eq!(counts(&r, "evaluate"), (4, 13, 0));
    assert!(
        new.iter().all(|l| !l.starts_with("train")),
        "no training re-runs: {new:?}"
    );
    assert!(
        new.iter()
            .filter(|l| l.starts_with("prune"))
            .all(|l| l.contains("16:2:")),
        "{new:?}"
    );
    let tunes = counts(&r, "kernel_tune");
    assert_eq!(
        tunes.0 as usize,
        new.iter().filter(|l| l.starts_with("kernel_tune")).count()
    );
    assert!(tunes.0 > 0 && tunes.1 > 0);
    fresh_equals(&ws, &experiment("[8, 16]"), "b");

    // Remove it again: nothing executes, its rows leave every table and the front.
    let before = log_lines(&log).len();
    ws.write("exp.toml", &experiment("[8]"));
    run(&ws, "exp.toml", "store", "out", &log);
    assert_eq!(
        log_lines(&log).len(),
        before,
        "removing a point computed something"
    );
    let r = run_json(&ws.path("out"), "inc");
    assert_eq!(counts(&r, "prune"), (0, 13, 0));
    fresh_equals(&ws, &experiment("[8]"), "c");

    // Put it back: a store hit.
    ws.write("exp.toml", &experiment("[8, 16]"));
    run(&ws, "exp.toml", "store", "out", &log);
    assert_eq!(
        log_lines(&log).len(),
        before,
        "re-inserting a computed point recomputed it"
    );
    let r = run_json(&ws.path("out"), "inc");
    assert_eq!(counts(&r, "prune"), (0, 17, 0));
    fresh_equals(&ws, &experiment("[8, 16]"), "d");
}
