//! The dataflow: one differential computation per `run` or `watch`, wired from the stage
//! table.
//!
//! The one input collection holds the plan's [`Edge`](crate::plan::Edge)s. Each stage, in table order, is a
//! `reduce` keyed by the instance key (see [`RunStage`]) over the records that reach it: its
//! roots; its input edges joined with the statuses of its parents' stages; and, made `distinct`,
//! the instances requested by a successful instance of a requesting stage (every pruned model
//! with the same structure shares one tuning). An instance that is both requested and has
//! inputs (a tuning reads its calibration) runs only once requested. `reduce` also keeps the
//! aggregates (best kernel per format/shape/backend/device, the Pareto front). Each worker keeps
//! a view of the rows it owns and writes its own Parquet parts.

mod aggregates;
mod build;
mod inputs;
mod run_stage;
mod view;

pub use aggregates::Aggregates;
pub use build::{build, Built};
pub use inputs::{Generations, Inputs};
pub use run_stage::RunStage;
pub use view::{Schemas, Stats, View};
