//! The experiment file as written: serde types that mirror the TOML, with spans kept on every
//! value that a later check may need to point at. Enumerated values are the domain enums of
//! the crates that own them, read by their tags.

use super::axis::Axis;
pub use datasets::Source as DatasetSource;
pub use kernels::PatternKind;
use serde::Deserialize;
pub use stages::kernel_tune::{Backend, StrategyKind};
pub use stages::{CalibrationInputs, MethodKind, ModelKind, Optimizer, ScheduleKind, Scope};
use toml::Spanned;

/// A whole experiment file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExperiment {
    /// Experiment name: names the result folder.
    pub name: Spanned<String>,
    /// Seed of everything random (training init, shuffles, random search).
    #[serde(default)]
    pub seed: u64,
    /// Where the data comes from (absent in a kernel-only study).
    pub dataset: Option<RawDataset>,
    /// The network (absent in a kernel-only study).
    pub model: Option<RawModel>,
    /// Training settings.
    pub train: Option<RawTrain>,
    /// The accuracy search space: how to prune.
    pub prune: Option<Spanned<RawPrune>>,
    /// The performance search space: how to run the sparse products.
    pub kernel_tune: Option<Spanned<RawKernelTune>>,
    /// Evaluation settings.
    pub evaluate: Option<RawEvaluate>,
    /// Search strategy over the joint space.
    pub search: Option<RawSearch>,
}

/// `[dataset]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDataset {
    /// Which loader.
    pub source: Spanned<DatasetSource>,
    /// synthetic: number of samples.
    pub samples: Option<Spanned<u64>>,
    /// synthetic: number of input features.
    pub features: Option<Spanned<u64>>,
    /// synthetic: number of classes.
    pub classes: Option<Spanned<u64>>,
    /// idx: training images file.
    pub train_images: Option<Spanned<String>>,
    /// idx: training labels file.
    pub train_labels: Option<Spanned<String>>,
    /// idx: test images file.
    pub test_images: Option<Spanned<String>>,
    /// idx: test labels file.
    pub test_labels: Option<Spanned<String>>,
    /// parquet/csv: the table file.
    pub path: Option<Spanned<String>>,
    /// parquet/csv: the label column.
    pub label: Option<Spanned<String>>,
    /// Fraction held out for testing (digits, synthetic, tables).
    pub test_fraction: Option<Spanned<f64>>,
}

/// `[model]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModel {
    /// mlp | cnn | transformer.
    pub kind: Spanned<ModelKind>,
    /// Hidden layer widths (mlp) or the dense head widths (cnn).
    #[serde(default)]
    pub hidden: Vec<Spanned<u64>>,
    /// Convolution channels (cnn only).
    #[serde(default)]
    pub channels: Vec<Spanned<u64>>,
    /// Encoder blocks (transformer), or the globs naming a checkpoint's studied tensors
    /// (checkpoint).
    pub layers: Option<Spanned<LayersField>>,
    /// Width of the residual stream (transformer only).
    pub d_model: Option<Spanned<u64>>,
    /// Attention heads, dividing `d_model` (transformer only).
    pub heads: Option<Spanned<u64>>,
    /// Hidden width of each block's MLP (transformer only).
    pub d_ff: Option<Spanned<u64>>,
    /// Patch side on image data, features per token otherwise (transformer only).
    pub patch: Option<Spanned<u64>>,
    /// The safetensors file of a layer study (checkpoint only), relative to the experiment file.
    pub path: Option<Spanned<String>>,
    /// Whether 4-D tensors are convolution weights, studied as `out × in·kh·kw` (checkpoint).
    pub conv: Option<Spanned<bool>>,
    /// A safetensors file of calibration inputs, one `tokens × cols` tensor per studied tensor,
    /// under the same name (checkpoint; Gaussian inputs where absent).
    pub calibration: Option<Spanned<String>>,
    /// Gaussian calibration tokens per tensor without a file's inputs (checkpoint; default 256).
    pub calibration_tokens: Option<Spanned<u64>>,
}

/// `[model] layers`: a transformer's block count, or a checkpoint's tensor globs.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "expected a transformer's block count (layers = 2) or a checkpoint's list of tensor-name globs (layers = [\"encoder.*.weight\"])"
)]
pub enum LayersField {
    /// Encoder blocks.
    Count(u64),
    /// Tensor-name globs.
    Globs(Vec<String>),
}

/// `[train]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTrain {
    /// Epochs (axis).
    pub epochs: Spanned<Axis<u64>>,
    /// Batch size (axis).
    pub batch_size: Spanned<Axis<u64>>,
    /// Learning rate (axis).
    pub lr: Spanned<Axis<f64>>,
    /// Optimiser (default adamw).
    pub optimizer: Option<Spanned<Optimizer>>,
    /// Weight decay (default 0).
    pub weight_decay: Option<Spanned<f64>>,
}

