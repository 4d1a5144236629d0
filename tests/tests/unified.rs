//! The unified search on the deterministic test stages: a search continued with a bigger
//! budget equals a fresh search with that budget (same trials, same tables, same rounds); a
//! finished search re-run computes nothing; one and two workers, and a two-process cluster,
//! choose the same trials; every
//! trial row says its round, predictions and reason; bad `[search]` input is refused at
//! `path:line:col`; unmet constraints exit 1 naming the best trial found.

use e2e::harness::{counts, log_lines, run_json, strip, tables, Workspace, STAGE_TABLES};
use results::{Row, Value};

const BIN: &str = env!("CARGO_BIN_EXE_cotune-test");

fn experiment(search: &str) -> String {
    format!(
        r#"
name = "uni"
seed = 5
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
pattern = ["dense", "unstructured", "nm", "vnm", "vector"]
sparsity = [0.5, 0.75]
v = [8]
method = ["magnitude", "obs"]
finetune_epochs = 2
[kernel_tune]
batch_tokens = [8]
budget = 4
[evaluate]
batch_sizes = [1, 8]
[search]
strategy = "unified"
{search}
"#
    )
}

fn ok(o: &std::process::Output) {
    assert!(
        o.status.success(),
        "run failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs `file` on `store` into `out`, logging what the stages compute into `log`.
fn run_logged(ws: &Workspace, file: &str, store: &str, out: &str, log: &std::path::Path) {
    let (f, s, o) = (ws.path(file), ws.path(store), ws.path(out));
    let args = [
        "run",
        f.to_str().unwrap(),
        "--store",
        s.to_str().unwrap(),
        "--out",
        o.to_str().unwrap(),
        "-q",
    ];
    ok(&ws.cotune(BIN, &args, Some(log)));
}

fn search_rows(ws: &Workspace, out: &str) -> Vec<Row> {
    let dir = results::current(&ws.path(out), "uni").expect("published");
    results::read_table(&dir.join("search.parquet")).expect("search.parquet")
}

/// Tables without provenance, and the search's round table.
fn outputs_of(
    ws: &Workspace,
    out: &str,
) -> (std::collections::BTreeMap<String, Vec<Row>>, Vec<Row>) {
    (tables(&ws.path(out), "uni"), search_rows(ws, out))
}

fn n(r: &Row, c: &str) -> Option<f64> {
    match r.get(c) {
        Some(Value::I64(x)) => Some(*x as f64),
        Some(Value::F64(x)) => Some(*x),
        _ => None,
    }
}

fn s(r: &Row, c: &str) -> String {
    match r.get(c) {
        Some(Value::Str(x)) => x.clone(),
        other => format!("{other:?}"),
    }
}

#[test]
fn a_bigger_budget_continues_the_search_and_equals_a_fresh_one() {
    let ws = Workspace::new();
    ws.write(
        "small.toml",
        &experiment("budget_epochs = 4\nper_round = 2"),
    );
    ws.write("big.toml", &experiment("budget_epochs = 8\nper_round = 2"));
    ok(&ws.run(BIN, "small.toml", "store", "out", &[]));
    let small = search_rows(&ws, "out");
    let log = ws.path("log");
    run_logged(&ws, "big.toml", "store", "out", &log);
    ok(&ws.run(BIN, "big.toml", "fresh-store", "fresh", &[]));
    let (inc, inc_search) = outputs_of(&ws, "out");
    let (fresh, fresh_search) = outputs_of(&ws, "fresh");
    for stage in ["prune", "kernel_tune", "evaluate", "pareto"] {
        assert_eq!(inc[stage], fresh[stage], "{stage} differs");
    }
    let strip_cached = |rows: Vec<Row>| strip(rows);
    assert_eq!(strip_cached(inc_search.clone()), strip_cached(fresh_search));
    // The continued search re-ran its first rounds from the store and computed only the new.
    let trained = log_lines(&log)
        .iter()
        .filter(|l| l.starts_with("train"))
        .count();
    assert_eq!(trained, 0, "the training was cached");
    let evaluated = log_lines(&log)
        .iter()
        .filter(|l| l.starts_with("evaluate"))
        .count();
    let trials = |rows: &[Row]| rows.last().and_then(|r| n(r, "trials_total")).unwrap() as usize;
    assert_eq!(evaluated, trials(&inc_search) - trials(&small));
    assert!(
        trials(&inc_search) > trials(&small),
        "a bigger budget ran more trials"
    );
    // Each round's rows: budget used within the budget, a hypervolume, a stop on the last.
    let last = inc_search.last().unwrap();
    assert!(n(last, "budget_epochs_used").unwrap() <= 8.0);
    assert!(n(last, "hypervolume").unwrap() > 0.0);
    assert!(matches!(last.get("stop"), Some(Value::Str(_))));
    // Every evaluated trial says which round chose it and why.
    for r in &inc["evaluate"] {
        assert!(r.contains_key("search.round"), "{r:?}");
        assert!(!s(r, "search.reason").is_empty());
        if s(r, "prune.pattern") != "dense" {
            assert!(n(r, "search.predicted_accuracy").is_some());
        }
    }
    // The proxies are prunings only: never evaluated.
    let proxies: Vec<&Row> = inc["prune"]
        .iter()
        .filter(|r| s(r, "search.role") == "proxy")
        .collect();
    assert!(!proxies.is_empty());
    let run = run_json(&ws.path("out"), "uni");
    let search = &run["extra"]["search"];
    assert!(search["grid"]["trials"].as_f64().unwrap() > 1.0);
    assert_eq!(
        search["budget_epochs_used"].as_u64(),
        n(last, "budget_epochs_used").map(|x| x as u64)
    );
    assert!(search["hypervolume"].as_f64().unwrap() > 0.0);
}

#[test]
fn a_finished_search_rerun_computes_nothing_and_workers_agree() {
    let ws = Workspace::new();
    ws.write("e.toml", &experiment("budget_epochs = 6\nper_layer = true"));
    ok(&ws.run(BIN, "e.toml", "store", "out", &[]));
    let log = ws.path("log");
    run_logged(&ws, "e.toml", "store", "out2", &log);
    assert!(
        log_lines(&log).is_empty(),
        "re-run computed: {:?}",
        log_lines(&log)
    );
    let run = run_json(&ws.path("out2"), "uni");
    for stage in STAGE_TABLES {
        assert_eq!(counts(&run, stage).0, 0, "{stage} executed on a re-run");
    }
    ok(&ws.run(BIN, "e.toml", "store2", "out3", &["--workers", "2"]));
    let (one, one_search) = outputs_of(&ws, "out");
    let (two, two_search) = outputs_of(&ws, "out3");
    for stage in ["prune", "kernel_tune", "evaluate", "pareto"] {
        assert_eq!(one[stage], two[stage], "{stage} differs with 2 workers");
    }
    assert_eq!(strip(one_search), strip(two_search));
    // A per-layer search plans per-layer points: some trial's layers take different patterns.
    // The patterns a row's layers take other than dense (a uniform point keeps the layers
    // its pattern does not fit dense, so dense alone makes no mix).
    let sparse_patterns = |r: &Row| -> std::collections::BTreeSet<String> {
        match r.get("prune.layer_patterns") {
            Some(Value::ListStr(l)) => l
                .iter()
                .map(|x| x.split_once('=').map_or("", |p| p.1).to_owned())
                .filter(|p| p != "dense")
                .collect(),
            _ => Default::default(),
        }
    };
    let mixes = |r: &Row| sparse_patterns(r).len() > 1;
    let mixed = one["prune"]
        .iter()
        .filter(|r| s(r, "search.role") == "trial")
        .any(mixes);
    assert!(mixed, "no trial mixes patterns: {:?}", one["prune"]);
    // Regression: such rows said their base pattern (`prune.pattern = vector`, its V and
    // sparsity), so that the report labelled three different models alike. Rows that mix
    // patterns say `per-layer` with no one pattern's fields; the others take one pattern.
    for stage in ["prune", "evaluate", "pareto"] {
        for r in &one[stage] {
            if mixes(r) {
                assert_eq!(s(r, "prune.pattern"), "per-layer", "{stage}: {r:?}");
                for c in ["prune.n", "prune.m", "prune.v", "prune.sparsity"] {
                    assert!(
                        matches!(r.get(c), None | Some(Value::Null)),
                        "{stage} {c}: {r:?}"
                    );
                }
            } else if s(r, "prune.pattern") != "per-layer" {
                let kind = |p: &String| p.split(' ').next().unwrap_or("").to_owned();
                let kinds: std::collections::BTreeSet<String> =
                    sparse_patterns(r).iter().map(kind).collect();
                assert!(
                    kinds.iter().all(|k| *k == s(r, "prune.pattern")),
                    "{stage}: {r:?}"
                );
            }
        }
    }
}

fn refused(ws: &Workspace, search: &str, model: Option<&str>, want: &str) {
    let mut text = experiment(search);
    if let Some(m) = model {
        text = text.replace("hidden = [32, 32]", m);
    }
    refused_text(ws, &text, want);
}

fn refused_text(ws: &Workspace, text: &str, want: &str) {
    ws.write("bad.toml", text);
    let o = ws.run(BIN, "bad.toml", "store", "out", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.toml:") && err.contains(want), "{err}");
}

#[test]
fn bad_search_input_is_refused_at_its_place() {
    let ws = Workspace::new();
    refused(&ws, "budget_epochs = 1", None, "smaller than one fine-tune");
    refused(&ws, "", None, "needs `budget_epochs`");
    // One layer (the classifier, 4 rows: V = 8 fits it nowhere, so the space is unstructured
    // and N:M only; a point that prunes no layer is refused before the search looks).
    refused_text(
        &ws,
        &experiment("budget_epochs = 4\nper_layer = true")
            .replace("hidden = [32, 32]", "hidden = []")
            .replace("\"nm\", \"vnm\", \"vector\"]", "\"nm\"]"),
        "two or more prunable layers",
    );
    refused(
        &ws,
        "budget_epochs = 4",
        Some("hidden = []"),
        "prunes no layer of the model (fc0: ",
    );
    refused(
        &ws,
        "budget_epochs = 4\nbatch_size = 3",
        None,
        "not one of [evaluate]",
    );
    // Batch 4 is evaluated but not tuned (8 is within 4x of it): the search would have no
    // tunings at its batch size.
    let evaluated_4 =
        |s: &str| experiment(s).replace("batch_sizes = [1, 8]", "batch_sizes = [1, 4, 8]");
    ws.write(
        "four.toml",
        &evaluated_4("budget_epochs = 4\nbatch_size = 4"),
    );
    let o = ws.run(BIN, "four.toml", "store", "out", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("batch_size = 4 is not tuned: the tuning at batch 8")
            && err.contains("add 4 to [kernel_tune] batch_tokens"),
        "{err}"
    );
    // The tuning named is the one evaluations use: the nearest, here batch 1, which is tuned
    // because no declared size is within 4x of it.
    ws.write(
        "two.toml",
        &experiment("budget_epochs = 4\nbatch_size = 2")
            .replace("batch_sizes = [1, 8]", "batch_sizes = [1, 2, 8]"),
    );
    let o = ws.run(BIN, "two.toml", "store", "out", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("batch_size = 2 is not tuned: the tuning at batch 1"),
        "{err}"
    );
    // Regression: batch 1 is tuned because the evaluation needs it (no tuning within 4x), so a
    // search at batch 1 is valid though batch_tokens does not list it (it was refused).
    let one = ws.write(
        "one.toml",
        &evaluated_4("budget_epochs = 4\nbatch_size = 1"),
    );
    let o = ws.plan(BIN, &one, "store");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    ws.write(
        "grid.toml",
        &experiment("budget_epochs = 4").replace("\"unified\"", "\"grid\""),
    );
    let o = ws.run(BIN, "grid.toml", "store", "out", &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("applies to strategy = \"unified\" only"));
}

#[test]
fn unmet_constraints_complete_the_run_and_exit_1_naming_the_best() {
    let ws = Workspace::new();
    ws.write(
        "c.toml",
        &experiment("budget_epochs = 4\nmin_accuracy = 0.999\nmin_speedup = 50.0"),
    );
    let o = ws.run(BIN, "c.toml", "store", "out", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("min_accuracy = 0.999: best accuracy"), "{err}");
    assert!(err.contains("min_speedup = 50: best speedup"), "{err}");
    assert!(!search_rows(&ws, "out").is_empty());
}

#[test]
fn plan_shows_round_zero_and_says_later_rounds_depend_on_results() {
    let ws = Workspace::new();
    let f = ws.write("p.toml", &experiment("budget_epochs = 4"));
    let o = ws.plan(BIN, &f, "store");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("round 0") && out.contains("later rounds depend on its results"),
        "{out}"
    );
    assert!(out.contains("The grid of this space runs"), "{out}");
}

#[test]
fn store_gc_keeps_every_round_of_a_unified_search() {
    let ws = Workspace::new();
    let f = ws.write("e.toml", &experiment("budget_epochs = 6\nper_layer = true"));
    ws.write(
        "other.toml",
        &experiment("budget_epochs = 4").replace("seed = 5", "seed = 6"),
    );
    ok(&ws.run(BIN, "e.toml", "store", "out", &[]));
    ok(&ws.run(BIN, "other.toml", "store", "out", &[]));
    let store = ws.path("store");
    let o = ws.cotune(
        BIN,
        &[
            "store",
            "gc",
            "--keep",
            f.to_str().unwrap(),
            "--store",
            store.to_str().unwrap(),
        ],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        !String::from_utf8_lossy(&o.stdout).starts_with("removed 0 "),
        "the other search was kept"
    );
    let log = ws.path("log");
    run_logged(&ws, "e.toml", "store", "out2", &log);
    assert!(
        log_lines(&log).is_empty(),
        "gc dropped some of the search: {:?}",
        log_lines(&log)
    );
}

/// A search killed with kill -9 in a later round loses nothing completed: the re-run finds
/// every stored entry cached and ends as a fresh search does.
#[test]
fn a_killed_search_resumes_and_ends_as_a_fresh_one() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let ws = Workspace::new();
    let f = ws.write("k.toml", &experiment("budget_epochs = 6\nper_round = 1"));
    let log = ws.path("k.log");
    let (s, o) = (ws.path("store"), ws.path("out"));
    let args = [
        "run",
        f.to_str().unwrap(),
        "--store",
        s.to_str().unwrap(),
        "--out",
        o.to_str().unwrap(),
        "-q",
    ];
    let mut child = Command::new(BIN)
        .args(args)
        .env("COTUNE_TEST_LOG", &log)
        .env("COTUNE_TEST_SLEEP_MS", "20")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let evaluated = || {
        log_lines(&log)
            .iter()
            .filter(|l| l.starts_with("evaluate"))
            .count()
    };
    let t0 = Instant::now();
    // The dense reference is round 0's one evaluation: wait for round 1's.
    while evaluated() < 2 && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        evaluated() >= 2,
        "the search reached round 1 before the kill"
    );
    let v = ws.cotune(
        BIN,
        &["store", "verify", "--store", s.to_str().unwrap()],
        None,
    );
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    let stored: u64 = String::from_utf8_lossy(&v.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    ok(&ws.run(BIN, "k.toml", "store", "out", &[]));
    let run = run_json(&o, "uni");
    let cached: u64 = STAGE_TABLES.iter().map(|st| counts(&run, st).1).sum();
    assert_eq!(
        cached, stored,
        "every entry stored before the kill is a cache hit"
    );
    ok(&ws.run(BIN, "k.toml", "fresh-store", "fresh", &[]));
    let (a, a_search) = outputs_of(&ws, "out");
    let (b, b_search) = outputs_of(&ws, "fresh");
    for stage in ["prune", "kernel_tune", "evaluate", "pareto"] {
        assert_eq!(a[stage], b[stage], "{stage} differs from a fresh search");
    }
    assert_eq!(strip(a_search), strip(b_search));
}

// Regression: in a cluster, the processes other than 0 were never given the later rounds'
// plans, and every instance sent to them failed ("not in the plan"); a search in a cluster was
// then refused. The other processes now plan the rounds again from the shared store.
#[test]
fn a_search_in_a_cluster_equals_one_in_one_process() {
    let ws = Workspace::new();
    ws.write(
        "exp.toml",
        &experiment("budget_epochs = 6\nper_layer = true"),
    );
    ok(&ws.run(BIN, "exp.toml", "one", "out1", &[]));
    let port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    ws.write(
        "hosts",
        &format!("127.0.0.1:{}\n127.0.0.1:{}\n", port(), port()),
    );
    let hosts = ws.path("hosts").display().to_string();
    let outputs: Vec<std::process::Output> = std::thread::scope(|s| {
        let runs: Vec<_> = ["0", "1"]
            .map(|i| {
                let (ws, hosts) = (&ws, &hosts);
                s.spawn(move || {
                    let extra = ["--processes", "2", "--process", i, "--hostfile", hosts];
                    ws.run_logged(BIN, "two", "out2", &extra)
                })
            })
            .into_iter()
            .collect();
        runs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for o in &outputs {
        ok(o);
    }
    let (one, one_search) = outputs_of(&ws, "out1");
    let (two, two_search) = outputs_of(&ws, "out2");
    for stage in ["prune", "kernel_tune", "evaluate", "pareto"] {
        assert_eq!(one[stage], two[stage], "{stage} differs in a cluster");
    }
    assert_eq!(strip(one_search), strip(two_search));
    // Process 1 ran instances of the later rounds (its worker is worker 1).
    let dir = results::current(&ws.path("out2"), "uni").expect("published");
    let prune = results::read_table(&dir.join("prune")).expect("prune table");
    let later_on_1 = prune
        .iter()
        .filter(|r| n(r, "search.round").is_some_and(|x| x >= 1.0))
        .filter(|r| n(r, "worker") == Some(1.0))
        .count();
    assert!(later_on_1 > 0, "process 1 ran no later round: {prune:?}");
    // Every part carries the last round's plan digest, process 1's as process 0's.
    let digest = |path: &std::path::Path| {
        results::read_metadata(path).expect("metadata")["experiment_digest"].clone()
    };
    let last = digest(&dir.join("pareto.parquet"));
    for stage in ["prune", "kernel_tune", "evaluate"] {
        for part in std::fs::read_dir(dir.join(stage)).unwrap() {
            let part = part.unwrap().path();
            assert_eq!(digest(&part), last, "{}", part.display());
        }
    }
}
