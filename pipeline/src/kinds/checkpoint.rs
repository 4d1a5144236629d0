//! The checkpoint stage kind: a user's safetensors file read for a layer study, keyed by the
//! file's blake3 (a changed file re-runs; a renamed one does not), the globs naming its
//! studied tensors, and where the calibration inputs come from.

use crate::fields::{canon_u64s, Fields};
use crate::key::CanonValue;
use crate::plan::{PlanError, Planner};
use crate::stage::{StageKind, Trial};
use results::Value;
use std::path::PathBuf;

/// The checkpoint stage.
pub enum Checkpoint {}

impl StageKind for Checkpoint {
    const NAME: &'static str = "checkpoint";
    type Trial = CheckpointTrial;
    type Parents = ();
}

/// One studied tensor as found at planning time.
#[derive(Clone, Debug, PartialEq)]
pub struct StudyTensor {
    /// Its name in the file.
    pub name: String,
    /// Rows of its matrix.
    pub rows: u64,
    /// Columns of its matrix (`in·kh·kw` for a convolution).
    pub cols: u64,
}

/// A checkpoint and how its tensors are studied.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointTrial {
    /// The file, resolved against the experiment file's folder (not a key field).
    pub path: PathBuf,
    /// The file as written in the experiment file.
    pub file: String,
    /// blake3 of the file, read at planning time.
    pub digest: [u8; 32],
    /// Globs naming the studied tensors.
    pub globs: Vec<String>,
    /// Whether 4-D tensors are convolutions (studied as `out × in·kh·kw`).
    pub conv: bool,
    /// A calibration file: resolved path, as written, blake3.
    pub calibration: Option<(PathBuf, String, [u8; 32])>,
    /// Gaussian calibration tokens per tensor without a file's inputs.
    pub tokens: u64,
    /// Seed of the Gaussian inputs.
    pub seed: u64,
    /// The matched tensors (covered by the digest and the globs, so not a key field).
    pub tensors: Vec<StudyTensor>,
}

fn hex(d: &[u8; 32]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

impl Trial for CheckpointTrial {
    fn describe(&self, f: &mut Fields) {
        // The files' contents, not their names: a checkpoint renamed or moved keeps its
        // studies (regression: renaming one re-ran every layer study).
        f.column_only("checkpoint.file", || Value::Str(self.file.clone()));
        f.both("digest", "checkpoint.blake3", &hex(&self.digest));
        f.key_only("globs", || {
            CanonValue::List(self.globs.iter().cloned().map(CanonValue::Str).collect())
        });
        f.column_only("checkpoint.layers", || Value::ListStr(self.globs.clone()));
        f.key_only("conv", || CanonValue::U64(u64::from(self.conv)));
        f.column_only("checkpoint.conv", || Value::Bool(self.conv));
        f.key_only("calibration", || match &self.calibration {
            Some((_, _, digest)) => CanonValue::List(vec![CanonValue::Bytes(digest.to_vec())]),
            None => CanonValue::List(vec![]),
        });
        f.column_only("checkpoint.calibration", || match &self.calibration {
            Some((_, file, _)) => Value::Str(file.clone()),
            None => Value::Str("gaussian".into()),
        });
        f.key_only("gaussian", || canon_u64s([self.tokens, self.seed]));
        f.column_only("checkpoint.calibration_tokens", || {
            Value::I64(self.tokens as i64)
        });
    }

    fn label(&self) -> String {
        format!("{} ({} tensors)", self.file, self.tensors.len())
    }
}

/// Plans the experiment's checkpoint (none unless it is a layer study).
pub fn plan(p: &mut Planner) -> Result<(), PlanError> {
    if let Some(c) = &p.experiment().study {
        p.add::<Checkpoint>(c.clone(), ());
    }
    Ok(())
}
