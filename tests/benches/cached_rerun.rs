//! Wall time of a no-op re-run (every instance cached): a ~1,000-instance experiment with the
//! test stages, and the quickstart with the real stages. Run with
//! `cargo bench -p e2e --bench cached_rerun`; prints the median of several re-runs.

use pipeline::stage::StageTable;
use std::path::Path;
use std::time::Instant;

const BIG: &str = r#"
name = "thousand"
seed = 1
[dataset]
source = "synthetic"
samples = 100
features = 32
classes = 4
[model]
kind = "mlp"
hidden = [64, 64]
[train]
epochs = 1
batch_size = 8
lr = [1e-3, 2e-3, 3e-3, 4e-3, 5e-3]
[prune]
pattern = ["dense", "unstructured", "nm", "vnm", "vector"]
sparsity = [0.5, 0.75, 0.875]
nm = ["2:4", "2:8", "2:16"]
v = [8, 16, 32]
method = ["magnitude", "obs"]
schedule = ["oneshot", "gradual"]
[kernel_tune]
batch_tokens = [16, 64]
budget = 2
"#;

/// Times one `cotune run`, which must succeed: a failed instance is not stored, so every
/// re-run would compute it again and time work, not a no-op.
fn run(args: &[&str], stages: fn(&Path) -> StageTable) -> f64 {
    let t = Instant::now();
    let code = pipeline::cli::main_with(args.iter().map(|s| s.to_string()), stages);
    assert_eq!(
        code, 0,
        "the run failed (exit code {code}): nothing to time"
    );
    t.elapsed().as_secs_f64()
}

/// What the last run of `experiment` computed, over its stages: (executed, cached).
fn counts(out: &Path, experiment: &str) -> (u64, u64) {
    let run = e2e::harness::run_json(out, experiment);
    let stages = run["stages"].as_object().expect("run.json stages");
    stages.keys().fold((0, 0), |(e, c), stage| {
        let (executed, cached, _) = e2e::harness::counts(&run, stage);
        (e + executed, c + cached)
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bench(name: &str, file: &str, dir: &std::path::Path, stages: fn(&Path) -> StageTable) {
    let store = dir.join("store").display().to_string();
    let out = dir.join("out").display().to_string();
    let args = [
        "cotune", "run", file, "--store", &store, "--out", &out, "-q",
    ];
    let first = run(&args, stages);
    let table = stages(&dir.join("store"));
    let plan = pipeline::cli::load_plan(Path::new(file), &table).expect("plan");
    let reruns: Vec<f64> = (0..5)
        .map(|_| {
            let t = run(&args, stages);
            // A no-op: every instance from the store, none computed.
            let (executed, cached) = counts(&dir.join("out"), &plan.experiment);
            assert_eq!(executed, 0, "a re-run computed {executed} instance(s)");
            assert!(cached > 0, "a re-run found nothing in the store");
            t
        })
        .collect();
    println!(
        "{name}: {} instances; first run {first:.2} s; no-op re-run median {:.3} s (min {:.3}, max {:.3}) over {} runs",
        plan.nodes.len(),
        median(reruns.clone()),
        reruns.iter().cloned().fold(f64::INFINITY, f64::min),
        reruns.iter().cloned().fold(0.0, f64::max),
        reruns.len()
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let big = dir.path().join("big.toml");
    std::fs::write(&big, BIG).expect("write");
    bench(
        "test stages, 1k experiment",
        big.to_str().unwrap(),
        &dir.path().join("big"),
        |_| e2e::table(),
    );
    let quick = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../experiments/quickstart.toml"
    );
    if std::env::args().any(|a| a == "--with-quickstart") {
        bench(
            "real stages, quickstart",
            quick,
            &dir.path().join("quick"),
            pipeline::real::table,
        );
    } else {
        println!("(pass --with-quickstart to also time the quickstart; it trains and tunes first, ~1 min)");
    }
}
