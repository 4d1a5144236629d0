//! Evaluation of a pruned model through the sparse kernels with each layer's tuned config:
//! accuracy (checked against the masked dense reference), end-to-end and per-layer latency per
//! batch size, packed weight bytes, and the same model run densely with the tuned dense kernel.
//!
//! Layout: activations travel transposed (features × batch), so each layer is exactly the
//! kernels' `C = A · B` with A the layer's weights (out × in) and no transposes between layers.
//!
//! [`evaluate`] runs the CPU kernels; [`cuda::evaluate_cuda`] the CUDA kernels (fp16, its own
//! tolerance and latency definition, see there).

pub mod cuda;

use crate::kernel_tune::{time, Timing};
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
    /// End to end through the tuned dense kernel (same shapes, all weights dense).
    pub dense: Timing,
    /// Per layer through the sparse kernels.
    pub per_layer: Vec<Timing>,
    /// How many layers ran a point tuned at another batch size that was not valid at this one
    /// (the cost model's best valid point was used instead).
    pub fallbacks: usize,
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

/// Runs the layers on `xt` (features × batch), returning logits (classes × batch).
fn forward(
    layers: &[(&SparseMatrix, &[f32], ParamPoint)],
    xt: &[f32],
    batch: usize,
) -> Result<Vec<f32>, StageError> {
    let mut cur = xt.to_vec();
    for (i, (m, bias, p)) in layers.iter().enumerate() {
        let mut out = vec![0f32; m.rows() * batch];
        kernels::spmm(m, &cur, batch, &mut out, p)?;
        add_bias_relu(&mut out, bias, batch, i + 1 < layers.len());
        cur = out;
    }
    Ok(cur)
}

/// Adds each row's bias to a layer's output (`rows × batch`, row-major) and applies ReLU unless
/// it is the last layer.
fn add_bias_relu(out: &mut [f32], bias: &[f32], batch: usize, relu: bool) {
    for (row, b) in out.chunks_mut(batch.max(1)).zip(bias) {
        for v in row.iter_mut() {
            *v += b;
            if relu && *v < 0.0 {
                *v = 0.0;
            }
        }
    }
}

