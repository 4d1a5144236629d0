//! The unified accuracy–performance search (`[search] strategy = "unified"`): Adapt-S / SPDY
//! style rounds over the joint space, each a new epoch of the same dataflow.
//!
//! - [`space`]: the model's prunable layers, their options, the candidates and the proxies.
//! - [`measure`]: what a round reads back from the store.
//! - [`layers`]: each layer's time in a format, tuned or measured inside a pass.
//! - [`predict`]: the accuracy and latency predictors and their calibration.
//! - [`front`]: Pareto fronts and hypervolume.
//! - [`select`]: which candidates a round fine-tunes.
//! - [`additive`]: the predicted front of a per-layer space too large to enumerate.
//! - [`source`]: the rounds, as the driver's plan source.
//! - `round`: one round observed: results read, predictors refitted, the next trials chosen.
//! - [`verdict`]: what a search says when no trial meets its constraints.

pub mod additive;
pub mod front;
pub mod layers;
pub mod measure;
pub mod predict;
mod round;
pub mod select;
pub mod source;
pub mod space;
pub mod verdict;

pub use source::{Unified, Verdict};
