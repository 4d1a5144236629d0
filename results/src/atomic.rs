//! Atomic file replacement: write under a hidden temporary name in the same folder, fsync,
//! rename over the target, fsync the folder. At every instant the visible file is either the
//! old one or the new one, whole; a failed write removes its temporary file.
//!
//! Temporary names start with `.` and end in `.tmp`, so readers that glob `*.parquet` or skip
//! hidden files (pyarrow, duckdb, polars) never see them.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::ResultsError;

/// Distinguishes temporary files of concurrent writes within one process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// Replaces `path` with what `write` puts into a fresh file; `write` hands the file back once
/// it has flushed its own buffers. Creates the parent folder if needed.
pub(crate) fn write_atomically(
    path: &Path,
    write: impl FnOnce(File) -> Result<File, ResultsError>,
) -> Result<(), ResultsError> {
    let dir = parent_dir(path);
    fs::create_dir_all(&dir).map_err(ResultsError::io(&dir))?;
    let temp = temp_path(&dir, path);
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temp)
        .map_err(ResultsError::io(&temp))?;
    let finished = write(file).and_then(|file| {
        file.sync_all().map_err(ResultsError::io(&temp))?;
        fs::rename(&temp, path).map_err(ResultsError::io(path))
    });
    if let Err(err) = finished {
        // Best effort: the error that matters is the one being returned.
        let _ = fs::remove_file(&temp);
        return Err(err);
    }
    sync_dir(&dir)
}

/// The folder holding `path` (`.` for a bare file name).
pub(crate) fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn temp_path(dir: &Path, path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let n = NEXT_TEMP.fetch_add(1, Ordering::Relaxed);
    dir.join(format!(".{name}.{}-{n}.tmp", std::process::id()))
}

/// Makes the rename (or removal) durable: without it a power loss can undo it.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), ResultsError> {
    #[cfg(unix)]
    {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(ResultsError::io(dir))?;
    }
    #[cfg(not(unix))]
    let _ = dir; // Folders cannot be opened for fsync here; the rename is still atomic.
    Ok(())
}
