//! Errors in experiment files: `path:line:col: what is wrong`, exit code 2.

use std::ops::Range;
use std::path::{Path, PathBuf};

/// An experiment file that cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}:{line}:{col}: {message}", path = path.display())]
pub struct ExperimentError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub col: usize,
    /// What is wrong and what is allowed.
    pub message: String,
}

/// Maps byte offsets of one file to line and column.
#[derive(Clone, Debug)]
pub struct SourceMap {
    path: PathBuf,
    text: String,
}

impl SourceMap {
    /// The span of the line that opens table `[name]` (`0..0` if the file has none).
    pub fn section(&self, name: &str) -> Range<usize> {
        let header = format!("[{name}]");
        let mut at = 0;
        for line in self.text.split_inclusive('\n') {
            let trimmed = line.trim();
            if trimmed == header || trimmed.starts_with(&format!("{header} ")) {
                let start = at + (line.len() - line.trim_start().len());
                return start..start + header.len();
            }
            at += line.len();
        }
        0..0
    }

    /// A map over `text` read from `path`.
    pub fn new(path: &Path, text: &str) -> Self {
        SourceMap {
            path: path.to_owned(),
            text: text.to_owned(),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An error at a span (an empty span 0..0 points at the start of the file).
    pub fn error(&self, span: Range<usize>, message: impl Into<String>) -> ExperimentError {
        let at = span.start.min(self.text.len());
        let before = &self.text[..at];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        ExperimentError {
            path: self.path.clone(),
            line,
            col,
            message: message.into(),
        }
    }
}
