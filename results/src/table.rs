//! The output layout: `<out>/<experiment>/<stage>/part-<worker:03>.parquet`, one part per
//! timely worker, plus `pareto.parquet` and `run.json` beside the stage folders.
//!
//! Each worker replaces only its own part, atomically: every visible file is whole at every
//! instant. Temporary files of a write killed mid-way stay hidden (`.…tmp`). The engine writes
//! each step into a fresh generation folder ([`crate::Generation`]) and switches the
//! experiment's folder to it at once.

use std::path::{Path, PathBuf};

use crate::error::ResultsError;
use crate::value::Row;
use crate::write::{write_parquet, TableMeta};

/// Checks that `name` is one plain folder name: non-empty, no separators, not hidden.
pub(crate) fn check_name(what: &'static str, name: &str) -> Result<(), ResultsError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
