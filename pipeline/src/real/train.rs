//! The train stage: a seeded, reproducible training; writes `weights.safetensors`.

use super::{rows, Datasets};
use crate::kinds::{train, Dataset, Train, TrainTrial};
use crate::plan::{PlanError, Planner};
use crate::stage::{Done, Outcome, RunCtx, Stage, StageError};
use std::sync::Arc;

/// The weights artifact of train and prune entries.
pub(super) const WEIGHTS: &str = "weights.safetensors";

/// The train stage.
pub struct TrainStage(pub(super) Arc<Datasets>);

impl Stage for TrainStage {
    type Kind = Train;

    fn version(&self) -> u32 {
        1
    }

    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        train::plan(p)
    }

    fn run(
        &self,
        ctx: &RunCtx,
        t: &TrainTrial,
        data: Done<Dataset>,
    ) -> Result<Outcome, StageError> {
        let ds = self.0.load(data.trial())?;
        let trained = stages::train(&ds, &t.model, &t.train, t.seed)?;
        trained.weights.save(&ctx.out_dir.join(WEIGHTS))?;
        Ok(Outcome {
            metrics: rows::train(&trained),
            rows: vec![],
        })
    }
}
