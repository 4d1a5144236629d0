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
            // The header with what may follow it on its line: blanks and a comment.
            let code = line.split('#').next().unwrap_or("").trim();
            if code == header {
                let start = at + (line.len() - line.trim_start().len());
                return start..start + header.len();
            }
            at += line.len();
        }
        0..0
    }

    /// The span of key `key` in table `[section]` (the section's header if the table does not
    /// set it, `0..0` if the file has no such table).
    pub fn key(&self, section: &str, key: &str) -> Range<usize> {
        let header = self.section(section);
        if header.is_empty() {
            return header;
        }
        let Some(eol) = self.text[header.end..].find('\n') else {
            return header;
        };
        let mut at = header.end + eol + 1;
        for line in self.text[at..].split_inclusive('\n') {
            let code = line.split('#').next().unwrap_or("").trim_start();
            if code.starts_with('[') {
                break;
            }
            if let Some(rest) = code.strip_prefix(key) {
                if rest.trim_start().starts_with('=') {
                    let start = at + (line.len() - line.trim_start().len());
                    return start..start + key.len();
                }
            }
            at += line.len();
        }
        header
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_is_found_at_its_header_whatever_follows_it() {
        let text = "name = \"x\"\n[dataset] # the data\nsource = \"digits\"\n  [model]\nkind = \"mlp\"\n[[prune.include]]\n";
        let map = SourceMap::new(Path::new("e.toml"), text);
        let at = |name: &str| {
            let e = map.error(map.section(name), "x");
            (e.line, e.col)
        };
        assert_eq!(at("dataset"), (2, 1));
        assert_eq!(at("model"), (4, 3));
        assert_eq!(at("prune"), (1, 1), "no [prune] table: the file's start");
    }

    #[test]
    fn a_key_is_found_in_its_own_table_only() {
        // A longer key and a commented one come first: only `patch =` itself is the key.
        let text =
            "[dataset]\npatch = 1\n[model]\npatches = 2\n# patch = 9\n  patch  = 3\n[train]\n";
        let map = SourceMap::new(Path::new("e.toml"), text);
        let at = |section: &str, key: &str| {
            let e = map.error(map.key(section, key), "x");
            (e.line, e.col)
        };
        assert_eq!(at("model", "patch"), (6, 3));
        assert_eq!(at("dataset", "patch"), (2, 1));
        assert_eq!(at("model", "heads"), (3, 1), "unset: the table's header");
        assert_eq!(at("train", "patch"), (7, 1), "unset, last table");
        assert_eq!(at("prune", "patch"), (1, 1), "no table: the file's start");
    }
}
