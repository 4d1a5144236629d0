//! Calibration inputs of the one-shot methods: a seeded draw of training samples, run through
//! the network layer by layer, and each layer's inputs as a matrix `P` (`tokens × cols`, one row
//! per sample, or per sample and output position of a convolution: its im2col patches), so that
//! the layer computes `P Wᵀ` and its Hessian is `2PᵀP/tokens`.

use candle_core::Tensor;
use datasets::Dataset;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::model::net::{apply_layer, Net};
use crate::model::{transformer_layer_input, Arch, Layer, LayerKind, TransformerArch, Weights};
use crate::train::{gather, shuffled, stream_seed};
use crate::StageError;

/// The inputs of one layer on calibration samples: `P`, row-major `tokens × cols`, so that the
/// layer computes `P Wᵀ` (a linear layer: one row per sample; a convolution: one per sample and
/// output position, its im2col patches).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerInputs {
    /// Row-major `tokens × cols`.
    pub p: Vec<f32>,
    /// Rows of `p`.
    pub tokens: usize,
    /// Columns of `p` (the layer's weight columns).
    pub cols: usize,
}

/// The calibration batch: `samples` training samples in the order of a shuffle seeded by
/// `seed` (the same samples for every method and pattern of a trial).
pub(crate) fn batch(data: &Dataset, samples: usize, seed: u64) -> Result<Vec<f32>, StageError> {
    let n = data.n_train();
    if samples == 0 || samples > n {
        return Err(StageError::InvalidConfig(format!(
            "calibration needs 1 to {n} samples (the training split holds {n}); got {samples}"
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(seed, 3));
    let order = shuffled(n, &mut rng);
    Ok(gather(
        &data.train_x,
        &data.train_y,
        data.n_features,
        &order[..samples],
    )
    .0)
}

/// The activations of a calibration batch as they pass through a network, one layer at a time.
/// A chain keeps the activations at the next layer's input; a transformer, whose layers do not
/// feed one another in a line, keeps the batch and a copy of the weights in which the layers
/// already passed hold the weights they were advanced with, and runs the forward pass up to
/// the next layer each time.
pub(crate) struct Chain {
    h: Tensor,
    layers: usize,
    next: usize,
    /// For a transformer: the weights as advanced so far.
    graph: Option<(Weights, TransformerArch)>,
}

impl Chain {
    /// The batch (`samples × features`, row-major) at the input of `weights`' first layer.
    pub(crate) fn new(weights: &Weights, batch: Vec<f32>) -> Result<Chain, StageError> {
        let in_features = weights.n_features().max(1);
        let samples = batch.len() / in_features.max(1);
        let mut h = Tensor::from_vec(batch, (samples, in_features), &candle_core::Device::Cpu)?;
        if let (Some((c, hh, w)), Some(LayerKind::Conv2d { .. })) =
            (weights.image_shape, weights.layers.first().map(|l| &l.kind))
        {
            h = h.reshape((samples, c, hh, w))?;
        }
        Ok(Chain {
            h,
            layers: weights.layers.len(),
            next: 0,
            graph: match &weights.arch {
                Arch::Transformer(t) => Some((weights.clone(), t.clone())),
                Arch::Chain => None,
            },
        })
    }

    /// The inputs of the next layer, `layer` (im2col patches for a convolution).
    pub(crate) fn inputs(&self, layer: &Layer) -> Result<LayerInputs, StageError> {
        if let Some((w, t)) = &self.graph {
            let x = transformer_layer_input(&Net::from_weights(w)?, t, &self.h, self.next)?;
            let (tokens, cols) = x.dims2()?;
            return Ok(LayerInputs {
                p: x.flatten_all()?.to_vec1()?,
                tokens,
                cols,
            });
        }
        match layer.kind {
            LayerKind::Linear => {
                let flat = if self.h.rank() > 2 {
                    self.h.flatten_from(1)?
                } else {
                    self.h.clone()
                };
                let (tokens, cols) = flat.dims2()?;
                Ok(LayerInputs {
                    p: flat.flatten_all()?.to_vec1()?,
                    tokens,
                    cols,
                })
            }
            LayerKind::Conv2d { padding, .. } => im2col(&self.h, layer.shape[2], padding),
        }
    }

    /// Runs the next layer, with `layer`'s current weights, on the batch.
    pub(crate) fn advance(&mut self, layer: &Layer) -> Result<(), StageError> {
        if let Some((w, _)) = &mut self.graph {
            w.layers[self.next] = layer.clone();
            self.next += 1;
            return Ok(());
        }
        let device = self.h.device().clone();
        let weight = Tensor::from_vec(layer.weight.clone(), layer.shape.clone(), &device)?;
        let bias = Tensor::from_vec(layer.bias.clone(), layer.bias.len(), &device)?;
        let last = self.next + 1 == self.layers;
        self.h = apply_layer(&layer.kind, &weight, &bias, &self.h, last)?;
        self.next += 1;
        Ok(())
    }
}

/// The im2col patches of a `(n, c, h, w)` batch for a `k×k` convolution with stride 1 and
/// `padding`: one row per (sample, output row, output column), columns in the weight's
/// `(channel, ky, kx)` order.
fn im2col(x: &Tensor, k: usize, padding: usize) -> Result<LayerInputs, StageError> {
    let (n, c, h, w) = x.dims4()?;
    let v: Vec<f32> = x.flatten_all()?.to_vec1()?;
    let (oh, ow) = (h + 2 * padding + 1 - k, w + 2 * padding + 1 - k);
    let cols = c * k * k;
    let mut p = vec![0f32; n * oh * ow * cols];
    for s in 0..n {
        for y in 0..oh {
            for xx in 0..ow {
                let row = &mut p[((s * oh + y) * ow + xx) * cols..][..cols];
                for ch in 0..c {
                    for ky in 0..k {
                        let iy = (y + ky).wrapping_sub(padding);
                        if iy >= h {
                            continue;
                        }
                        for kx in 0..k {
                            let ix = (xx + kx).wrapping_sub(padding);
                            if ix < w {
                                row[(ch * k + ky) * k + kx] = v[((s * c + ch) * h + iy) * w + ix];
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(LayerInputs {
        p,
        tokens: n * oh * ow,
        cols,
    })
}

/// `‖(A − B) Pᵀ‖_F / ‖A Pᵀ‖_F` for `rows × cols` weights `a` and `b`: the relative error of the
/// layer's outputs on its calibration inputs; where `A Pᵀ` is 0, 0 if `(A − B) Pᵀ` is too, else
/// infinite (no output left unchanged is a relative error of 0).
pub fn output_error(a: &[f32], b: &[f32], rows: usize, x: &LayerInputs) -> f64 {
    use faer::linalg::matmul::matmul;
    use faer::{Accum, Mat, Par};
    let (cols, tokens) = (x.cols, x.tokens);
    let p = Mat::<f64>::from_fn(tokens, cols, |t, c| f64::from(x.p[t * cols + c]));
    let wa = Mat::<f64>::from_fn(rows, cols, |r, c| f64::from(a[r * cols + c]));
    let wd = Mat::<f64>::from_fn(rows, cols, |r, c| {
        f64::from(a[r * cols + c] - b[r * cols + c])
    });
    let (mut ya, mut yd) = (
        Mat::<f64>::zeros(rows, tokens),
        Mat::<f64>::zeros(rows, tokens),
    );
    matmul(
        ya.as_mut(),
        Accum::Replace,
        wa.as_ref(),
        p.transpose(),
        1.0,
        Par::Seq,
    );
    matmul(
        yd.as_mut(),
        Accum::Replace,
        wd.as_ref(),
        p.transpose(),
        1.0,
        Par::Seq,
    );
    let (num, den) = (yd.norm_l2(), ya.norm_l2());
    if den > 0.0 {
        num / den
    } else if num == 0.0 {
        0.0
    } else {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn im2col_times_the_weights_is_the_convolution() {
        let (n, c, h, w, k, pad, out) = (2, 3, 5, 4, 3, 1, 2);
        let xs: Vec<f32> = (0..n * c * h * w)
            .map(|i| ((i * 7) % 11) as f32 - 5.0)
            .collect();
        let ws: Vec<f32> = (0..out * c * k * k)
            .map(|i| ((i * 5) % 7) as f32 - 3.0)
            .collect();
        let x = Tensor::from_vec(xs, (n, c, h, w), &Device::Cpu).unwrap();
        let wt = Tensor::from_vec(ws.clone(), (out, c, k, k), &Device::Cpu).unwrap();
        let conv: Vec<f32> = x
            .conv2d(&wt, pad, 1, 1, 1)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        let p = im2col(&x, k, pad).unwrap();
        assert_eq!(p.tokens, n * h * w);
        let (oh, ow) = (h, w);
        for s in 0..n {
            for o in 0..out {
                for pos in 0..oh * ow {
                    let row = &p.p[(s * oh * ow + pos) * p.cols..][..p.cols];
                    let y: f32 = row.iter().zip(&ws[o * p.cols..]).map(|(a, b)| a * b).sum();
                    assert_eq!(y, conv[(s * out + o) * oh * ow + pos]);
                }
            }
        }
    }

    #[test]
    fn output_error_is_relative() {
        let x = LayerInputs {
            p: vec![1.0, 2.0, 0.0, 1.0],
            tokens: 2,
            cols: 2,
        };
        let a = [1.0, 1.0];
        assert_eq!(output_error(&a, &a, 1, &x), 0.0);
        // A·Pᵀ = [3, 1]; removing the first weight leaves [2, 1]: error ‖[1, 0]‖/‖[3, 1]‖.
        let e = output_error(&a, &[0.0, 1.0], 1, &x);
        assert!((e - 1.0 / 10f64.sqrt()).abs() < 1e-12);
        // Outputs that cancel to 0: a change to them is no relative error of 0.
        let x = LayerInputs {
            p: vec![1.0, 2.0, 2.0, 4.0],
            tokens: 2,
            cols: 2,
        };
        let c = [2.0, -1.0];
        assert_eq!(output_error(&c, &c, 1, &x), 0.0);
        assert_eq!(output_error(&c, &[2.0, 0.0], 1, &x), f64::INFINITY);
    }
}
