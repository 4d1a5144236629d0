//! The stages of cotune as pure functions of (config, inputs) → (artifacts, metrics): they know
//! nothing of the dataflow or the store (DESIGN.md, "Workspace").
//!
//! - [`model`]: architectures ([`ModelSpec`]) and weights as plain data ([`Weights`]).
//! - [`train`](mod@train): seeded, reproducible training ([`train()`], [`accuracy`]).
//! - [`prune`](mod@prune): magnitude and OBS pruning into the kernels' patterns, fine-tuned with fixed masks.
#![forbid(missing_docs)]
// `deny`, not `forbid`: train/malloc.rs holds the one allowed FFI call (see there).
#![deny(unsafe_code)]

mod error;
pub mod evaluate;
pub mod kernel_tune;
pub mod model;
pub mod prune;
pub mod train;

pub use error::StageError;
pub use model::{Layer, LayerKind, ModelKind, ModelSpec, Weights, WeightsDigest};
pub use prune::{
    prune, Calibration, CalibrationInputs, LayerReport, LayerStatus, Method, MethodKind, PruneSpec,
    Pruned, Schedule, ScheduleKind, Scope,
};
pub use train::{accuracy, train, tune_malloc, Optimizer, TrainMetrics, TrainSpec, Trained};
