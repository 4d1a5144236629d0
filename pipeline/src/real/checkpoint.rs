//! The checkpoint stage: checks that the user's file is the one planned (its blake3), and keeps
//! the studied tensors (and their calibration inputs, if a file gives them) in the store as
//! `f32` matrices, so that every study of the checkpoint reads only what it studies.

use super::rows;
use crate::kinds::{checkpoint, Checkpoint, CheckpointTrial};
use crate::plan::{PlanError, Planner};
use crate::stage::{Outcome, RunCtx, Stage, StageError};
use stages::model::{checkpoint_from_bytes, write_matrices};
use std::path::Path;

/// The studied tensors, `rows × cols` F32 under their names.
pub const TENSORS: &str = "tensors.safetensors";
/// Their calibration inputs from the user's file, `tokens × cols` F32 under the same names.
pub const CALIBRATION: &str = "calibration.safetensors";

/// The checkpoint stage.
pub struct CheckpointStage;

/// The file's bytes, checked against the digest it was planned with.
fn read_planned(path: &Path, digest: &[u8; 32]) -> Result<Vec<u8>, StageError> {
    let bytes = std::fs::read(path).map_err(StageError::io(path))?;
    if blake3::hash(&bytes).as_bytes() != digest {
        return Err(StageError::Failed(format!(
            "{} changed since the run was planned: run again to study the new file",
            path.display()
        )));
    }
    Ok(bytes)
}

impl Stage for CheckpointStage {
    type Kind = Checkpoint;

    fn version(&self) -> u32 {
        1
    }

    fn plan(&self, p: &mut Planner) -> Result<(), PlanError> {
        checkpoint::plan(p)
    }

    fn run(&self, ctx: &RunCtx, c: &CheckpointTrial, (): ()) -> Result<Outcome, StageError> {
        let bytes = read_planned(&c.path, &c.digest)?;
        let tensors = checkpoint_from_bytes(&bytes, &c.path, &c.globs, c.conv)?;
        write_matrices(&ctx.out_dir.join(TENSORS), &tensors)?;
        if let Some((path, _, digest)) = &c.calibration {
            let bytes = read_planned(path, digest)?;
            let names = stages::model::checkpoint_names(&bytes, path)?;
            let wanted: Vec<String> = tensors
                .iter()
                .filter(|t| names.contains(&t.name))
                .map(|t| t.name.clone())
                .collect();
            let inputs = checkpoint_from_bytes(&bytes, path, &wanted, false)?;
            write_matrices(&ctx.out_dir.join(CALIBRATION), &inputs)?;
        }
        Ok(Outcome {
            metrics: rows::checkpoint(&tensors),
            rows: vec![],
        })
    }
}
