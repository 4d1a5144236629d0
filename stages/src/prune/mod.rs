//! The prune stage: pruning of a trained model (magnitude, OBS, SparseGPT or Wanda) into a
//! pattern of the kernels crate, one for every layer or one per layer ([`PruneSpec`]), one-shot or
//! gradual, with fine-tuning under fixed masks (pruned weights stay exactly `+0.0`). Every layer
//! whose shape can take its pattern is pruned; the others are kept dense and reported with the
//! reason (DESIGN.md, "Pruning").

mod calibrate;
mod linalg;
mod obs;
mod oneshot;
mod pruned;
mod schedule;
mod sparsegpt;
mod spec;
mod steps;
mod study;

pub use calibrate::{output_error, LayerInputs};
pub use oneshot::prune_layer;
pub use pruned::{LayerReport, LayerStatus, Pruned};
pub use schedule::{Schedule, ScheduleKind, GRADUAL_STEPS_DEFAULT};
pub use spec::{
    Calibration, CalibrationInputs, Method, MethodKind, PruneSpec, Scope, OBS_DEFAULTS,
    ONE_SHOT_DEFAULTS,
};
pub use steps::prune;
pub use study::{gaussian, gaussian_inputs, study_layer, LayerStudy};
