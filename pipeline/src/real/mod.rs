//! The product's stages: thin adapters from each stage kind's trial and inputs to the pure
//! functions of the `stages` crate and the loaders of `datasets`, one module per stage, and the
//! product's stage table ([`table`]).
//!
//! Artifacts per stage: dataset → `dataset.txt`; train → `weights.safetensors`; prune →
//! `weights.safetensors` (dense with exact zeros) and `masks.bin` (from which evaluate re-packs
//! each layer exactly); calibrate → `calibration.txt` (the cost model's corrections for one
//! kernel family on this CPU); kernel_tune → `tuned.txt` (best sparse and dense points); checkpoint →
//! `tensors.safetensors` (the studied tensors as f32 matrices) and `calibration.safetensors`
//! (their inputs from the user's file, if any); layer_study → `masks.bin`. `cotune store export`
//! also writes masks as safetensors ([`masks::export`]).
//!
//! Backend `cuda` runs kernel_tune and evaluate on the process's one CUDA device
//! ([`stages::kernel_tune::cuda::shared_device`]); its trials carry the device's fingerprint,
//! or why there is none, and then fail with "cuda backend unavailable".

mod calibrate;
mod checkpoint;
mod dataset;
mod evaluate;
mod kernel_tune;
mod layer_study;
pub(crate) mod masks;
mod prune;
mod rows;
mod train;

pub use calibrate::CalibrateStage;
pub use checkpoint::CheckpointStage;
pub use dataset::DatasetStage;
pub use evaluate::EvaluateStage;
pub use kernel_tune::{kernel_version_with, KernelTuneStage};
pub use layer_study::LayerStudyStage;
pub use prune::PruneStage;
pub use train::TrainStage;

use crate::kinds::DatasetTrial;
use crate::stage::StageTable;
use datasets::DatasetError;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The product's stages in pipeline order; `store` is where they keep derived caches (the
/// CUDA backend's compiled PTX, in `ptx/`).
pub fn table(store: &Path) -> StageTable {
    stages::tune_malloc();
    stages::kernel_tune::cuda::use_ptx_cache_in(store.join("ptx"));
    let data = Arc::new(Datasets::default());
    StageTable::new()
        .with(DatasetStage(data.clone()))
        .with(TrainStage(data.clone()))
        .with(PruneStage(data.clone()))
        .with(CheckpointStage)
        .with(LayerStudyStage)
        .with(CalibrateStage)
        .with(KernelTuneStage)
        .with(EvaluateStage(data))
}

/// Data sets loaded in this process, shared by the stages that read them.
#[derive(Default)]
pub struct Datasets {
    loaded: Mutex<HashMap<String, Arc<datasets::Dataset>>>,
}

impl Datasets {
    /// The data set of a trial, loaded once per process and per version of its files.
    pub fn load(&self, trial: &DatasetTrial) -> Result<Arc<datasets::Dataset>, DatasetError> {
        // A process-local cache, not a content key: the spec's Debug form and the digests of
        // its files (read when the experiment was validated) identify it, so that a `watch`
        // that re-plans after a data file changed loads the new file, not the copy from before.
        let id = format!("{:?} {:?}", trial.spec, trial.file_digests);
        if let Some(ds) = self.loaded.lock().ok().and_then(|m| m.get(&id).cloned()) {
            return Ok(ds);
        }
        let ds = Arc::new(datasets::load(&trial.spec)?);
        if let Ok(mut m) = self.loaded.lock() {
            m.insert(id, ds.clone());
        }
        Ok(ds)
    }
}

#[cfg(test)]
mod tests {
    use super::Datasets;
    use crate::kinds::DatasetTrial;
    use datasets::{DatasetSpec, TableSpec};

    /// Regression: the cache was keyed by the spec alone, so a process that re-planned after
    /// the data file changed (`watch`) trained on the copy loaded before.
    #[test]
    fn a_changed_data_file_is_loaded_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.csv");
        let trial = |text: &str| {
            std::fs::write(&path, text).unwrap();
            DatasetTrial {
                spec: DatasetSpec::Csv(TableSpec::new(&path, "y")),
                files: vec!["d.csv".into()],
                file_digests: vec![*blake3::hash(text.as_bytes()).as_bytes()],
            }
        };
        let rows = |n: usize| {
            let mut t = String::from("a,y\n");
            for i in 0..n {
                t += &format!("{i},{}\n", i % 2);
            }
            t
        };
        let data = Datasets::default();
        let first = data.load(&trial(&rows(10))).unwrap();
        let again = data.load(&trial(&rows(10))).unwrap();
        assert!(
            std::sync::Arc::ptr_eq(&first, &again),
            "same files: the cached copy"
        );
        let changed = data.load(&trial(&rows(20))).unwrap();
        let n = |d: &datasets::Dataset| d.train_y.len() + d.test_y.len();
        assert_eq!((n(&first), n(&changed)), (10, 20));
    }
}
