//! A stage added in one module plus one line of the table (`e2e::summary`) is planned, keyed,
//! run through the store, written as its own table and re-run incrementally like the others.

use e2e::harness::{counts, keys, run_json, small_experiment, strip, Workspace};
use results::Value;

fn experiment(v: &str) -> String {
    small_experiment("sum", v, "[kernel_tune]\nbatch_tokens = [16]\n")
}

fn run(ws: &Workspace) -> u8 {
    let path = |p: &str| ws.path(p).display().to_string();
    let args = [
        "cotune".to_owned(),
        "run".to_owned(),
        path("exp.toml"),
        "--store".to_owned(),
        path("s"),
        "--out".to_owned(),
        path("o"),
        "-q".to_owned(),
    ];
    pipeline::cli::main_with(args, |_| e2e::table_with_summary())
}

fn table(ws: &Workspace, stage: &str) -> Vec<results::Row> {
    let dir = results::current(&ws.path("o"), "sum").unwrap();
    strip(results::read_table(&dir.join(stage)).unwrap())
}

#[test]
fn a_stage_added_in_one_module_runs_like_the_others() {
    let ws = Workspace::new();
    ws.write("exp.toml", &experiment("[8]"));
    assert_eq!(run(&ws), 0);
    let evals = table(&ws, "evaluate");
    let sums = table(&ws, "summary");
    assert_eq!(sums.len(), evals.len());
    assert_eq!(
        counts(&run_json(&ws.path("o"), "sum"), "summary"),
        (2, 0, 0)
    );
    // Each summary row names its evaluation, inherits the config columns up the chain, and
    // holds what its run computed from the evaluation's metrics.
    for s in &sums {
        let Some(Value::Str(ek)) = s.get("evaluate_key") else {
            panic!("no evaluate_key: {s:?}")
        };
        let e = evals
            .iter()
            .find(|e| e.get("key") == Some(&Value::Str(ek.clone())))
            .unwrap();
        let f = |r: &results::Row, c: &str| r.get(c).and_then(Value::as_f64).unwrap();
        let want = f(e, "accuracy") / (f(e, "weight_bytes") / 1024.0);
        assert_eq!(f(s, "accuracy_per_unit"), want);
        assert_eq!(s.get("prune.pattern"), e.get("prune.pattern"));
        assert_eq!(s.get("summary.per_bytes"), Some(&Value::I64(1024)));
    }
    // Incremental: a re-run computes nothing; a new point computes only its own summary.
    assert_eq!(run(&ws), 0);
    assert_eq!(
        counts(&run_json(&ws.path("o"), "sum"), "summary"),
        (0, 2, 0)
    );
    ws.write("exp.toml", &experiment("[8, 16]"));
    assert_eq!(run(&ws), 0);
    assert_eq!(
        counts(&run_json(&ws.path("o"), "sum"), "summary"),
        (1, 2, 0)
    );
    assert_eq!(keys(&table(&ws, "summary")).len(), 3);
}
