//! kill -9 loses nothing completed (and leaves nothing under the store's tmp/ after the next
//! run); two runs sharing a store never compute a key twice; a closed stdout or a worker's panic
//! never leaves a run hanging; a folder where the tables' link goes is kept.

use e2e::harness::{
    counts, exit_within, log_lines, run_json, stderr_of, tables, Workspace, ROB_EXPERIMENT,
    STAGE_TABLES,
};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cotune-test");

fn run(ws: &Workspace, store: &str, out: &str, extra: &[&str]) -> std::process::Output {
    ws.run_logged(BIN, store, out, extra)
}

#[test]
fn kill_9_loses_nothing_completed() {
    let ws = Workspace::new();
    ws.write("exp.toml", ROB_EXPERIMENT);
    let log = ws.path("s.log");
    let a = ws.run_args("s", "o");
    let mut child = Command::new(BIN)
        .args(&a)
        .env("COTUNE_TEST_LOG", &log)
        .env("COTUNE_TEST_SLEEP_MS", "60")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while log_lines(&log).len() < 8 && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let computed_before = log_lines(&log);
    assert!(computed_before.len() >= 8);
    // The store verifies clean: only whole entries are visible.
    let v = ws.cotune(
        BIN,
        &["store", "verify", "--store", ws.path("s").to_str().unwrap()],
        None,
    );
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    let entries_after_kill = String::from_utf8_lossy(&v.stdout).to_string();
    // Rerun: whatever completed (is in the store) is not recomputed.
    let o = run(&ws, "s", "o", &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = run_json(&ws.path("o"), "rob");
    let cached: u64 = STAGE_TABLES.iter().map(|s| counts(&r, s).1).sum();
    let stored: u64 = entries_after_kill
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        cached, stored,
        "every entry stored before the kill is a cache hit"
    );
    // The tables are whole and equal a fresh run.
    assert!(run(&ws, "fresh", "fo", &[]).status.success());
    assert_eq!(tables(&ws.path("o"), "rob"), tables(&ws.path("fo"), "rob"));
}

#[test]
fn concurrent_runs_never_compute_a_key_twice() {
    let ws = Workspace::new();
    ws.write("exp.toml", ROB_EXPERIMENT);
    let log = ws.path("s.log");
    let spawn = |out: &str| {
        Command::new(BIN)
            .args(ws.run_args("s", out))
            .env("COTUNE_TEST_LOG", &log)
            .env("COTUNE_TEST_SLEEP_MS", "20")
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    };
    let (mut a, mut b) = (spawn("oa"), spawn("ob"));
    assert!(a.wait().unwrap().success());
    assert!(b.wait().unwrap().success());
    let lines = log_lines(&log);
    let solo = Workspace::new();
    solo.write("exp.toml", ROB_EXPERIMENT);
    assert!(run(&solo, "s", "o", &[]).status.success());
    assert_eq!(
        lines.len(),
        log_lines(&solo.path("s.log")).len(),
        "each key computed exactly once"
    );
    assert_eq!(tables(&ws.path("oa"), "rob"), tables(&ws.path("ob"), "rob"));
}

