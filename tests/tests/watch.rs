//! `cotune watch`: each save of the file is applied as insertions and retractions, and the
//! tables follow the current experiment.

use e2e::harness::{keys, tables, Workspace};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_cotune-test");

fn exp(v: &str) -> String {
    format!(
        r#"name = "w"
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
"#
    )
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

#[test]
fn watch_applies_each_save() {
    let ws = Workspace::new();
    let f = ws.write("exp.toml", &exp("[8]"));
    let mut child = Command::new(BIN)
        .args([
            "watch",
            f.to_str().unwrap(),
            "--store",
            ws.path("s").to_str().unwrap(),
            "--out",
            ws.path("out").to_str().unwrap(),
            "-q",
        ])
        .env_remove("COTUNE_TEST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for(|| prune_keys(&ws) == 2);
    std::thread::sleep(Duration::from_millis(400));
    ws.write("exp.toml", &exp("[8, 16]"));
    wait_for(|| prune_keys(&ws) == 3);
    ws.write("exp.toml", "name = \"w\"\n[dataset\n"); // a broken save is reported and ignored
    std::thread::sleep(Duration::from_millis(800));
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
}
