//! The cotune engine: experiment files, content keys, the on-disk store, the differential
//! dataflow that schedules stage instances, and the command line.
//!
//! Stages are reached only through [`stage::StageSet`]; the product's implementation is
//! [`real::RealStages`].
#![forbid(unsafe_code)]
#![forbid(missing_docs)]

pub mod cli;
pub mod dataflow;
pub mod driver;
pub mod engine;
pub mod experiment;
pub mod key;
pub mod plan;
pub mod progress;
pub mod real;
pub mod stage;
pub mod store;
pub mod trial;
