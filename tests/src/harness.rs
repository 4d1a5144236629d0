//! Helpers for end-to-end tests: run the test binary, read tables back, compare runs.

use results::{Row, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output};
use std::time::{Duration, Instant};

/// Columns that differ between runs by design (provenance, and how busy the machine was while
/// a stage measured), left out of comparisons.
pub const PROVENANCE: [&str; 7] = [
    "host",
    "worker",
    "started_at",
    "duration_s",
    "cached",
    "cotune_version",
    "cpu_wait",
];

/// A small experiment on synthetic data (100 samples, 16 features, 4 classes; a 32-wide MLP
/// trained one epoch) pruned to dense and 2:8 V:N:M with V = `v` (a TOML value: `8` or
/// `[8, 16]`), followed by `extra` TOML.
pub fn small_experiment(name: &str, v: &str, extra: &str) -> String {
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
lr = 1e-3
[prune]
pattern = ["dense", "vnm"]
nm = ["2:8"]
v = {v}
{extra}"#
    )
}

/// The robustness tests' experiment (`rob`): synthetic data, two learning rates, five
/// patterns at two sparsities, one tuning batch size: 30-odd instances of every stage kind.
pub const ROB_EXPERIMENT: &str = r#"
name = "rob"
seed = 5
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
lr = [1e-3, 3e-3]
[prune]
pattern = ["dense", "unstructured", "nm", "vnm", "vector"]
sparsity = [0.5, 0.75]
v = [8]
method = ["magnitude"]
[kernel_tune]
batch_tokens = [16]
"#;

/// Every file under `dir`, recursively.
pub fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Waits for a child to exit, at most `limit`; kills it and fails the test past that.
pub fn exit_within(child: &mut Child, limit: Duration) -> (ExitStatus, Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status, t0.elapsed());
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("the process did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What a child wrote to its (piped) stderr.
pub fn stderr_of(child: &mut Child) -> String {
    let mut s = String::new();
    use std::io::Read;
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// A scratch workspace: an experiment file, a store and an output folder.
pub struct Workspace {
    /// Keeps the folder alive.
    pub dir: tempfile::TempDir,
}

impl Workspace {
    /// A new empty workspace.
    pub fn new() -> Self {
        Workspace {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// Path inside the workspace.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Writes a file in the workspace.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::write(&p, text).expect("write");
        p
    }

    /// Runs `cotune-test` (binary at `bin`) with `args`, the store at `store` and out at `out`.
    pub fn cotune(&self, bin: &str, args: &[&str], log: Option<&Path>) -> Output {
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .env_remove("COTUNE_STORE")
            .env_remove("COTUNE_TEST_SLEEP_MS");
        match log {
            Some(l) => cmd.env("COTUNE_TEST_LOG", l),
            None => cmd.env_remove("COTUNE_TEST_LOG"),
        };
        cmd.output().expect("run cotune-test")
    }

    /// `cotune plan FILE --store STORE` (`store` inside the workspace).
    pub fn plan(&self, bin: &str, file: &Path, store: &str) -> Output {
        let s = self.path(store);
        let args = [
            "plan",
            file.to_str().expect("utf-8 path"),
            "--store",
            s.to_str().expect("utf-8 path"),
        ];
        self.cotune(bin, &args, None)
    }

    /// `cotune run FILE --store STORE --out OUT -q EXTRA…` (paths inside the workspace).
    pub fn run(&self, bin: &str, file: &str, store: &str, out: &str, extra: &[&str]) -> Output {
        let (f, s, o) = (self.path(file), self.path(store), self.path(out));
        let mut args = vec![
            "run",
            f.to_str().expect("utf-8 path"),
            "--store",
            s.to_str().expect("utf-8 path"),
            "--out",
            o.to_str().expect("utf-8 path"),
            "-q",
        ];
        args.extend(extra);
        self.cotune(bin, &args, None)
    }

    /// The arguments of `cotune run exp.toml --store STORE --out OUT -q` (paths inside the
    /// workspace).
    pub fn run_args(&self, store: &str, out: &str) -> Vec<String> {
        vec![
            "run".into(),
            self.path("exp.toml").display().to_string(),
            "--store".into(),
            self.path(store).display().to_string(),
            "--out".into(),
            self.path(out).display().to_string(),
            "-q".into(),
        ]
    }

    /// `cotune run exp.toml …` (as [`Self::run_args`], then `extra`), the keys it computes
    /// logged to `STORE.log` in the workspace.
    pub fn run_logged(&self, bin: &str, store: &str, out: &str, extra: &[&str]) -> Output {
        let mut a = self.run_args(store, out);
        a.extend(extra.iter().map(|s| s.to_string()));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        self.cotune(bin, &a, Some(&self.path(&format!("{store}.log"))))
    }
}

impl Default for Workspace {
    fn default() -> Self {
        Self::new()
    }
}

/// The stage tables of the test stages' output, in pipeline order.
pub const STAGE_TABLES: [&str; 6] = [
    "dataset",
    "train",
    "prune",
    "calibrate",
    "kernel_tune",
    "evaluate",
];

/// Reads every table of an experiment's output, provenance columns removed, rows sorted. The
/// experiment's link is resolved once, so all tables are of one published step.
pub fn tables(out: &Path, experiment: &str) -> BTreeMap<String, Vec<Row>> {
    let dir = results::current(out, experiment).expect("a published generation");
    let mut t = BTreeMap::new();
    for stage in [
        "dataset",
        "train",
        "prune",
        "calibrate",
        "kernel_tune",
        "evaluate",
    ] {
        t.insert(
            stage.to_owned(),
            strip(results::read_table(&dir.join(stage)).expect("read table")),
        );
    }
    t.insert(
        "pareto".into(),
        strip(results::read_table(&dir.join("pareto.parquet")).expect("read pareto")),
    );
    t
}

/// Removes provenance columns and sorts.
pub fn strip(rows: Vec<Row>) -> Vec<Row> {
    let mut rows: Vec<Row> = rows
        .into_iter()
        .map(|mut r| {
            for c in PROVENANCE {
                r.remove(c);
            }
            r.retain(|_, v| !v.is_null());
            r
        })
        .collect();
    rows.sort();
    rows
}

/// The `run.json` of an experiment as JSON.
pub fn run_json(out: &Path, experiment: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(out.join(experiment).join("run.json")).expect("run.json");
    serde_json::from_str(&text).expect("run.json parses")
}

/// (executed, cached, failed) of a stage in `run.json`.
pub fn counts(run: &serde_json::Value, stage: &str) -> (u64, u64, u64) {
    let s = &run["stages"][stage];
    (
        s["executed"].as_u64().unwrap_or(0),
        s["cached"].as_u64().unwrap_or(0),
        s["failed"].as_u64().unwrap_or(0),
    )
}

/// Lines of a computation log.
pub fn log_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .map(|t| t.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// The set of keys in a table.
pub fn keys(rows: &[Row]) -> Vec<String> {
    let mut k: Vec<String> = rows
        .iter()
        .filter_map(|r| match r.get("key") {
            Some(Value::Str(s)) => Some(s.clone()),
            _ => None,
        })
        .collect();
    k.sort();
    k.dedup();
    k
}
