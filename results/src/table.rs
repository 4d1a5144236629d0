//! The output layout: `<out>/<experiment>/<stage>/part-<worker:03>.parquet`, one part per
//! timely worker, plus `pareto.parquet` and `run.json` beside the stage folders.
//!
//! Each worker replaces only its own part, atomically; [`prune_parts`] removes parts of workers
//! that no longer exist (an earlier run had more). Both are crash-safe: every visible file is
//! whole at every instant. Temporary files of a write killed mid-way stay hidden (`.…tmp`) and
//! are not removed here, since another process may be writing them right now.

use std::fs;
use std::path::{Path, PathBuf};

use crate::atomic::sync_dir;
use crate::error::ResultsError;
use crate::value::Row;
use crate::write::{write_parquet, TableMeta};

/// Checks that `name` is one plain folder name: non-empty, no separators, not hidden.
fn check_name(what: &'static str, name: &str) -> Result<(), ResultsError> {
    let bad = name.is_empty() || name.starts_with('.') || name.contains(['/', '\\', '\0']);
    if bad {
        return Err(ResultsError::InvalidName {
            what,
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// `<out>/<experiment>`: the current view of one experiment.
pub fn experiment_dir(out: &Path, experiment: &str) -> Result<PathBuf, ResultsError> {
    check_name("experiment", experiment)?;
    Ok(out.join(experiment))
}

/// `<out>/<experiment>/<stage>`: the folder of one stage's table.
pub fn table_dir(out: &Path, experiment: &str, stage: &str) -> Result<PathBuf, ResultsError> {
    check_name("stage", stage)?;
    Ok(experiment_dir(out, experiment)?.join(stage))
}

/// The file name of a worker's part: `part-007.parquet` (more digits past 999).
pub fn part_file_name(worker: usize) -> String {
    format!("part-{worker:03}.parquet")
}

/// `<out>/<experiment>/pareto.parquet`.
pub fn pareto_path(out: &Path, experiment: &str) -> Result<PathBuf, ResultsError> {
    Ok(experiment_dir(out, experiment)?.join("pareto.parquet"))
}

/// `<out>/<experiment>/run.json`.
pub fn run_json_path(out: &Path, experiment: &str) -> Result<PathBuf, ResultsError> {
    Ok(experiment_dir(out, experiment)?.join("run.json"))
}

/// Replaces worker `worker`'s part of a stage table with `rows` (an empty part when `rows` is
/// empty, with the columns of `meta.schema`). Returns the part's path.
pub fn replace_table_part(
    out: &Path,
    experiment: &str,
    stage: &str,
    worker: usize,
    rows: &[Row],
    meta: &TableMeta,
) -> Result<PathBuf, ResultsError> {
    let path = table_dir(out, experiment, stage)?.join(part_file_name(worker));
    write_parquet(&path, rows, meta)?;
    Ok(path)
}

/// The worker index of a part file name, or `None` if it is not one.
fn part_index(file_name: &str) -> Option<usize> {
    let digits = file_name.strip_prefix("part-")?.strip_suffix(".parquet")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Removes the part files of workers `n_workers` and above from a stage table. A missing
/// folder is fine (nothing to prune); other files in the folder are left alone.
pub fn prune_parts(
    out: &Path,
    experiment: &str,
    stage: &str,
    n_workers: usize,
) -> Result<(), ResultsError> {
    let dir = table_dir(out, experiment, stage)?;
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(ResultsError::Io { path: dir, source }),
    };
    let mut removed = false;
    for entry in entries {
        let entry = entry.map_err(ResultsError::io(&dir))?;
        let stale = entry
            .file_name()
            .to_str()
            .and_then(part_index)
            .is_some_and(|worker| worker >= n_workers);
        if stale {
            let path = entry.path();
            match fs::remove_file(&path) {
                Ok(()) => removed = true,
                // Someone else pruned it first: the outcome is the same.
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(ResultsError::Io { path, source }),
            }
        }
    }
    if removed {
        sync_dir(&dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_parse_back() {
        for worker in [0, 7, 42, 999, 1000, 123_456] {
            assert_eq!(part_index(&part_file_name(worker)), Some(worker));
        }
        for name in [
            "part-.parquet",
            "part-1a.parquet",
            "part-001.parquet.tmp",
            "x-001.parquet",
        ] {
            assert_eq!(part_index(name), None, "{name}");
        }
    }

    #[test]
    fn names_that_escape_the_folder_are_refused() {
        for bad in ["", ".", "..", "../x", "a/b", "a\\b", ".hidden"] {
            assert!(table_dir(Path::new("out"), "exp", bad).is_err(), "{bad:?}");
            assert!(experiment_dir(Path::new("out"), bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            table_dir(Path::new("out"), "exp", "kernel_tune").unwrap(),
            Path::new("out/exp/kernel_tune")
        );
    }
}
