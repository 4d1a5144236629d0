//! A damaged store entry (an artifact or its record changed) is found, reported, set aside and
//! recomputed, and `store gc` cleans what runs leave: damaged entries, stray files, lock files,
//! and with `--keep` only once no run is using the store.

use e2e::harness::{counts, run_json, tables, walk, Workspace, ROB_EXPERIMENT};

const BIN: &str = env!("CARGO_BIN_EXE_cotune-test");

fn run(ws: &Workspace, store: &str, out: &str, extra: &[&str]) -> std::process::Output {
    ws.run_logged(BIN, store, out, extra)
}

#[test]
fn damaged_entry_is_detected_and_recomputed() {
    let ws = Workspace::new();
    ws.write("exp.toml", ROB_EXPERIMENT);
    assert!(run(&ws, "s", "o", &[]).status.success());
    // Flip one byte of a training artifact.
    let mut weights = None;
    for e in walk(&ws.path("s/objects")) {
        if e.file_name().is_some_and(|n| n == "weights.bin") {
            weights = Some(e);
        }
    }
    let weights = weights.expect("a weights artifact");
    let flip = || {
        let mut bytes = std::fs::read(&weights).unwrap();
        bytes[0] ^= 0x01;
        std::fs::write(&weights, bytes).unwrap();
    };
    flip();
    let store = ws.path("s").display().to_string();
    let v = ws.cotune(BIN, &["store", "verify", "--store", &store], None);
    assert_eq!(v.status.code(), Some(1), "verify must report the damage");
    assert!(String::from_utf8_lossy(&v.stdout).contains("damaged"));
    // `store gc` removes the damaged entry (it said so and removed nothing).
    let copy = ws.path("s-copy");
    std::fs::create_dir(&copy).unwrap();
    let cp = std::process::Command::new("cp")
        .args(["-a", &format!("{store}/."), copy.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(cp.success());
    let copy = copy.display().to_string();
    let g = ws.cotune(BIN, &["store", "gc", "--store", &copy], None);
    assert!(g.status.success());
    assert!(String::from_utf8_lossy(&g.stdout).starts_with("removed 1 "));
    let v = ws.cotune(BIN, &["store", "verify", "--store", &copy], None);
    assert!(v.status.success(), "gc leaves no damaged entry");
    // `plan` says the entry is damaged, not that its config is new.
    let file = ws.path("exp.toml").display().to_string();
    let p = ws.cotune(BIN, &["plan", &file, "--store", &store], None);
    let said = String::from_utf8_lossy(&p.stdout).to_string();
    assert!(
        said.lines()
            .any(|l| l.starts_with("  new train") && l.contains("stored entry damaged")),
        "{said}"
    );
    let o = run(&ws, "s", "o", &[]);
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("damaged"),
        "the run reports the damaged entry"
    );
    let r = run_json(&ws.path("o"), "rob");
    assert_eq!(
        counts(&r, "train").0,
        1,
        "the damaged training is recomputed"
    );
    let v = ws.cotune(BIN, &["store", "verify", "--store", &store], None);
    assert!(v.status.success(), "store verifies clean after the repair");
}

/// An entry's record (`meta.json`) changed after it was written is found as a changed
/// artifact is: a metric edited in place was read as it stood (a front showing accuracy 9.3),
/// and one of another type made every later run fail to write its tables. A file where a
/// bucket folder goes, or in `tmp/`, is set aside or removed, not failed on.
#[test]
fn an_edited_record_and_stray_files_are_found_and_repaired() {
    let ws = Workspace::new();
    ws.write("exp.toml", ROB_EXPERIMENT);
    assert!(run(&ws, "s", "o", &[]).status.success());
    let fresh = tables(&ws.path("o"), "rob");
    let meta = walk(&ws.path("s/objects"))
        .into_iter()
        .find(|p| {
            p.file_name().is_some_and(|n| n == "meta.json")
                && std::fs::read_to_string(p).is_ok_and(|t| t.contains("\"stage\": \"evaluate\""))
        })
        .expect("an evaluate entry");
    let text = std::fs::read_to_string(&meta).unwrap();
    let (at, _) = text
        .match_indices("\"f64\": 0.")
        .next()
        .expect("a metric in [0, 1)");
    let at = at + "\"f64\": ".len();
    let edited = format!("{}9{}", &text[..at], &text[at + 1..]);
    std::fs::write(&meta, edited).unwrap();
    let store = ws.path("s").display().to_string();
    let v = ws.cotune(BIN, &["store", "verify", "--store", &store], None);
    assert_eq!(v.status.code(), Some(1), "verify must report the edit");
    assert!(String::from_utf8_lossy(&v.stdout).contains("recorded blake3"));
    // A file where another bucket folder goes (its entries are written again), one in tmp/.
    let edited_bucket = meta.parent().unwrap().parent().unwrap().to_owned();
    let bucket = std::fs::read_dir(ws.path("s/objects"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| *p != edited_bucket)
        .expect("a second bucket");
    std::fs::rename(&bucket, ws.path("bucket-copy")).unwrap();
    std::fs::write(&bucket, "not a folder").unwrap();
    ws.write("s/tmp/stray", "not a folder");
    let o = run(&ws, "s", "o", &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("could not clear"), "{err}");
    assert!(
        err.contains("recorded blake3"),
        "the run reports the edited entry: {err}"
    );
    assert_eq!(
        tables(&ws.path("o"), "rob"),
        fresh,
        "the same tables as the fresh run"
    );
    assert!(bucket.is_dir(), "the bucket folder is back");
    let v = ws.cotune(BIN, &["store", "verify", "--store", &store], None);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
}

/// Regression: `store gc --keep OTHER` while a run of an experiment it does not keep was
/// computing removed the entries that run had just written, and its later stages failed on
/// inputs "missing from the store". gc --keep now refuses while a run uses the store (exit 1,
/// nothing removed), the run completes, and afterwards gc --keep removes what the kept file
/// does not use and the key lock files no process holds.
#[test]
fn gc_keep_refuses_while_a_run_uses_the_store_and_removes_free_locks() {
    use e2e::harness::{exit_within, log_lines, stderr_of};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    let ws = Workspace::new();
    ws.write("exp.toml", ROB_EXPERIMENT);
    ws.write(
        "other.toml",
        &ROB_EXPERIMENT.replace("seed = 5", "seed = 6"),
    );
    let log = ws.path("s.log");
    let mut running = Command::new(BIN)
        .args(ws.run_args("s", "o"))
        .env("COTUNE_TEST_LOG", &log)
        .env("COTUNE_TEST_SLEEP_MS", "100")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while log_lines(&log).len() < 3 && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(log_lines(&log).len() >= 3, "the run computed nothing");
    let store = ws.path("s").display().to_string();
    let other = ws.path("other.toml").display().to_string();
    let gc_keep = || {
        ws.cotune(
            BIN,
            &["store", "gc", "--store", &store, "--keep", &other],
            None,
        )
    };
    let refused = gc_keep();
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("is using"),
        "{refused:?}"
    );
    let (status, _) = exit_within(&mut running, Duration::from_secs(120));
    let err = stderr_of(&mut running);
    assert!(status.success(), "the run lost entries to gc: {err}");
    let gc = gc_keep();
    assert!(gc.status.success(), "{gc:?}");
    assert!(
        !String::from_utf8_lossy(&gc.stdout).starts_with("removed 0 "),
        "{gc:?}"
    );
    let v = ws.cotune(BIN, &["store", "verify", "--store", &store], None);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    let locks: Vec<String> = std::fs::read_dir(ws.path("s/locks"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(locks, ["runs.lock"], "gc leaves only the run lock");
}
