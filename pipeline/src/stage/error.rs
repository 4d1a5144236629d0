//! Typed failures: [`StageError`] is what a stage's own work fails with; [`RunError`] is what
//! running an instance through the engine fails with (its inputs, the store, a panic, or the
//! stage). A failed instance's row carries the message, which names the value at fault.

use crate::key::AnyKey;
use crate::store::StoreError;
use stages::kernel_tune::Backend;
use std::path::PathBuf;

/// Why a stage could not produce its entry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StageError {
    /// Training, pruning, tuning or evaluation failed.
    #[error(transparent)]
    Stage(#[from] stages::StageError),
    /// The data set could not be loaded.
    #[error(transparent)]
    Dataset(#[from] datasets::DatasetError),
    /// A mask, format or kernel call failed.
    #[error(transparent)]
    Kernel(#[from] kernels::KernelError),
    /// An artifact could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// An artifact is not what its stage writes.
    #[error("{}: {what}", path.display())]
    Artifact {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// The trial's backend could not be opened when it was planned.
    #[error("{backend} backend unavailable: {why}")]
    Unavailable {
        /// The backend.
        backend: Backend,
        /// Why.
        why: String,
    },
    /// A layer of a pruned model has no tuning of its format among the evaluation's inputs.
    #[error("no kernel tuning for layer {layer} ({format})")]
    NoTuning {
        /// The layer.
        layer: String,
        /// Its format.
        format: String,
    },
    /// The per-host measurement lock could not be taken.
    #[error("measurement lock: {0}")]
    MeasureLock(#[source] StoreError),
    /// An input's entry could not be read.
    #[error(transparent)]
    Input(Box<RunError>),
    /// A stage's own failure, in words.
    #[error("{0}")]
    Failed(String),
}

impl From<RunError> for StageError {
    fn from(e: RunError) -> Self {
        StageError::Input(Box::new(e))
    }
}

impl StageError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StageError {
        let path = path.into();
        move |source| StageError::Io { path, source }
    }
}

/// Why an instance did not produce its entry.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The stage failed.
    #[error(transparent)]
    Stage(#[from] StageError),
    /// An input failed, so this instance was not run.
    #[error("{stage} {} failed: {error}", key.short())]
    InputFailed {
        /// The input's stage.
        stage: &'static str,
        /// The input.
        key: AnyKey,
        /// Its error.
        error: String,
    },
    /// An input's entry is not in the store.
    #[error("input {stage} {} is missing from the store", key.short())]
    InputMissing {
        /// The input's stage.
        stage: &'static str,
        /// The input.
        key: AnyKey,
    },
    /// An input's entry failed verification.
    #[error("input {stage} {} is damaged in the store: {why}", key.short())]
    InputDamaged {
        /// The input's stage.
        stage: &'static str,
        /// The input.
        key: AnyKey,
        /// What is wrong.
        why: String,
    },
    /// A key the dataflow carries is not in the plan (an engine bug).
    #[error("key {} is not in the plan", key.short())]
    NotPlanned {
        /// The key.
        key: AnyKey,
    },
    /// A key planned for one stage was asked for as another's (an engine bug).
    #[error("key {} is a {found} instance, not a {expected} one", key.short())]
    WrongStage {
        /// The key.
        key: AnyKey,
        /// Its stage.
        found: &'static str,
        /// The stage asked for.
        expected: &'static str,
    },
    /// No stage of the table runs this key's stage (an engine bug).
    #[error("no stage `{stage}` in the stage table")]
    NoSuchStage {
        /// The stage name.
        stage: &'static str,
    },
    /// The stage panicked; the panic was caught and this instance failed.
    #[error("stage panicked: {0}")]
    Panicked(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}