/// Masked dense reference in f64: plain loops over `to_dense()`.
fn reference(layers: &[LayerRun], xt: &[f32], batch: usize) -> Vec<f64> {
    let mut cur: Vec<f64> = xt.iter().map(|&x| x as f64).collect();
    for (i, l) in layers.iter().enumerate() {
        let w = l.matrix.to_dense();
        let (rows, cols) = (l.matrix.rows(), l.matrix.cols());
        let mut out = vec![0f64; rows * batch];
        for r in 0..rows {
            for k in 0..cols {
                let a = w[r * cols + k] as f64;
                if a != 0.0 {
                    for j in 0..batch {
                        out[r * batch + j] += a * cur[k * batch + j];
                    }
                }
            }
            for j in 0..batch {
                out[r * batch + j] += l.bias[r] as f64;
                if i + 1 < layers.len() && out[r * batch + j] < 0.0 {
                    out[r * batch + j] = 0.0;
                }
            }
        }
        cur = out;
    }
    cur
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

/// Checks that `layers` map the data's features to its classes.
fn check_shapes(data: &Dataset, layers: &[LayerRun]) -> Result<(), StageError> {
    let (Some(first), Some(last)) = (layers.first(), layers.last()) else {
        return Err(StageError::InvalidConfig("the model has no layers".into()));
    };
    if first.matrix.cols() != data.n_features || last.matrix.rows() != data.n_classes {
        return Err(StageError::InvalidConfig(format!(
            "the model maps {} features to {} classes, the data has {} and {}",
            first.matrix.cols(),
            last.matrix.rows(),
            data.n_features,
            data.n_classes
        )));
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
/// set in batches of 256 and compares it with the masked dense reference.
fn agreement(
    data: &Dataset,
    layers: &[LayerRun],
    mut forward: impl FnMut(&[f32], usize) -> Result<Vec<f32>, StageError>,
) -> Result<Agreement, StageError> {
    let n_test = data.test_y.len();
    let f = data.n_features;
    let (mut correct, mut max_err, mut max_ref) = (0usize, 0f64, 0f64);
    for start in (0..n_test).step_by(256) {
        let b = (n_test - start).min(256);
        let xt = transpose(&data.test_x[start * f..(start + b) * f], b, f);
        let logits = forward(&xt, b)?;
        let want = reference(layers, &xt, b);
        for (x, y) in logits.iter().zip(&want) {
            max_err = max_err.max((*x as f64 - y).abs());
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

/// Evaluates `layers` (forward order, ReLU between) on `data`, measuring latency at each batch
/// size for about `seconds_per_batch` each. The caller holds the measurement lock.
pub fn evaluate(
    data: &Dataset,
    layers: &[LayerRun],
    batch_sizes: &[usize],
    seconds_per_batch: f64,
) -> Result<Evaluation, StageError> {
    check_shapes(data, layers)?;
    let (n_test, f) = (data.test_y.len(), data.n_features);
    // Accuracy and agreement with the reference, over the test set in batches of 256.
    let agree = agreement(data, layers, |xt, b| {
        let run: Vec<_> = layers
            .iter()
            .map(|l| (&l.matrix, l.bias.as_slice(), params_for(l, b, false).0))
            .collect();
        forward(&run, xt, b)
    })?;
    let correct = agree.correct;
    let max_rel_error = agree.max_err / agree.max_ref.max(1.0);
    if max_rel_error.is_nan() || max_rel_error > TOLERANCE {
        return Err(StageError::InvalidConfig(format!(
            "sparse inference disagrees with the masked dense reference: max relative error {max_rel_error:e} > {TOLERANCE:e}"
        )));
    }
    let dense: Vec<SparseMatrix> = layers
        .iter()
        .map(|l| {
            SparseMatrix::from_masked(
                &kernels::Pattern::Dense,
                &l.matrix.to_dense(),
                &kernels::Mask::full(l.matrix.rows(), l.matrix.cols()),
            )
        })
        .collect::<Result<_, _>>()?;
    let mut latencies = vec![];
    for &b in batch_sizes {
        let x = kernels::random_values(f * b, b as u64);
        let mut fallbacks = 0;
        let run: Vec<_> = layers
            .iter()
            .map(|l| {
                let (p, fb) = params_for(l, b, false);
                fallbacks += usize::from(fb);
                (&l.matrix, l.bias.as_slice(), p)
            })
            .collect();
        let drun: Vec<_> = layers
            .iter()
            .zip(&dense)
            .map(|(l, d)| (d, l.bias.as_slice(), params_for(l, b, true).0))
            .collect();
        let sparse = time(
            || forward(&run, &x, b).map(|_| ()),
            3,
            200,
            seconds_per_batch,
        )?;
        let dense_t = time(
            || forward(&drun, &x, b).map(|_| ()),
            3,
            200,
            seconds_per_batch,
        )?;
        let mut per_layer = vec![];
        let mut input = x.clone();
        for (m, _, p) in &run {
            let mut out = vec![0f32; m.rows() * b];
            per_layer.push(time(
                || kernels::spmm(m, &input, b, &mut out, p),
                3,
                100,
                seconds_per_batch / layers.len() as f64,
            )?);
            input = out;
        }
        latencies.push(BatchLatency {
            batch: b,
            sparse,
            dense: dense_t,
            per_layer,
            fallbacks,
        });
    }
    let (weight_bytes, dense_weight_bytes) = weight_bytes(layers);
    Ok(Evaluation {
        accuracy: correct as f64 / n_test.max(1) as f64,
        max_rel_error,
        latencies,
        weight_bytes,
        dense_weight_bytes,
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
