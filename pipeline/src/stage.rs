//! The one seam between the engine and the stage implementations.
//!
//! The engine knows stages only through [`StageSet`]: it plans with `device`, `kernel_digest`,
//! `dataset_dims` and `layer_formats`, and runs each stage instance through the store with the
//! `run_*` methods. The product wires in [`crate::real::RealStages`]; the engine's tests use
//! small stages of their own.

use crate::experiment::schema::Backend;
use crate::store::MeasureLock;
use crate::trial::{
    DatasetTrial, EvalTrial, LayerFormat, ModelTrial, PatternTrial, PruneTrial, TrainTrial,
    TuneTrial,
};
use results::Row;
use std::path::Path;

/// Stage names, in pipeline order.
pub const STAGES: [&str; 5] = ["dataset", "train", "prune", "kernel_tune", "evaluate"];

/// A stage's failure: the message names the trial's fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StageError(pub String);

impl StageError {
    /// From anything printable.
    pub fn new(msg: impl std::fmt::Display) -> Self {
        StageError(msg.to_string())
    }
}

/// What a stage instance produced besides its artifacts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// The instance's metrics (one result row).
    pub metrics: Row,
    /// Extra rows: kernel_tune has one per measured point (the metrics row then summarises).
    pub rows: Vec<Row>,
}

/// Run-time context of one stage instance.
pub struct Ctx<'a> {
    /// Empty folder for the instance's artifacts.
    pub out_dir: &'a Path,
    /// The per-host measurement lock: hold it exclusively while timing.
    pub measure: &'a MeasureLock,
}

/// A finished input: its folder in the store and its metrics row.
pub struct Input<'a> {
    /// Store folder of the input's entry.
    pub dir: &'a Path,
    /// Its metrics row.
    pub metrics: &'a Row,
}

/// One layer's tuning, as evaluate receives it.
pub struct TunedLayer<'a> {
    /// The tuning's config.
    pub trial: &'a TuneTrial,
    /// The tuning's entry (its metrics row holds the best config).
    pub input: Input<'a>,
}

/// The stage implementations.
pub trait StageSet: Send + Sync + 'static {
    /// Version of a stage (a constant bumped when its results change meaning).
    fn version(&self, stage: &str) -> u32;
    /// Device fingerprint of a backend, or why it is unavailable.
    fn device(&self, backend: Backend) -> Result<String, StageError>;
    /// Digest of the kernel sources and parameter spaces of a backend.
    fn kernel_digest(&self, backend: Backend) -> String;
    /// Tells the stages which store this process uses, before anything is planned, so that
    /// they can keep derived caches in it (the CUDA backend's compiled PTX, in `ptx/`).
    fn use_store(&self, _root: &Path) {}
    /// The element type a backend's kernels compute a format in (the `kernel_tune.dtype`
    /// column and part of the tuning's key): `f32` unless a backend says otherwise.
    fn dtype(&self, _backend: Backend, _pattern: &PatternTrial, _rows: u64, _cols: u64) -> String {
        "f32".into()
    }
    /// (features, classes) of a dataset, read at planning time.
    fn dataset_dims(&self, dataset: &DatasetTrial) -> Result<(u64, u64), StageError>;
    /// The layers of a model and the format each takes under a pattern.
    fn layer_formats(
        &self,
        model: &ModelTrial,
        dims: (u64, u64),
        pattern: &PatternTrial,
    ) -> Vec<LayerFormat>;

    /// Loads and checks a dataset.
    fn run_dataset(&self, ctx: &Ctx, dataset: &DatasetTrial) -> Result<Outcome, StageError>;
    /// Trains a model.
    fn run_train(
        &self,
        ctx: &Ctx,
        train: &TrainTrial,
        dataset: &DatasetTrial,
    ) -> Result<Outcome, StageError>;
    /// Prunes a trained model (and fine-tunes it).
    fn run_prune(
        &self,
        ctx: &Ctx,
        prune: &PruneTrial,
        train: &TrainTrial,
        trained: &Input,
        dataset: &DatasetTrial,
    ) -> Result<Outcome, StageError>;
    /// Tunes one kernel on one format signature.
    fn run_kernel_tune(&self, ctx: &Ctx, tune: &TuneTrial) -> Result<Outcome, StageError>;
    /// Evaluates a pruned model through the tuned kernels.
    #[allow(clippy::too_many_arguments)]
    fn run_evaluate(
        &self,
        ctx: &Ctx,
        eval: &EvalTrial,
        prune: &PruneTrial,
        train: &TrainTrial,
        pruned: &Input,
        dataset: &DatasetTrial,
        tunings: &[TunedLayer],
    ) -> Result<Outcome, StageError>;
}
