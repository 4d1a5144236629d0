//! What an evaluation measured: the layers it ran, and its latencies, speedups and bytes.

use super::paired::Speedup;
use crate::kernel_tune::Timing;
use crate::model::{Arch, Weights};
use kernels::{ParamPoint, SparseMatrix};

/// A layer's tuned configs, one per tuned batch-token count.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerTuning {
    /// Batch tokens the tuning measured at.
    pub batch_tokens: usize,
    /// Best sparse-kernel point.
    pub params: ParamPoint,
    /// Best dense-baseline point on the same shape.
    pub dense_params: ParamPoint,
}

/// One layer ready to run.
#[derive(Clone, Debug)]
pub struct LayerRun {
    /// Name.
    pub name: String,
    /// Packed weights (out × in).
    pub matrix: SparseMatrix,
    /// Bias (out).
    pub bias: Vec<f32>,
    /// Tunings of this layer's format.
    pub tunings: Vec<LayerTuning>,
}

/// Latency at one batch size.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchLatency {
    /// Batch size.
    pub batch: usize,
    /// End to end through the sparse kernels.
    pub sparse: Timing,
    /// End to end through the tuned dense kernel (same shapes, all weights dense), timed in
    /// alternation with `sparse`.
    pub dense: Timing,
    /// `dense / sparse` end to end, from the alternating pairs (see [`super::alternate`]).
    pub speedup: Speedup,
    /// The part of each sparse pass outside the GEMMs (activations other than ReLU, im2col,
    /// pooling, norms, attention), per pass: the pass's time minus its GEMMs' times (a GEMM's
    /// time includes taking its output buffer and its fused bias and ReLU). NaN on CUDA, whose host part is not timed.
    pub non_gemm: Timing,
    /// Per layer through the sparse kernels, on the layer's input at this batch size.
    pub per_layer: Vec<Timing>,
    /// Per layer through the tuned dense kernel, on the same inputs, in alternation with
    /// `per_layer`.
    pub per_layer_dense: Vec<Timing>,
    /// Per layer, `dense / sparse` from the alternating pairs.
    pub per_layer_speedup: Vec<Speedup>,
    /// Per layer, its GEMM's time inside the sparse passes above (with its bias and
    /// activation), beside `per_layer`, its time alone: where a model loses its layers'
    /// speedup. Empty on CUDA.
    pub per_layer_in_pass: Vec<Timing>,
    /// The same inside the dense passes.
    pub per_layer_dense_in_pass: Vec<Timing>,
    /// How many layers ran a point tuned at another batch size that was not valid at this one
    /// (the cost model's best valid point was used instead).
    pub fallbacks: usize,
    /// How the sparse pass and the dense pass ran their dense-format layers: `tuned`, or all
    /// on `faer` or on `gemm` (whichever dense pass was fastest, see `dense_variants`; the
    /// sparse pass runs its dense-format layers as the dense pass does); on CUDA, `tuned` and
    /// `cublas`.
    pub dense_kernels: [&'static str; 2],
    /// How many slices of samples both passes were cut into, each slice run through the whole
    /// model on one thread at the same time as the others (the evaluation times every way and
    /// keeps the one whose dense pass was fastest; see `evaluate::slices`); 1: one slice, run
    /// whole (every product shared by the threads, or on one thread) unless `pass_chunk` says it
    /// ran in chunks, and always on CUDA.
    pub pass_slices: usize,
    /// The most samples a slice ran through the model at a time: where a slice's activations
    /// outgrow the L2 cache, the evaluation also times the slices run in chunks of samples,
    /// one after the other (`evaluate::cut::chunk_for`); a slice's samples when it ran in
    /// one piece, the batch when the passes ran whole, and always on CUDA.
    pub pass_chunk: usize,
    /// Per layer, whether the passes ran it through its dense kernel (evaluate's
    /// `dense_where_faster`: its sparse kernel lost to it alone, and the model ran faster with
    /// such layers dense; `cpu::batch_latency`). The end-to-end figures are then that mixed
    /// model's; `per_layer*` stay each layer's own kernels' figures.
    pub ran_dense: Vec<bool>,
    /// Per layer, the kernel and point the sparse pass ran it with ([`point_label`]).
    pub layer_kernels: Vec<String>,
}

/// What ends [`point_label`] where the cost model chose the point.
pub const COST_MODEL_MARK: &str = " (cost model)";

