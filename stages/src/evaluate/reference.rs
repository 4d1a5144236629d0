//! The checks against the masked dense reference: the model fits the data and the layers, and
//! a forward pass agrees with the model's f64 pass on the packed weights.

use super::{graph, LayerRun};
use crate::model::Weights;
use crate::StageError;
use datasets::Dataset;

/// Tolerance of the agreement with the masked dense reference.
pub const TOLERANCE: f64 = 1e-4;

/// classes.
pub(super) fn check_shapes(
    data: &Dataset,
    model: &Weights,
    layers: &[LayerRun],
) -> Result<(), StageError> {
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
pub(super) struct Agreement {
    /// Correct predictions.
    pub(super) correct: usize,
    /// Largest |output − reference| over the logits.
    pub(super) max_err: f64,
    /// Largest |reference| over the logits.
    pub(super) max_ref: f64,
}

/// Runs `forward(xt, batch)` (features × batch in, classes × batch logits out) over the test
/// set in batches of 256 and compares it with the masked dense reference: `model`'s forward
/// pass in f64 with each layer's `to_dense()` packed weights.
pub(super) fn agreement(
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

fn transpose(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut t = vec![0f32; x.len()];
    for r in 0..rows {
        for c in 0..cols {
            t[c * rows + r] = x[r * cols + c];
        }
    }
    t
}
