//! The one error type of the crate: every variant names the file (or the spec field) at fault.

use std::path::PathBuf;

/// Why a data set could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file was read but its content is not a valid data set.
    #[error("{}: {what}", path.display())]
    BadData {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the row / column / offset where it helps.
        what: String,
    },
    /// The spec itself is unusable (a fraction outside (0, 1), zero classes, …).
    #[error("invalid dataset spec: {0}")]
    InvalidSpec(String),
    /// A column the spec names (the label, or a listed feature) is not in the table.
    #[error("{}: missing column {column:?}; columns are {columns:?}", path.display())]
    MissingColumn {
        /// The table file.
        path: PathBuf,
        /// The column the spec names.
        column: String,
        /// The table's columns, in file order.
        columns: Vec<String>,
    },
    /// The split by `test_fraction` leaves the train or the test part empty.
    #[error("{name}: {samples} samples with test_fraction {test_fraction:?} leave an empty train or test part")]
    EmptySplit {
        /// The data set's name.
        name: String,
        /// Its samples before the split.
        samples: usize,
        /// The fraction held out.
        test_fraction: f64,
    },
}

impl DatasetError {
    pub(crate) fn bad(path: impl Into<PathBuf>, what: impl Into<String>) -> Self {
        DatasetError::BadData {
            path: path.into(),
            what: what.into(),
        }
    }
}
