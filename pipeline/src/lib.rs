//! The cotune engine: experiment files, content keys, the on-disk store, the differential
//! dataflow that schedules stage instances, and the command line.
//!
//! Stages are reached only through the seam in [`stage`]: a [`stage::StageTable`] of
//! [`stage::Stage`]s, each implementing one of the stage kinds of [`kinds`]. The product's
//! stages are [`real::table`].
#![forbid(unsafe_code)]
#![forbid(missing_docs)]

pub mod cli;
pub mod cluster;
pub mod dataflow;
pub mod driver;
pub mod engine;
pub mod experiment;
pub mod fields;
pub mod key;
pub mod kinds;
pub mod plan;
pub mod progress;
pub mod real;
pub mod search;
pub mod stage;
pub mod store;
