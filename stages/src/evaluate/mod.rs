//! Evaluation of a pruned model through the sparse kernels with each layer's tuned config:
//! accuracy (checked against the masked dense reference), end-to-end and per-layer latency per
//! batch size, packed weight bytes, and the same model run densely with the tuned dense kernel.
//!
//! Layout: activations travel transposed (features × columns, a column per sample or per
//! sample and position), so each layer is exactly the kernels' `C = A · B` with A the layer's
//! weights (out × in); the architecture around the GEMMs ([`graph`]) is computed on the host,
//! the same code for the sparse kernels and for the f64 masked dense reference.
//!
//! Timing: [`paired`] measures passes in shuffled rounds and derives paired speedups;
//! `passes` times a model against its dense baseline with them.
//!
//! [`evaluate`] runs the CPU kernels; [`cuda::evaluate_cuda`] the CUDA kernels (fp16, its own
//! tolerance and latency definition, see there).

mod attention;
pub mod cuda;
mod encoder_ops;
mod graph;
mod paired;
mod passes;

pub use paired::{alternate, speedup, Speedup};
use passes::{paired_passes, run_cpu, PairedPasses};

use crate::kernel_tune::{summarise, Timing};
use crate::model::{Arch, Layer, LayerKind, Weights};
use crate::StageError;
use datasets::Dataset;
use kernels::{FormatSignature, ParamPoint, SparseMatrix};

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
    /// `dense / sparse` end to end, from the alternating pairs (see [`paired`]).
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
    /// How many layers ran a point tuned at another batch size that was not valid at this one
    /// (the cost model's best valid point was used instead).
    pub fallbacks: usize,
    /// How the sparse pass and the dense pass ran their dense-format layers: `tuned`, or all
    /// on `faer` or on `gemm` (whichever dense pass was fastest, see `dense_variants`; the
    /// sparse pass runs its dense-format layers as the dense pass does); on CUDA, `tuned` and
    /// `cublas`.
    pub dense_kernels: [&'static str; 2],
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
    pub fn layers_speedup(&self, l: &BatchLatency) -> f64 {
        let total: f64 = self.layer_macs.iter().sum();
        let time: f64 = l
            .per_layer_speedup
            .iter()
            .zip(&self.layer_macs)
            .map(|(s, m)| m / s.median)
            .sum();
        total / time
    }
}

/// Each layer's dense multiply-adds per sample (see [`Evaluation::layer_macs`]).
fn layer_macs(model: &Weights) -> Vec<f64> {
    model
        .layers
        .iter()
        .zip(model.layer_tokens())
        .map(|(l, t)| (t * l.rows() * l.cols()) as f64)
        .collect()
}