/// `[prune]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPrune {
    /// Patterns (axis).
    pub pattern: Spanned<Axis<PatternKind>>,
    /// Target sparsity (axis; unstructured, vector, and nm/vnm when `nm` is absent).
    pub sparsity: Option<Spanned<Axis<f64>>>,
    /// Explicit N:M values such as "2:8" (axis; nm and vnm).
    pub nm: Option<Spanned<Axis<String>>>,
    /// Vector length V (axis; vnm and vector only).
    pub v: Option<Spanned<Axis<u64>>>,
    /// Methods (axis; not for dense).
    pub method: Option<Spanned<Axis<MethodKind>>>,
    /// Schedule (axis; not for dense).
    pub schedule: Option<Spanned<Axis<ScheduleKind>>>,
    /// Fine-tuning epochs after pruning (default 0).
    pub finetune_epochs: Option<Spanned<u64>>,
    /// Fine-tuning learning rate (default: the training learning rate).
    pub finetune_lr: Option<Spanned<f64>>,
    /// Globs of layer names kept dense whatever the pattern (default: a transformer's
    /// `embed` and `head`, no layer of the other models).
    pub keep_dense: Option<Spanned<Vec<String>>>,
    /// OBS: gradients G for the empirical Fisher (default 256).
    pub obs_gradients: Option<Spanned<u64>>,
    /// OBS: Fisher block size B (default 64).
    pub obs_block: Option<Spanned<u64>>,
    /// OBS: dampening λ relative to the mean Fisher diagonal of each layer (default 0.01).
    pub obs_damp: Option<Spanned<f64>>,
    /// Gradual: pruning steps (default 4).
    pub gradual_steps: Option<Spanned<u64>>,
    /// SparseGPT, Wanda: calibration samples drawn from the training split (default 512).
    pub calibration_samples: Option<Spanned<u64>>,
    /// SparseGPT, Wanda: which model calibration runs through (default sequential).
    pub calibration: Option<Spanned<CalibrationInputs>>,
    /// SparseGPT: dampening λ relative to the mean Hessian diagonal (default 0.01).
    pub sparsegpt_damp: Option<Spanned<f64>>,
    /// SparseGPT: columns per lazy update (default 128).
    pub sparsegpt_block: Option<Spanned<u64>>,
    /// SparseGPT, Wanda: unstructured sparsity per layer or per output row (default: layer for
    /// SparseGPT, row for Wanda).
    pub unstructured_scope: Option<Spanned<Scope>>,
    /// Extra points outside the grid.
    #[serde(default)]
    pub include: Vec<Spanned<RawPoint>>,
    /// Points removed from the grid (every field given must match).
    #[serde(default)]
    pub exclude: Vec<Spanned<RawPoint>>,
}

/// A single point of the prune space (`[[prune.include]]` / `[[prune.exclude]]`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPoint {
    /// Pattern.
    pub pattern: Option<Spanned<PatternKind>>,
    /// Sparsity.
    pub sparsity: Option<Spanned<f64>>,
    /// N:M as "2:8".
    pub nm: Option<Spanned<String>>,
    /// V.
    pub v: Option<Spanned<u64>>,
    /// Method.
    pub method: Option<Spanned<MethodKind>>,
    /// Schedule.
    pub schedule: Option<Spanned<ScheduleKind>>,
}

/// `[kernel_tune]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKernelTune {
    /// Backends (axis).
    pub backend: Option<Spanned<Axis<Backend>>>,
    /// Strategy (default model).
    pub strategy: Option<Spanned<StrategyKind>>,
    /// Measurements per (format, shape) for random/model (default 24).
    pub budget: Option<Spanned<u64>>,
    /// Batch tokens N of the products (axis).
    pub batch_tokens: Option<Spanned<Axis<u64>>>,
    /// Kernel-only study: the layer shapes [rows, cols] to tune.
    pub shapes: Option<Spanned<Vec<Spanned<Vec<u64>>>>>,
    /// Calibrate the CPU cost model on this device before tuning (default true).
    pub calibrate: Option<Spanned<bool>>,
}

/// `[evaluate]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawEvaluate {
    /// Batch sizes at which latency is measured.
    pub batch_sizes: Option<Spanned<Vec<Spanned<u64>>>>,
    /// Run layers dense where their sparse kernel loses to the dense one (default false).
    pub dense_where_faster: Option<Spanned<bool>>,
}

keytag::tagged_enum! {
    /// Search strategies over the joint space.
    pub enum SearchStrategy {
        /// Run every trial.
        Grid = "grid",
        /// Search both spaces together in rounds, spending fine-tune epochs only on the
        /// candidates the predictors put on or near the front.
        Unified = "unified",
    }
}

/// `[search]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSearch {
    /// grid or unified.
    pub strategy: Spanned<SearchStrategy>,
    /// unified: every prunable layer takes its own point.
    pub per_layer: Option<Spanned<bool>>,
    /// unified: the batch size whose latency is the objective.
    pub batch_size: Option<Spanned<u64>>,
    /// unified: fine-tune epochs the search may spend.
    pub budget_epochs: Option<Spanned<u64>>,
    /// unified: full trials chosen per round (at most).
    pub per_round: Option<Spanned<u64>>,
    /// unified: the least accuracy a trial may have.
    pub min_accuracy: Option<Spanned<f64>>,
    /// unified: the most latency (µs at `batch_size`) a trial may have.
    pub max_latency_us: Option<Spanned<f64>>,
    /// unified: the least speedup over dense (at `batch_size`) a trial may have.
    pub min_speedup: Option<Spanned<f64>>,
}
