//! The store's own errors (a stage's failure is not one of them).

use std::path::{Path, PathBuf};

/// Errors of the store itself (a stage's own failure is not one of these).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A file-system operation failed.
    #[error("store {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The folder exists but is not a cotune store.
    #[error("{0} exists and is not a cotune store (no CACHEDIR.TAG); refusing to use it")]
    NotAStore(PathBuf),
}

pub(super) fn io<T>(path: &Path, r: std::io::Result<T>) -> Result<T, StoreError> {
    r.map_err(|source| StoreError::Io {
        path: path.to_owned(),
        source,
    })
}