/// The architecture and layer shapes of `model`, as [`Evaluation::dense_model`] names them.
fn dense_model(model: &Weights) -> String {
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

/// Tolerance of the agreement with the masked dense reference.
pub const TOLERANCE: f64 = 1e-4;

/// The point a layer (or, with `dense`, its dense baseline) runs at batch size `n`: the tuning
/// nearest in batch tokens when it is within 4× of `n` and valid there, else the cost model's
/// best point (the `bool` says a fallback was taken).
fn params_for(layer: &LayerRun, n: usize, dense: bool) -> (ParamPoint, bool) {
    let sig = if dense {
        dense_sig(&layer.matrix)
    } else {
        layer.matrix.signature()
    };
    let space = kernels::cpu_space(&sig, n);
    if let Some(t) = guiding_tuning(&layer.tunings, n) {
        let p = if dense { &t.dense_params } else { &t.params };
        if space.contains(p).is_ok() {
            return (p.clone(), false);
        }
    }
    let best = space
        .points()
        .into_iter()
        .min_by(|a, b| {
            kernels::predicted_cost(&sig, n, a).total_cmp(&kernels::predicted_cost(&sig, n, b))
        })
        .unwrap_or_default();
    (best, true)
}

/// The tuning that guides batch size `n`: the nearest in batch tokens, if it is within 4×. A
/// point tuned for a batch more than 4× larger or smaller is no guide (e.g. two threads tuned
/// at 64 columns cost more in pool hand-off than a batch of 1 computes): the cost model's best
/// point for this batch is used instead, counted as a fallback.
fn guiding_tuning(tunings: &[LayerTuning], n: usize) -> Option<&LayerTuning> {
    nearest_tuning(tunings, n)
        .filter(|&(_, d)| d <= 4f64.ln() + 1e-9)
        .map(|(t, _)| t)
}

/// The tuning nearest to batch size `n` in log batch tokens, with that distance.
fn nearest_tuning(tunings: &[LayerTuning], n: usize) -> Option<(&LayerTuning, f64)> {
    tunings
        .iter()
        .map(|t| {
            let d = ((t.batch_tokens.max(1) as f64).ln() - (n.max(1) as f64).ln()).abs();
            (t, d)
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// Packed bytes of the layers, and the bytes of the same layers stored dense (f32).
fn weight_bytes(layers: &[LayerRun]) -> (usize, usize) {
    let packed = layers.iter().map(|l| l.matrix.bytes()).sum();
    let dense = layers
        .iter()
        .map(|l| l.matrix.rows() * l.matrix.cols() * 4)
        .sum();
    (packed, dense)
}

fn dense_sig(m: &SparseMatrix) -> FormatSignature {
    FormatSignature::for_pattern(&kernels::Pattern::Dense, m.rows(), m.cols())
        .expect("dense fits every shape")
}

/// Adds each row's bias to a layer's output (`rows × batch`, row-major) and applies ReLU unless
/// it is the last layer.
fn add_bias_relu(out: &mut [f32], bias: &[f32], batch: usize, relu: bool) {
    for (row, b) in out.chunks_mut(batch.max(1)).zip(bias) {
        for v in row.iter_mut() {
            let x = *v + b;
            // An unconditional store (see `graph::relu`); NaN stays NaN.
            *v = if relu && x < 0.0 { 0.0 } else { x };
        }
    }
}

fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0f32; x.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = x[r * cols + c];
        }
    }
    t
}

/// A chain of the layers' linear products (ReLU between), for the backends that run MLPs
/// only: the structure [`agreement`]'s reference follows.
fn chain_of(layers: &[LayerRun]) -> Weights {
    Weights {
        layers: layers
            .iter()
            .map(|l| Layer {
                name: l.name.clone(),
                kind: LayerKind::Linear,
                shape: vec![l.matrix.rows(), l.matrix.cols()],
                weight: vec![],
                bias: l.bias.clone(),
            })
            .collect(),
        image_shape: None,
        arch: Arch::Chain,
        params: vec![],
    }
}

/// Checks that `layers` are `model`'s layers and that `model` maps the data's features to its
/// classes.
fn check_shapes(data: &Dataset, model: &Weights, layers: &[LayerRun]) -> Result<(), StageError> {
    let Some(last) = model.layers.last() else {
        return Err(StageError::InvalidConfig("the model has no layers".into()));
    };
    if model.n_features() != data.n_features || last.rows() != data.n_classes {
        return Err(StageError::InvalidConfig(format!(
            "the model maps {} features to {} classes, the data has {} and {}",
            model.n_features(),
            last.rows(),
            data.n_features,
            data.n_classes
        )));
    }
    let fits = layers.len() == model.layers.len()
        && layers.iter().zip(&model.layers).all(|(r, l)| {
            (r.matrix.rows(), r.matrix.cols()) == (l.rows(), l.cols()) && r.bias == l.bias
        });
    if !fits {
        return Err(StageError::InvalidConfig(
            "the packed layers are not the model's layers".into(),
        ));
    }
    Ok(())
}

/// What a pass over the test set found.
struct Agreement {
    /// Correct predictions.
    correct: usize,
    /// Largest |output − reference| over the logits.
    max_err: f64,
    /// Largest |reference| over the logits.
    max_ref: f64,
}

/// Runs `forward(xt, batch)` (features × batch in, classes × batch logits out) over the test
/// set in batches of 256 and compares it with the masked dense reference: `model`'s forward
/// pass in f64 with each layer's `to_dense()` packed weights.
fn agreement(
    data: &Dataset,
    model: &Weights,
    layers: &[LayerRun],
    mut forward: impl FnMut(&[f32], usize) -> Result<Vec<f32>, StageError>,
) -> Result<Agreement, StageError> {
    let dense: Vec<Vec<f64>> = layers
        .iter()
        .map(|l| l.matrix.to_dense().iter().map(|&w| w as f64).collect())
        .collect();
    let mut reference = |i: usize, x: &[f64], n: usize, act| -> Result<Vec<f64>, StageError> {
        let (rows, cols) = (layers[i].matrix.rows(), layers[i].matrix.cols());
        let mut out = vec![0f64; rows * n];
        for r in 0..rows {
            let o = &mut out[r * n..][..n];
            for k in 0..cols {
                let a = dense[i][r * cols + k];
                if a != 0.0 {
                    o.iter_mut()
                        .zip(&x[k * n..][..n])
                        .for_each(|(y, &b)| *y += a * b);
                }
            }
        }
        graph::finish(model, i, &mut out, n, act);
        Ok(out)
    };
    let n_test = data.test_y.len();
    let f = data.n_features;
    let (mut correct, mut max_err, mut max_ref) = (0usize, 0f64, 0f64);
    for start in (0..n_test).step_by(256) {
        let b = (n_test - start).min(256);
        let xt = transpose(&data.test_x[start * f..(start + b) * f], b, f);
        let logits = forward(&xt, b)?;
        let x64: Vec<f64> = xt.iter().map(|&v| v as f64).collect();
        let want = graph::forward(model, &x64, b, &mut reference)?;
        for (x, y) in logits.iter().zip(&want) {
            let err = (*x as f64 - y).abs();
            // `f64::max` would drop a NaN: a NaN logit makes the error NaN, which is refused.
            max_err = if err.is_nan() {
                f64::NAN
            } else {
                max_err.max(err)
            };
            max_ref = max_ref.max(y.abs());
        }
        for j in 0..b {
            let pred = (0..data.n_classes)
                .max_by(|&p, &q| logits[p * b + j].total_cmp(&logits[q * b + j]))
                .unwrap_or(0);
            correct += usize::from(pred as u32 == data.test_y[start + j]);
        }
    }
    Ok(Agreement {
        correct,
        max_err,
        max_ref,
    })
}

/// Each layer's point at batch size `b` (its GEMM has `b` times its tokens per sample as
/// columns), sparse or (`dense`) its dense baseline, and how many were fallbacks.
fn points_at(
    layers: &[LayerRun],
    tokens: &[usize],
    b: usize,
    dense: bool,
) -> (Vec<ParamPoint>, usize) {
    let mut fallbacks = 0;
    let points = layers
        .iter()
        .zip(tokens)
        .map(|(l, &t)| {
            let (p, fb) = params_for(l, b * t, dense);
            fallbacks += usize::from(fb);
            p
        })
        .collect();
    (points, fallbacks)
}

/// Evaluates `layers` (the packed GEMM layers of `model`, in its order) on `data`, measuring
/// latency at each batch size for about `seconds_per_batch` each. The caller holds the
/// measurement lock.
pub fn evaluate(
    data: &Dataset,
    model: &Weights,
    layers: &[LayerRun],
    batch_sizes: &[usize],
    seconds_per_batch: f64,
) -> Result<Evaluation, StageError> {
    check_shapes(data, model, layers)?;
    let (n_test, f) = (data.test_y.len(), data.n_features);
    let tokens = model.layer_tokens();
    let sparse: Vec<&SparseMatrix> = layers.iter().map(|l| &l.matrix).collect();
    // Accuracy and agreement with the reference, over the test set in batches of 256.
    let mut buffers = passes::Buffers::default();
    let agree = agreement(data, model, layers, |xt, b| {
        let (points, _) = points_at(layers, &tokens, b, false);
        run_cpu(model, (&sparse, &points), xt, b, &mut buffers, &mut 0.0)
    })?;
    let correct = agree.correct;
    let max_rel_error = agree.max_err / agree.max_ref.max(1.0);
    if max_rel_error.is_nan() || max_rel_error > TOLERANCE {
        return Err(StageError::InvalidConfig(format!(
            "sparse inference disagrees with the masked dense reference: max relative error {max_rel_error:e} > {TOLERANCE:e}"
        )));
    }
    // The dense baseline of each layer; a dense-format layer is its own baseline, the same
    // buffer: two copies of one matrix ran 0.75-1.23x of each other at batch 1 (a memory-bound
    // product, whose speed depends on where the allocator put the values).
    let dense_packed: Vec<Option<SparseMatrix>> = layers
        .iter()
        .map(|l| match l.matrix {
            SparseMatrix::Dense(_) => Ok(None),
            _ => SparseMatrix::from_masked(
                &kernels::Pattern::Dense,
                &l.matrix.to_dense(),
                &kernels::Mask::full(l.matrix.rows(), l.matrix.cols()),
            )
            .map(Some),
        })
        .collect::<Result<_, _>>()?;
    let dense: Vec<&SparseMatrix> = dense_packed
        .iter()
        .zip(layers)
        .map(|(d, l)| d.as_ref().unwrap_or(&l.matrix))
        .collect();
    let mut latencies = vec![];
    for &b in batch_sizes {
        let x = kernels::random_values(f * b, b as u64);
        let (points, fallbacks) = points_at(layers, &tokens, b, false);
        let (dense_points, _) = points_at(layers, &tokens, b, true);
        let PairedPasses {
            way,
            points,
            dense_points,
            e2e,
            dense_e2e,
            outside,
        } = paired_passes(
            model,
            (&sparse, &points),
            (&dense, &dense_points),
            &x,
            b,
            2.0 * seconds_per_batch,
        )?;
        let non_gemm = summarise(outside);
        let e2e_speedup = speedup(&e2e, &dense_e2e);
        let dense_t = summarise(dense_e2e);
        // Each layer on its own input of this batch.
        let mut inputs: Vec<Vec<f32>> = vec![vec![]; layers.len()];
        let mut capture = |i: usize, x: &[f32], n: usize, act| -> Result<Vec<f32>, StageError> {
            inputs[i] = x.to_vec();
            let mut out = vec![0f32; sparse[i].rows() * n];
            let epilogue = passes::epilogue(model, i, act);
            kernels::spmm_with(sparse[i], x, n, &mut out, &points[i], epilogue)?;
            Ok(out)
        };
        graph::forward(model, &x, b, &mut capture)?;
        let (mut per_layer, mut per_layer_dense, mut per_layer_speedup) = (vec![], vec![], vec![]);
        let share = seconds_per_batch / layers.len() as f64;
        for (i, input) in inputs.iter().enumerate() {
            let n = b * tokens[i];
            let mut out = vec![0f32; sparse[i].rows() * n];
            let mut dense_out = vec![0f32; sparse[i].rows() * n];
            let (s, d) = alternate(
                || kernels::spmm(sparse[i], input, n, &mut out, &points[i]),
                || kernels::spmm(dense[i], input, n, &mut dense_out, &dense_points[i]),
                3,
                200,
                share,
            )?;
            per_layer_speedup.push(speedup(&s, &d));
            per_layer.push(summarise(s));
            per_layer_dense.push(summarise(d));
        }
        latencies.push(BatchLatency {
            batch: b,
            sparse: summarise(e2e),
            dense: dense_t,
            speedup: e2e_speedup,
            non_gemm,
            per_layer,
            per_layer_dense,
            per_layer_speedup,
            fallbacks,
            dense_kernels: [way, way],
        });
    }
    let (weight_bytes, dense_weight_bytes) = weight_bytes(layers);
    Ok(Evaluation {
        accuracy: correct as f64 / n_test.max(1) as f64,
        max_rel_error,
        latencies,
        weight_bytes,
        dense_weight_bytes,
        dense_model: dense_model(model),
        layer_macs: layer_macs(model),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernels::{cpu_space, dense_space, synthetic, Pattern};

    #[test]
    fn a_tuning_far_from_the_batch_is_not_used() {
        let sig = FormatSignature::for_pattern(&Pattern::Nm { n: 2, m: 4 }, 32, 16).unwrap();
        // A point valid at every batch below (so only the distance rule can reject it).
        let tuned = cpu_space(&sig, 64)
            .points()
            .into_iter()
            .rfind(|p| {
                [1, 15, 257]
                    .iter()
                    .all(|&n| cpu_space(&sig, n).contains(p).is_ok())
            })
            .unwrap();
        let dense = dense_space(32, 16, 64).points().pop().unwrap();
        let layer = LayerRun {
            name: "l".into(),
            matrix: synthetic(&sig, 1).unwrap(),
            bias: vec![0.0; 32],
            tunings: vec![LayerTuning {
                batch_tokens: 64,
                params: tuned.clone(),
                dense_params: dense.clone(),
            }],
        };
        // Within 4x (16 and 256 are exactly 4x away): the tuned points.
        for n in [16, 64, 256] {
            assert_eq!(
                params_for(&layer, n, false),
                (tuned.clone(), false),
                "n = {n}"
            );
            assert_eq!(
                params_for(&layer, n, true),
                (dense.clone(), false),
                "n = {n}"
            );
        }
        // Further: the cost model's best point for that batch, counted as a fallback.
        for n in [1, 15, 257] {
            let (p, fallback) = params_for(&layer, n, false);
            assert!(fallback, "n = {n}");
            assert!(cpu_space(&sig, n).contains(&p).is_ok());
            assert!(params_for(&layer, n, true).1, "n = {n}");
        }
    }
}