// Regression: a run killed with kill -9 left its half-written entry under the store's tmp/.
#[test]
fn a_run_killed_mid_write_leaves_nothing_under_tmp_after_the_next_run() {
    let ws = Workspace::new();
    ws.write("exp.toml", ROB_EXPERIMENT);
    let log = ws.path("s.log");
    let mut child = Command::new(BIN)
        .args(ws.run_args("s", "o"))
        .env("COTUNE_TEST_LOG", &log)
        .env("COTUNE_TEST_SLEEP_MS", "3000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first stage logs when it starts writing, then sleeps inside its entry's tmp folder.
    let t0 = Instant::now();
    while log_lines(&log).is_empty() && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    let tmp = ws.path("s/tmp");
    let leftovers = || std::fs::read_dir(&tmp).unwrap().count();
    assert!(leftovers() > 0, "the kill did not land mid-write");
    assert!(run(&ws, "s", "o", &[]).status.success());
    assert_eq!(leftovers(), 0, "tmp/ still holds a dead run's entry");
}

// Regression: `cotune run … --workers 2 | head -1` hung forever: worker 0's `println!` panicked
// on the closed pipe and worker 1 waited for its progress (and `plan | head` panicked).
#[test]
fn a_closed_stdout_neither_hangs_nor_fails_a_run() {
    let ws = Workspace::new();
    ws.write("exp.toml", ROB_EXPERIMENT);
    let closed = |a: Vec<String>, what: &str| {
        let mut child = Command::new(BIN)
            .args(&a)
            .env_remove("COTUNE_TEST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take()); // the reader is gone before the first line
        let (status, _) = exit_within(&mut child, Duration::from_secs(120));
        let code = status.code().unwrap_or(-1);
        let err = stderr_of(&mut child);
        assert!(!err.contains("panicked"), "{what}: {err}");
        (code, err)
    };
    let mut a = ws.run_args("s", "o");
    a.extend(["--workers", "2"].map(String::from));
    let (code, err) = closed(a, "run --workers 2");
    assert_eq!(code, 0, "{err}");
    // The run completed: its results are published and a re-run computes nothing.
    assert!(run_json(&ws.path("o"), "rob").is_object());
    let again = run(&ws, "s", "o", &[]);
    assert!(again.status.success());
    let r = run_json(&ws.path("o"), "rob");
    assert!(STAGE_TABLES.iter().all(|s| counts(&r, s).0 == 0));
    let store = ws.path("s").display().to_string();
    let exp = ws.path("exp.toml").display().to_string();
    for cmd in [
        vec!["plan".to_string(), exp, "--store".into(), store.clone()],
        vec!["store".into(), "ls".into(), "--store".into(), store],
    ] {
        let (code, err) = closed(cmd.clone(), &cmd.join(" "));
        assert_eq!(code, 0, "{cmd:?}: {err}");
    }
}

/// A plan source whose end-of-epoch callback panics: a bug on worker 0 outside any stage.
struct PanicsAfterTheEpoch(Option<pipeline::plan::Plan>);

impl pipeline::driver::PlanSource for PanicsAfterTheEpoch {
    fn next(&mut self, _first: bool, _stopped: &dyn Fn() -> bool) -> Option<pipeline::plan::Plan> {
        self.0.take()
    }
    fn epoch_done(&mut self, _: &results::RunSummary, _: &[results::Row], _: u64) {
        panic!("a bug on worker 0");
    }
}

// A worker thread that panics outside a stage (whose panics are caught as failed instances)
// used to leave the other workers waiting forever for its progress. Here the driver's own code
// on worker 0 panics; a panic inside an operator is `pipeline::abort`'s unit test.
#[test]
fn a_panicking_worker_stops_the_others_and_the_run_reports_it() {
    use pipeline::driver::{execute, DriverError, Output};
    use std::sync::{Arc, RwLock};
    let ws = Workspace::new();
    let file = ws.write("exp.toml", ROB_EXPERIMENT);
    let table = e2e::table();
    let plan = pipeline::cli::load_plan(&file, &table).unwrap();
    let engine = Arc::new(pipeline::engine::Engine {
        store: pipeline::store::Store::open(&ws.path("s")).unwrap(),
        registry: Arc::new(RwLock::new(plan.nodes.clone())),
        measure: pipeline::store::MeasureLock::for_host(),
        experiment: plan.experiment.clone(),
        progress: pipeline::progress::Progress::new(true, table.names()),
        host: "localhost".into(),
        digest: RwLock::new(plan.digest()),
        later_rounds: None,
        table,
    });
    let cluster = pipeline::cluster::Cluster {
        workers: 2,
        processes: 1,
        process: 0,
        addresses: vec![],
        connect_timeout: Duration::from_secs(5),
        identity: String::new(),
    };
    let out = Output { out: ws.path("o") };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let r = execute(
            engine,
            &cluster,
            out,
            Box::new(PanicsAfterTheEpoch(Some(plan))),
        );
        drop(tx.send(r.map(|_| ())));
    });
    let r = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the other worker waited forever for the one that panicked");
    let err = r.expect_err("a worker panicked: the run must not report success");
    assert!(
        matches!(&err, DriverError::Worker(m) if m.contains("worker 0: a bug on worker 0")),
        "{err}"
    );
}

/// Regression: a real folder where the run's link to its tables goes (an older cotune's
/// tables, or a user's notes) was moved aside silently; it is kept and the run says where.
#[test]
fn a_folder_where_the_tables_link_goes_is_kept_and_announced() {
    let ws = Workspace::new();
    ws.write("exp.toml", ROB_EXPERIMENT);
    std::fs::create_dir_all(ws.path("o/rob")).unwrap();
    ws.write("o/rob/notes.txt", "mine");
    let out = run(&ws, "s", "o", &[]);
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let aside = stderr
        .lines()
        .find_map(|l| {
            l.split_once("moved it to ")
                .map(|(_, p)| p.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no note of the move in {stderr}"));
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&aside).join("notes.txt")).unwrap(),
        "mine"
    );
    assert!(!tables(&ws.path("o"), "rob")["prune"].is_empty());
    // The next run finds cotune's own link there and says nothing.
    let again = run(&ws, "s", "o", &[]);
    assert!(!String::from_utf8_lossy(&again.stderr).contains("moved it to"));
}
