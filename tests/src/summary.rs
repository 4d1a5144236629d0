//! A stage added through the seam in one module: `summary`, one instance per evaluation,
//! reading its evaluation's metrics and recording accuracy per KiB of weights. Its kind, trial,
//! planning and run are all here; [`crate::table_with_summary`] adds it to the table in one
//! line. The dataflow wiring, keys, store entries, progress, `run.json` and the `summary/` table
//! follow from the table.

use pipeline::fields::Fields;
use pipeline::key::Key;
use pipeline::kinds::Evaluate;
use pipeline::plan::{PlanError, Planner};
use pipeline::stage::{Done, Outcome, RunCtx, Stage, StageError, StageKind, Trial};
use results::Value;

/// The summary stage kind.
pub enum Summary {}

impl StageKind for Summary {
    const NAME: &'static str = "summary";
    type Trial = SummaryTrial;
    type Parents = Key<Evaluate>;
}

/// What a summary computes.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryTrial {
    /// Bytes per unit of weight size (1024: accuracy per KiB).
    pub per_bytes: u64,
}

impl Trial for SummaryTrial {
    fn describe(&self, f: &mut Fields) {
        f.both("per_bytes", "summary.per_bytes", &self.per_bytes);
    }
    fn label(&self) -> String {
        format!("accuracy per {} bytes", self.per_bytes)
    }
}

/// The summary stage.
pub struct SummaryStage;

impl Stage for SummaryStage {
    type Kind = Summary;
    fn version(&self) -> u32 {
        1
    }
    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        for (eval, _) in p.instances::<Evaluate>() {
            p.add::<Summary>(SummaryTrial { per_bytes: 1024 }, eval);
        }
        Ok(())
    }
    fn run(&self, _: &RunCtx, t: &SummaryTrial, e: Done<Evaluate>) -> Result<Outcome, StageError> {
        let get = |c: &str| e.metrics.get(c).and_then(Value::as_f64);
        let (Some(acc), Some(bytes)) = (get("accuracy"), get("weight_bytes")) else {
            return Err(StageError::Failed(format!(
                "evaluation {} has no accuracy or weight_bytes",
                e.key
            )));
        };
        let value = acc / (bytes / t.per_bytes as f64);
        Ok(Outcome {
            metrics: [("accuracy_per_unit".to_owned(), Value::F64(value))].into(),
            rows: vec![],
        })
    }
}