/// A layer's kernel and point as a pass ran them: `cpu-vnm k_chunk=0,…,tile_n=32` (the
/// `kernel` and `params` of a kernel_tune row), with ` (cost model)` where no tuning guided
/// the batch and the cost model's best point ran instead.
pub fn point_label(kernel: &str, point: &ParamPoint, fell_back: bool) -> String {
    let mark = if fell_back { COST_MODEL_MARK } else { "" };
    format!(
        "{kernel} {}{mark}",
        crate::kernel_tune::format_params(point)
    )
}

/// What an evaluation measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// Test accuracy through the sparse kernels.
    pub accuracy: f64,
    /// Largest |sparse − reference| over the test logits, relative to the largest |reference|.
    pub max_rel_error: f64,
    /// One entry per batch size.
    pub latencies: Vec<BatchLatency>,
    /// Packed bytes of all layers (values and metadata).
    pub weight_bytes: usize,
    /// Bytes of the same layers stored dense.
    pub dense_weight_bytes: usize,
    /// What the dense baseline computes (architecture and layer shapes): rows with the same
    /// value share their dense model, so their paired speedups compare latencies measured
    /// against the same reference.
    pub dense_model: String,
    /// Each layer's multiply-adds per sample with dense weights (tokens × rows × columns): the
    /// weights of [`Self::layers_speedup`].
    pub layer_macs: Vec<f64>,
    /// The layers' names, in forward order (the order of every per-layer list).
    pub layer_names: Vec<String>,
}

impl Evaluation {
    /// What the layers' own speedups predict for the pass at `l`'s batch: the harmonic mean of
    /// `l.per_layer_speedup` weighted by each layer's dense multiply-adds, `Σ m / Σ (m / s)`
    /// (NaN without layers).
    ///
    /// Speedups are rates, so they average harmonically: with each layer's dense time in
    /// proportion to its multiply-adds, a model whose layers run at `s` on their share of the
    /// work takes `Σ (m / s)` where dense takes `Σ m`. The arithmetic mean overstates it whenever
    /// the layers differ: two equal layers at 1× and 4× give 2.5× by the arithmetic mean, and
    /// 1.6× is all the model can reach. On the quickstart's vector-wise models (a 64-column first
    /// layer at 2×, the 256×256 layer at 3.8×) the arithmetic mean read 3.3× where the layers'
    /// own times summed predict about 3.0×.
    ///
    /// A layer the pass ran dense (`l.ran_dense`) counts at 1: its dense kernel's speed.
    pub fn layers_speedup(&self, l: &BatchLatency) -> f64 {
        let total: f64 = self.layer_macs.iter().sum();
        let time: f64 = l
            .per_layer_speedup
            .iter()
            .zip(&self.layer_macs)
            .enumerate()
            .map(|(i, (s, m))| {
                let dense = l.ran_dense.get(i).copied().unwrap_or(false);
                m / if dense { 1.0 } else { s.median }
            })
            .sum();
        total / time
    }
}

/// Each layer's dense multiply-adds per sample (see [`Evaluation::layer_macs`]).
pub(super) fn layer_macs(model: &Weights) -> Vec<f64> {
    model
        .layers
        .iter()
        .zip(model.layer_tokens())
        .map(|(l, t)| (t * l.rows() * l.cols()) as f64)
        .collect()
}

/// The architecture and layer shapes of `model`, as [`Evaluation::dense_model`] names them.
pub(super) fn dense_model(model: &Weights) -> String {
    let arch = match &model.arch {
        Arch::Chain => "chain".to_owned(),
        Arch::Transformer(t) => format!(
            "transformer {} blocks, d_model {}, {} heads, d_ff {}",
            t.blocks, t.d_model, t.heads, t.d_ff
        ),
    };
    let shapes: Vec<String> = model
        .layers
        .iter()
        .map(|l| {
            let dims: Vec<String> = l.shape.iter().map(usize::to_string).collect();
            format!("{}:{}", l.name, dims.join("x"))
        })
        .collect();
    format!("{arch}; {}", shapes.join(","))
}

/// Packed bytes of the layers, and the bytes of the same layers stored dense (f32).
pub(super) fn weight_bytes(layers: &[LayerRun]) -> (usize, usize) {
    let packed = layers.iter().map(|l| l.matrix.bytes()).sum();
    let dense = layers
        .iter()
        .map(|l| l.matrix.rows() * l.matrix.cols() * 4)
        .sum();
    (packed, dense)
}
