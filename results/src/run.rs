//! `run.json`: what one run did, per stage, written atomically beside the tables.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::atomic::write_atomically;
use crate::error::ResultsError;

/// Instance counts and time of one stage in one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageCounts {
    /// Instances computed in this run.
    pub executed: u64,
    /// Instances found in the store.
    pub cached: u64,
    /// Instances that failed (each has a row with `status = "failed"`).
    pub failed: u64,
    /// Seconds spent computing this stage's instances, summed over workers.
    pub duration_s: f64,
    /// Instances of a measuring stage, computed in this run or found in the store, whose
    /// threads waited for a CPU more than 10 % of their runnable time while they measured
    /// (`cpu_wait` above `kernels::BUSY_SHARE`): timed on a busy machine. Absent in run.json
    /// files written before 2026-12-07.
    #[serde(default)]
    pub busy: u64,
    /// The largest `cpu_wait` among the instances (0 where none was measured).
    #[serde(default)]
    pub cpu_wait_max: f64,
}

/// The summary of one `cotune run` (or one `watch` round).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The experiment name.
    pub experiment: String,
    /// The digest of the experiment (hex).
    pub experiment_digest: String,
    /// The cotune version.
    pub cotune_version: String,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// Wall-clock seconds of the whole run.
    pub wall_s: f64,
    /// Timely workers per process.
    pub workers: u64,
    /// Timely processes.
    pub processes: u64,
    /// Per stage name (`train`, `prune`, `kernel_tune`, `evaluate`).
    pub stages: BTreeMap<String, StageCounts>,
    /// Anything else worth recording (for example what a unified search skipped).
    #[serde(default)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// Writes `summary` as pretty JSON to `path`, atomically.
pub fn write_run_json(path: &Path, summary: &RunSummary) -> Result<(), ResultsError> {
    let mut bytes = serde_json::to_vec_pretty(summary).map_err(|source| ResultsError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    write_atomically(path, |mut file| {
        file.write_all(&bytes).map_err(ResultsError::io(path))?;
        Ok(file)
    })
}

/// Reads a `run.json` back.
pub fn read_run_json(path: &Path) -> Result<RunSummary, ResultsError> {
    let bytes = std::fs::read(path).map_err(ResultsError::io(path))?;
    serde_json::from_slice(&bytes).map_err(|source| ResultsError::Json {
        path: path.to_path_buf(),
        source,
    })
}
