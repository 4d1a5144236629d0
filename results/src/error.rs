//! The one error type of the crate: every variant names the file or column at fault.

use std::path::PathBuf;

use crate::value::ColumnType;

/// What can go wrong writing or reading result tables.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResultsError {
    /// A file-system operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder being touched.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// One column holds values of two types that have no common type (only `Int64` and
    /// `Float64` widen, to `Float64`).
    #[error("column `{column}` holds both {first} and {second} values")]
    TypeConflict {
        /// The column name.
        column: String,
        /// The type seen first (or declared in the schema hint).
        first: ColumnType,
        /// The conflicting type.
        second: ColumnType,
    },
    /// The Parquet library failed to encode or decode a file.
    #[error("{}: parquet: {source}", path.display())]
    Parquet {
        /// The file being written or read.
        path: PathBuf,
        /// The underlying error.
        source: parquet::errors::ParquetError,
    },
    /// Arrow rejected the arrays built for a file.
    #[error("{}: arrow: {source}", path.display())]
    Arrow {
        /// The file being written or read.
        path: PathBuf,
        /// The underlying error.
        source: arrow_schema::ArrowError,
    },
    /// A file holds a column whose Arrow type has no `Value` counterpart.
    #[error("{}: column `{column}` has type {data_type}, which cotune cannot read", path.display())]
    UnsupportedColumn {
        /// The file being read.
        path: PathBuf,
        /// The column name.
        column: String,
        /// The Arrow type, as Arrow prints it.
        data_type: String,
    },
    /// An experiment or stage name that cannot be a single folder name.
    #[error("invalid {what} name {name:?}: expected a non-empty name without '/', '\\' or a leading '.'")]
    InvalidName {
        /// `"experiment"` or `"stage"`.
        what: &'static str,
        /// The offending name.
        name: String,
    },
    /// A table folder with no part files, or a path that is neither a file nor a folder.
    #[error("{}: no Parquet table here", path.display())]
    NoTable {
        /// The path given.
        path: PathBuf,
    },
    /// Workers of a generation did not write their parts in time.
    #[error("{}: workers {workers:?} did not write their tables", generation.display())]
    Unwritten {
        /// The generation's folder.
        generation: PathBuf,
        /// The workers whose parts are missing.
        workers: Vec<usize>,
    },
    /// `run.json` could not be encoded or decoded.
    #[error("{}: json: {source}", path.display())]
    Json {
        /// The file being written or read.
        path: PathBuf,
        /// The underlying error.
        source: serde_json::Error,
    },
}

impl ResultsError {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> ResultsError {
        let path = path.into();
        move |source| ResultsError::Io { path, source }
    }
}
