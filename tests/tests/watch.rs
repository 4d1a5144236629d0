//! `cotune watch`: each save of the file is applied as insertions and retractions, and the
//! tables follow the current experiment.

use e2e::harness::{keys, small_experiment, tables, Workspace, STAGE_TABLES};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cotune-test");

fn exp(v: &str) -> String {
    small_experiment("w", v, "")
}

fn wait_for(mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(60), "timed out");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn prune_keys(ws: &Workspace) -> usize {
    std::panic::catch_unwind(|| keys(&tables(&ws.path("out"), "w")["prune"]).len()).unwrap_or(0)
}

/// Starts `cotune watch` on `file` with the workspace's store and output folder, its messages
/// in the workspace's `watch.log`.
fn watch(ws: &Workspace, file: &std::path::Path) -> std::process::Child {
    let log = std::fs::File::create(ws.path("watch.log")).unwrap();
    Command::new(BIN)
        .args([
            "watch",
            file.to_str().unwrap(),
            "--store",
            ws.path("s").to_str().unwrap(),
            "--out",
            ws.path("out").to_str().unwrap(),
            "-q",
        ])
        .env_remove("COTUNE_TEST_LOG")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

#[test]
fn watch_applies_each_save() {
    let ws = Workspace::new();
    let f = ws.write("exp.toml", &exp("[8]"));
    let mut child = watch(&ws, &f);
    wait_for(|| prune_keys(&ws) == 2);
    std::thread::sleep(Duration::from_millis(400));
    ws.write("exp.toml", &exp("[8, 16]"));
    wait_for(|| prune_keys(&ws) == 3);
    ws.write("exp.toml", "name = \"w\"\n[dataset\n"); // a broken save is reported and ignored
    std::thread::sleep(Duration::from_millis(800));
    // So is a save that makes it a unified search (it was run as a grid: two prune keys).
    let search =
        "[evaluate]\nbatch_sizes = [64]\n[search]\nstrategy = \"unified\"\nbudget_epochs = 1\n";
    ws.write("exp.toml", &small_experiment("w", "[16]", search));
    let log = || std::fs::read_to_string(ws.path("watch.log")).unwrap_or_default();
    wait_for(|| log().contains("watch does not run a unified search"));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        prune_keys(&ws),
        3,
        "a unified search must not run under watch"
    );
    ws.write("exp.toml", &exp("[16]"));
    // The watched state converges to a fresh run of the final file. (The tables are written one
    // after another, so the prune table can already show the final keys while the later tables
    // still hold the previous state: wait for all of them, not for one.)
    let o = ws.cotune(
        BIN,
        &[
            "run",
            f.to_str().unwrap(),
            "--store",
            ws.path("fresh").to_str().unwrap(),
            "--out",
            ws.path("fresh-out").to_str().unwrap(),
            "-q",
        ],
        None,
    );
    assert!(o.status.success());
    let fresh = tables(&ws.path("fresh-out"), "w");
    let watched = || std::panic::catch_unwind(|| tables(&ws.path("out"), "w")).ok();
    let t0 = Instant::now();
    while watched().as_ref() != Some(&fresh) && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(watched(), Some(fresh));
    // The save that dropped v = 8 says what it removed; the one that added v = 16 removed none.
    let said: Vec<String> = log()
        .lines()
        .filter(|l| l.contains("changed: applying"))
        .map(String::from)
        .collect();
    assert!(!said[0].contains("removed"), "{said:?}");
    assert!(
        said.last()
            .unwrap()
            .contains("(no longer in it, removed or replaced: ")
            && said.last().unwrap().contains(" 1 prune"),
        "{said:?}"
    );
}

/// The generation every table of a published step carries, or an error naming the mix.
fn one_step(out: &std::path::Path) -> Result<Option<String>, String> {
    let Ok(dir) = results::current(out, "w") else {
        return Ok(None); // nothing published yet
    };
    let run = results::read_run_json(&dir.join("run.json")).map_err(|e| e.to_string())?;
    let generation = run.extra.get("generation").and_then(|g| g.as_str());
    let want = (
        generation.map(str::to_owned),
        Some(run.experiment_digest.clone()),
    );
    let mut files = vec![dir.join("pareto.parquet"), dir.join("kernel_best.parquet")];
    for stage in STAGE_TABLES {
        files.extend(results::table_files(&dir.join(stage)).map_err(|e| e.to_string())?);
    }
    for f in files {
        let meta = results::read_metadata(&f).map_err(|e| e.to_string())?;
        let got = (
            meta.get("cotune.generation").cloned(),
            meta.get(results::keys::EXPERIMENT_DIGEST).cloned(),
        );
        if got != want {
            return Err(format!(
                "{} is of {got:?}, run.json of {want:?}",
                f.display()
            ));
        }
    }
    want.0
        .map(Some)
        .ok_or_else(|| "run.json names no generation".to_owned())
}

// Regression: a reader during `watch` could see one table updated and another not.
#[test]
fn a_reader_never_sees_tables_of_two_steps_together() {
    let ws = Workspace::new();
    let f = ws.write("exp.toml", &exp("[8]"));
    let mut child = watch(&ws, &f);
    let out = ws.path("out");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (out, stop) = (out.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut seen = std::collections::BTreeSet::new();
            let mut reads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match one_step(&out) {
                    Ok(Some(g)) => {
                        seen.insert(g);
                        reads += 1;
                    }
                    Ok(None) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok((seen, reads))
        })
    };
    wait_for(|| one_step(&out).ok().flatten().is_some());
    for v in ["[8, 16]", "[16]", "[8]", "[8, 16, 32]"] {
        let before = one_step(&out).ok().flatten();
        ws.write("exp.toml", &exp(v));
        wait_for(|| one_step(&out).ok().flatten() != before);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let result = reader.join().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    let (seen, reads) = result.expect("a read mixed two steps");
    assert!(
        seen.len() >= 3,
        "the reader saw only {seen:?} in {reads} reads"
    );
}
