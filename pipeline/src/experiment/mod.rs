//! Experiment files: parsing (with spans) and validation into an [`Experiment`], which the
//! stage table then plans ([`crate::stage::StageTable::plan`]).
//!
//! A bad file yields one [`ExperimentError`] with `path:line:col`, what was found and what is
//! allowed; nothing runs.

mod axis;
mod batches;
mod dataset;
pub mod error;
pub mod limits;
mod prune_space;
pub mod schema;
mod search;
mod study;
mod validate;

pub use axis::Axis;
pub use batches::tuned_batches;
pub use dataset::DatasetSpans;
pub use error::{ExperimentError, SourceMap};
pub use search::{Constraints, SearchSpec, PER_ROUND_DEFAULT};
pub use validate::{validate, Experiment, ModelPart};

use std::path::Path;

/// Reads and parses an experiment file (syntax, unknown fields, types).
pub fn parse_file(path: &Path) -> Result<(schema::RawExperiment, SourceMap), ExperimentError> {
    let text = std::fs::read_to_string(path).map_err(|e| ExperimentError {
        path: path.to_owned(),
        line: 1,
        col: 1,
        message: format!("cannot read the experiment file: {e}"),
    })?;
    parse_str(path, &text)
}

/// Parses experiment text that came from `path`.
pub fn parse_str(
    path: &Path,
    text: &str,
) -> Result<(schema::RawExperiment, SourceMap), ExperimentError> {
    let map = SourceMap::new(path, text);
    match toml::from_str::<schema::RawExperiment>(text) {
        Ok(raw) => Ok((raw, map)),
        Err(e) => {
            let span = e.span().unwrap_or(0..0);
            let msg = e.message().trim().replace('\n', " ");
            Err(map.error(span, msg))
        }
    }
}
