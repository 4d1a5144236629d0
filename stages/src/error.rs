//! [`StageError`]: what the train and prune stages can fail with.

use std::path::PathBuf;

/// Why a stage could not produce its artifact.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StageError {
    /// The stage's configuration is unusable with these inputs (the message names the value).
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    /// The data set could not be loaded.
    #[error(transparent)]
    Dataset(#[from] datasets::DatasetError),
    /// A mask or sparse format could not be built.
    #[error("kernels: {0}")]
    Kernel(#[from] kernels::KernelError),
    /// One layer could not be pruned (a singular Hessian, a non-finite update): the layer and why.
    #[error("layer {layer}: {what}")]
    Layer {
        /// The layer's name.
        layer: String,
        /// What went wrong.
        what: String,
    },
    /// The CUDA backend could not run (no device, or no kernel point could be measured).
    #[error("cuda: {0}")]
    Cuda(String),
    /// candle failed (shape mismatch between weights and data, …).
    #[error("candle: {0}")]
    Candle(#[from] candle_core::Error),
    /// Training diverged: the loss became NaN or infinite.
    #[error("training diverged at epoch {epoch}: loss {loss}")]
    Diverged {
        /// Epoch (0-based) where it happened.
        epoch: usize,
        /// The loss value.
        loss: f32,
    },
    /// A weights file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A weights file is not a valid cotune safetensors file.
    #[error("{}: {what}", path.display())]
    BadWeights {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}
