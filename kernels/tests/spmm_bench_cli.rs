//! `spmm-bench` as a user runs it: each printed speedup is its own row's dense time over its
//! best confirmed time, both in the dump; `--rescore` scores only tunings that measured their
//! whole space; bad arguments exit 2 and leave a `--dump` file as it was.

use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_spmm-bench");

fn bench(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("spmm-bench runs")
}

/// The dump's rows as (tuning, fields), the tuning being shape, pattern and threads.
fn rows(dump: &Path) -> Vec<(String, Vec<String>)> {
    let text = std::fs::read_to_string(dump).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("rows,cols,n,pattern,threads,point,predicted_s,measured_s,space,confirmed_s,dense_s")
    );
    lines
        .map(|l| {
            let f: Vec<String> = l.split(',').map(str::to_string).collect();
            assert_eq!(f.len(), 11, "{l}");
            (format!("{}x{}x{} {} t{}", f[0], f[1], f[2], f[3], f[4]), f)
        })
        .collect()
}

#[test]
fn printed_ratios_are_the_dumps_and_rescore_scores_whole_spaces_only() {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("d.csv");
    let d = dump.to_str().unwrap();
    let o = bench(&[
        "--shapes",
        "64x64x16",
        "--threads",
        "1",
        "--only",
        "2:8",
        "--reps",
        "1",
        "--dump",
        d,
    ]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rows = rows(&dump);
    let tunings: std::collections::BTreeSet<&String> = rows.iter().map(|(t, _)| t).collect();
    assert!(tunings.len() >= 2, "{tunings:?}");
    for t in &tunings {
        let mine: Vec<&Vec<String>> = rows
            .iter()
            .filter(|(k, _)| k == *t)
            .map(|(_, f)| f)
            .collect();
        // --targets measures every point of the space, and says how many there are.
        let space: usize = mine[0][8].parse().unwrap();
        assert_eq!(mine.len(), space, "{t}");
        // One dense time per tuning; a few points re-measured.
        let dense: f64 = mine[0][10].parse().unwrap();
        assert!(mine.iter().all(|f| f[10].parse::<f64>().unwrap() == dense));
        let confirmed: Vec<f64> = mine.iter().filter_map(|f| f[9].parse().ok()).collect();
        assert!((1..=5).contains(&confirmed.len()), "{t}: {confirmed:?}");
        let best = confirmed.iter().copied().fold(f64::INFINITY, f64::min);
        // The printed row: `<label> <time> us <GF/s> GF/s <speedup>x of dense <dense> us`.
        let label = t.split_once(' ').unwrap().1.rsplit_once(' ').unwrap().0;
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{label} ")))
            .unwrap_or_else(|| panic!("no row for {label} in\n{out}"));
        let printed: f64 = line
            .split_whitespace()
            .find_map(|w| w.strip_suffix('x')?.parse().ok())
            .unwrap();
        assert!(
            (printed - dense / best).abs() <= 0.006,
            "{line}: {printed} against {dense} / {best}"
        );
    }
    // Every tuning whole: all scored.
    let o = bench(&["--rescore", d]);
    let scored = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        o.status.success() && !scored.contains("not scored"),
        "{scored}"
    );
    // One point short: that tuning is no longer scored (its regret would be 0 by construction).
    let text = std::fs::read_to_string(&dump).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.remove(1);
    let short = dir.path().join("short.csv");
    std::fs::write(&short, lines.join("\n")).unwrap();
    let o = bench(&["--rescore", short.to_str().unwrap()]);
    let scored = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(scored.matches("not scored").count(), 1, "{scored}");

    // A calibration of one family (V:N:M) marks that family's tunings as in sample and no
    // other's at the same shape, and says which tunings it has no term for.
    let vnm: Vec<&str> = text
        .lines()
        .enumerate()
        .filter(|(i, l)| *i == 0 || l.contains(",V:N:M "))
        .map(|(_, l)| l)
        .collect();
    assert!(vnm.len() > 1, "no V:N:M rows in\n{text}");
    let vnm_file = dir.path().join("vnm.csv");
    std::fs::write(&vnm_file, vnm.join("\n")).unwrap();
    let o = bench(&[
        "--rescore",
        d,
        "--calibrate-from",
        vnm_file.to_str().unwrap(),
    ]);
    let scored = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{scored}");
    let lines: Vec<&str> = scored.lines().filter(|l| l.contains("spearman")).collect();
    assert!(lines.iter().any(|l| l.contains("N:M 2:8 t")), "{scored}");
    for line in lines {
        let vnm = line.contains("V:N:M");
        assert_eq!(line.contains("(calibration shape)"), vnm, "{line}");
        assert_eq!(line.contains("(no calibration term"), !vnm, "{line}");
    }

    // Bad arguments: exit 2, and the dump is left as it was.
    for args in [
        vec!["--dump", d, "--bogus"],
        vec!["--rescore", d, "--dump", d],
        vec!["--reps", "0", "--dump", d],
        vec!["--threads", "0", "--dump", d],
        vec!["--budget", "1.5", "--dump", d],
        vec!["--shapes", "0x64x16", "--dump", d],
        vec!["--sample", "0.2", "--dump", d],
    ] {
        let o = bench(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert_eq!(std::fs::read_to_string(&dump).unwrap(), text, "{args:?}");
    }
    let o = bench(&["--rescore", dir.path().join("none.csv").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    // A dump that cannot be written: bad usage, before anything is measured.
    let nowhere = dir.path().join("no/such/folder/d.csv");
    let o = bench(&["--shapes", "64x64x16", "--dump", nowhere.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty(), "nothing measured");
}

/// A run that measures one small shape on one thread.
const TINY: [&str; 6] = [
    "--shapes",
    "16x16x16",
    "--only",
    "N:M 2:8",
    "--threads",
    "1",
];

// Regression: a kernel switch set to its default (`COTUNE_VNM_PAIRS=1`) entered the device
// fingerprint, so tunings made with it were keyed apart from the default kernels' tunings.
#[test]
fn the_fingerprint_names_only_switches_that_change_the_kernels() {
    let cpu_line = |env: &[(&str, &str)]| {
        let o = Command::new(BIN)
            .args(TINY)
            .args(["--reps", "1"])
            .envs(env.iter().copied())
            .output()
            .expect("spmm-bench runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        out.lines()
            .find(|l| l.starts_with("cpu: "))
            .expect("a cpu line")
            .to_string()
    };
    let plain = cpu_line(&[]);
    assert!(!plain.contains("COTUNE_"), "{plain}");
    let defaults = [
        ("COTUNE_VNM_PAIRS", "1"),
        ("COTUNE_VNM_DIRECT", "yes"),
        ("COTUNE_PANEL_COLUMNS", "32"),
    ];
    assert_eq!(cpu_line(&defaults), plain);
    let off = cpu_line(&[("COTUNE_VNM_PAIRS", "0"), ("COTUNE_PANEL_COLUMNS", "1")]);
    assert!(
        off.contains(" / COTUNE_VNM_PAIRS=0 / COTUNE_PANEL_COLUMNS=1 / "),
        "{off}"
    );
    // The direct reads are the row pairs': named with the pairs on, not with them off.
    let direct = cpu_line(&[("COTUNE_VNM_DIRECT", "0")]);
    assert!(direct.contains(" / COTUNE_VNM_DIRECT=0 / "), "{direct}");
    let both = cpu_line(&[("COTUNE_VNM_DIRECT", "0"), ("COTUNE_VNM_PAIRS", "0")]);
    assert!(
        both.contains(" / COTUNE_VNM_PAIRS=0 / ") && !both.contains("DIRECT"),
        "{both}"
    );
}

// Regression: piped into `head`, spmm-bench panicked ("failed printing to stdout: Broken
// pipe"); it now stops as other Unix tools do.
#[test]
fn a_closed_pipe_stops_it_without_a_panic() {
    let mut child = Command::new(BIN)
        .args(TINY)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spmm-bench runs");
    // The reader goes away before the first line is written.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
}
