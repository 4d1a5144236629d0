//! The training loop shared by the train stage and by fine-tuning after pruning: seeded
//! shuffling, mini-batches, cross-entropy, one optimiser step per batch, and optionally fixed
//! masks that keep pruned weights exactly zero.

use std::time::Instant;

use candle_core::backprop::GradStore;
use candle_core::{DType, Tensor};
use candle_nn::{AdamW, Optimizer as _, ParamsAdamW, SGD};
use datasets::Dataset;
use rand::RngCore;
use rand_chacha::ChaCha8Rng;

use super::{Optimizer, TrainSpec};
use crate::model::net::Net;
use crate::StageError;

/// Hyper-parameters of one call to [`fit`].
pub(crate) struct FitConfig<'a> {
    pub epochs: usize,
    pub batch_size: usize,
    pub lr: f64,
    pub optimizer: Optimizer,
    pub weight_decay: f64,
    /// Per layer (forward order): the keep-mask to hold fixed, or `None` for a free layer.
    pub masks: Option<&'a [Option<kernels::Mask>]>,
}

impl<'a> FitConfig<'a> {
    pub(crate) fn from_train(spec: &TrainSpec, masks: Option<&'a [Option<kernels::Mask>]>) -> Self {
        FitConfig {
            epochs: spec.epochs,
            batch_size: spec.batch_size,
            lr: spec.lr,
            optimizer: spec.optimizer,
            weight_decay: spec.weight_decay,
            masks,
        }
    }
}

/// What [`fit`] measured.
pub(crate) struct FitReport {
    pub loss_curve: Vec<f32>,
    pub samples_per_s: f64,
    pub seconds: f64,
}

/// Masks as tensors: (keep as u8, zeros) per masked layer.
struct FixedMasks(Vec<Option<(Tensor, Tensor)>>);

impl FixedMasks {
    fn new(net: &Net, masks: Option<&[Option<kernels::Mask>]>) -> Result<FixedMasks, StageError> {
        let Some(masks) = masks else {
            return Ok(FixedMasks(Vec::new()));
        };
        if masks.len() != net.layers.len() {
            return Err(StageError::InvalidConfig(format!(
                "{} masks for {} layers",
                masks.len(),
                net.layers.len()
            )));
        }
        let tensors = masks
            .iter()
            .zip(&net.layers)
            .map(|(m, l)| {
                m.as_ref()
                    .map(|m| {
                        let keep: Vec<u8> = m.as_slice().iter().map(|&k| k as u8).collect();
                        let shape = l.weight.shape().clone();
                        if keep.len() != shape.elem_count() {
                            return Err(StageError::InvalidConfig(format!(
                                "mask of {} entries for a weight of shape {shape:?}",
                                keep.len()
                            )));
                        }
                        Ok((
                            Tensor::from_vec(keep, shape.clone(), l.weight.device())?,
                            l.weight.zeros_like()?,
                        ))
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>, StageError>>()?;
        Ok(FixedMasks(tensors))
    }

    /// Zeroes the gradient of masked-out weights (so optimiser moments never see them).
    fn mask_grads(&self, net: &Net, grads: &mut GradStore) -> Result<(), StageError> {
        for (m, l) in self.0.iter().zip(&net.layers) {
            if let (Some((keep, zeros)), Some(g)) = (m, grads.get(l.weight.as_tensor())) {
                let masked = keep.where_cond(g, zeros)?;
                grads.insert(l.weight.as_tensor(), masked);
            }
        }
        Ok(())
    }

    /// Writes exact `+0.0` into masked-out weights (`where_cond`, not a multiply: 0 · −x is −0).
    fn mask_weights(&self, net: &Net) -> Result<(), StageError> {
        for (m, l) in self.0.iter().zip(&net.layers) {
            if let Some((keep, zeros)) = m {
                l.weight
                    .set(&keep.where_cond(l.weight.as_tensor(), zeros)?)?;
            }
        }
        Ok(())
    }
}

enum Opt {
    AdamW(AdamW),
    Sgd(SGD),
}

/// A permutation of `0..n` by Fisher–Yates from `rng` (value-stable across `rand` versions).
pub(crate) fn shuffled(n: usize, rng: &mut ChaCha8Rng) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
    order
}

/// Gathers the rows `idx` of a row-major feature matrix and their labels.
pub(crate) fn gather(x: &[f32], y: &[u32], features: usize, idx: &[usize]) -> (Vec<f32>, Vec<u32>) {
    let mut bx = Vec::with_capacity(idx.len() * features);
    for &i in idx {
        bx.extend_from_slice(&x[i * features..(i + 1) * features]);
    }
    (bx, idx.iter().map(|&i| y[i]).collect())
}

/// Trains `net` in place on `data`'s training part.
pub(crate) fn fit(
    net: &Net,
    data: &Dataset,
    cfg: &FitConfig<'_>,
    rng: &mut ChaCha8Rng,
) -> Result<FitReport, StageError> {
    if cfg.batch_size == 0 {
        return Err(StageError::InvalidConfig("batch_size must be >= 1".into()));
    }
    let masks = FixedMasks::new(net, cfg.masks)?;
    masks.mask_weights(net)?;
    let mut opt = match cfg.optimizer {
        Optimizer::Adamw => Opt::AdamW(AdamW::new(
            net.vars(),
            ParamsAdamW {
                lr: cfg.lr,
                weight_decay: cfg.weight_decay,
                ..ParamsAdamW::default()
            },
        )?),
        Optimizer::Sgd => Opt::Sgd(SGD::new(net.vars(), cfg.lr)?),
    };
    let n = data.n_train();
    let f = data.n_features;
    let mut loss_curve = Vec::with_capacity(cfg.epochs);
    let start = Instant::now();
    for epoch in 0..cfg.epochs {
        let order = shuffled(n, rng);
        let mut loss_sum = 0f64;
        for idx in order.chunks(cfg.batch_size) {
            let (bx, by) = gather(&data.train_x, &data.train_y, f, idx);
            let x = net.input(bx, idx.len())?;
            let y = Tensor::from_vec(by, idx.len(), x.device())?;
            let loss = candle_nn::loss::cross_entropy(&net.forward(&x)?, &y)?;
            let mut grads = loss.backward()?;
            masks.mask_grads(net, &mut grads)?;
            match &mut opt {
                Opt::AdamW(o) => o.step(&grads)?,
                Opt::Sgd(o) => {
                    if cfg.weight_decay > 0.0 {
                        for v in net.vars() {
                            if let Some(g) = grads.get(v.as_tensor()) {
                                let decayed = (g + (v.as_tensor() * cfg.weight_decay)?)?;
                                grads.insert(v.as_tensor(), decayed);
                            }
                        }
                        masks.mask_grads(net, &mut grads)?;
                    }
                    o.step(&grads)?
                }
            }
            masks.mask_weights(net)?;
            loss_sum += loss.to_dtype(DType::F64)?.to_scalar::<f64>()? * idx.len() as f64;
        }
        let mean = (loss_sum / n.max(1) as f64) as f32;
        if !mean.is_finite() {
            return Err(StageError::Diverged { epoch, loss: mean });
        }
        loss_curve.push(mean);
    }
    let seconds = start.elapsed().as_secs_f64();
    let samples = (n * cfg.epochs) as f64;
    Ok(FitReport {
        loss_curve,
        samples_per_s: if seconds > 0.0 {
            samples / seconds
        } else {
            0.0
        },
        seconds,
    })
}
