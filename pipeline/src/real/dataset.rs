//! The dataset stage: loads and checks the data, records its sizes.

use super::Datasets;
use crate::kinds::{dataset, Dataset, DatasetTrial};
use crate::plan::{PlanError, Planner};
use crate::stage::{Outcome, RunCtx, Stage, StageError};
use results::Value;
use std::sync::Arc;

/// The dataset stage.
pub struct DatasetStage(pub(super) Arc<Datasets>);

impl Stage for DatasetStage {
    type Kind = Dataset;

    fn version(&self) -> u32 {
        1
    }

    /// Plans the data set and loads it (the later stages' plans read its sizes), so that a
    /// data set that cannot be built is an error at the key of the file at fault.
    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        dataset::plan(p)?;
        if let Some(mp) = &p.experiment().model_part {
            if let Err(e) = self.0.load(&mp.dataset) {
                return Err(p.error(mp.dataset_spans.of(&e), format!("[dataset]: {e}")));
            }
        }
        Ok(())
    }

    fn run(&self, ctx: &RunCtx, d: &DatasetTrial, (): ()) -> Result<Outcome, StageError> {
        let ds = self.0.load(d)?;
        let summary = format!(
            "{} train {} test {} features {} classes {}\n",
            ds.name,
            ds.train_y.len(),
            ds.test_y.len(),
            ds.n_features,
            ds.n_classes
        );
        let path = ctx.out_dir.join("dataset.txt");
        std::fs::write(&path, summary).map_err(StageError::io(&path))?;
        let metrics = [
            ("n_train", ds.train_y.len()),
            ("n_test", ds.test_y.len()),
            ("n_features", ds.n_features),
            ("n_classes", ds.n_classes),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), Value::I64(v as i64)))
        .collect();
        Ok(Outcome {
            metrics,
            rows: vec![],
        })
    }
}
