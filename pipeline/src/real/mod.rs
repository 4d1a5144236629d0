//! The product's stages: thin adapters from each stage kind's trial and inputs to the pure
//! functions of the `stages` crate and the loaders of `datasets`, one module per stage, and the
//! product's stage table ([`table`]).
//!
//! Artifacts per stage: dataset → `dataset.txt`; train → `weights.safetensors`; prune →
//! `weights.safetensors` (dense with exact zeros) and `masks.bin` (from which evaluate re-packs
//! each layer exactly); calibrate → `calibration.txt` (the cost model's corrections for one
//! kernel family on this CPU); kernel_tune → `tuned.txt` (best sparse and dense points); checkpoint →
//! `tensors.safetensors` (the studied tensors as f32 matrices) and `calibration.safetensors`
//! (their inputs from the user's file, if any); layer_study → `masks.bin`.
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
mod masks;
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

use crate::stage::StageTable;
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
    /// The data set of a spec, loaded once per process.
    pub fn load(
        &self,
        spec: &datasets::DatasetSpec,
    ) -> Result<Arc<datasets::Dataset>, datasets::DatasetError> {
        // A process-local cache, not a content key: the spec's Debug form identifies it.
        let id = format!("{spec:?}");
        if let Some(ds) = self.loaded.lock().ok().and_then(|m| m.get(&id).cloned()) {
            return Ok(ds);
        }
        let ds = Arc::new(datasets::load(spec)?);
        if let Ok(mut m) = self.loaded.lock() {
            m.insert(id, ds.clone());
        }
        Ok(ds)
    }
}
