//! The crate's one error type: each variant names the folder or file at fault.

use std::path::PathBuf;

/// What can stop a report (a plot that cannot be drawn is skipped with a note instead).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The folder holds no cotune tables: no `run.json` and no table folder, here or one
    /// level down.
    #[error("{}: no cotune tables here (expected an experiment's output folder, with run.json and table folders such as evaluate/, or a folder of them)", path.display())]
    NoTables {
        /// The folder given.
        path: PathBuf,
    },
    /// A table was written with a layout version this build does not read.
    #[error("{}: table schema version {found}, this cotune reads version {supported}", path.display())]
    UnknownSchema {
        /// The Parquet file.
        path: PathBuf,
        /// The version in its footer (or `none`).
        found: String,
        /// [`results::SCHEMA_VERSION`].
        supported: u32,
    },
    /// An `expected.toml` that cannot be read or does not follow its layout.
    #[error("{}: {what}", path.display())]
    Expected {
        /// The file.
        path: PathBuf,
        /// What is wrong, with its line and column where the TOML parser gives them.
        what: String,
    },
    /// Reading a table failed.
    #[error(transparent)]
    Results(#[from] results::ResultsError),
    /// A file-system operation failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder being touched.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl ReportError {
    /// A closure that wraps an `io::Error` for `path`, for `map_err`.
    pub fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
        move |source| ReportError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// True for errors of the input (exit code 2: no tables, an unknown schema, a table or
    /// `expected.toml` that cannot be read), false for failures while writing the report.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            ReportError::NoTables { .. }
                | ReportError::UnknownSchema { .. }
                | ReportError::Expected { .. }
                | ReportError::Results(_)
        )
    }
}
