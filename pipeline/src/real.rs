//! The product's stages: adapters from the engine's trials to the pure stage functions of the
//! `stages` crate.

use crate::experiment::schema::Backend;
use crate::stage::{Ctx, Input, Outcome, StageError, StageSet, TunedLayer};
use crate::trial::*;

/// The real stage implementations.
#[derive(Debug, Default)]
pub struct RealStages {}

impl RealStages {
    /// The stages of this build.
    pub fn new() -> Self {
        RealStages {}
    }
}

impl StageSet for RealStages {
    fn version(&self, _stage: &str) -> u32 {
        1
    }
    fn device(&self, backend: Backend) -> Result<String, StageError> {
        Err(StageError::new(format!("{backend:?}: not wired yet")))
    }
    fn kernel_digest(&self, _backend: Backend) -> String {
        String::new()
    }
    fn dataset_dims(&self, _dataset: &DatasetTrial) -> Result<(u64, u64), StageError> {
        Err(StageError::new("not wired yet"))
    }
    fn layer_formats(
        &self,
        _model: &ModelTrial,
        _dims: (u64, u64),
        _pattern: &PatternTrial,
    ) -> Vec<LayerFormat> {
        vec![]
    }
    fn run_dataset(&self, _ctx: &Ctx, _dataset: &DatasetTrial) -> Result<Outcome, StageError> {
        Err(StageError::new("not wired yet"))
    }
    fn run_train(
        &self,
        _ctx: &Ctx,
        _train: &TrainTrial,
        _dataset: &DatasetTrial,
    ) -> Result<Outcome, StageError> {
        Err(StageError::new("not wired yet"))
    }
    fn run_prune(
        &self,
        _ctx: &Ctx,
        _p: &PruneTrial,
        _t: &TrainTrial,
        _i: &Input,
        _d: &DatasetTrial,
    ) -> Result<Outcome, StageError> {
        Err(StageError::new("not wired yet"))
    }
    fn run_kernel_tune(&self, _ctx: &Ctx, _tune: &TuneTrial) -> Result<Outcome, StageError> {
        Err(StageError::new("not wired yet"))
    }
    fn run_evaluate(
        &self,
        _ctx: &Ctx,
        _e: &EvalTrial,
        _p: &PruneTrial,
        _t: &TrainTrial,
        _i: &Input,
        _d: &DatasetTrial,
        _tu: &[TunedLayer],
    ) -> Result<Outcome, StageError> {
        Err(StageError::new("not wired yet"))
    }
}
