//! Second-order pruning, OBS / oBERT style.
//!
//! For each layer the empirical Fisher `F = (1/G) Σ g gᵀ` of G per-sample gradients is kept
//! block-diagonal: blocks of `B` consecutive weights in row-major order. Each block is damped,
//! `F + λI` with `λ = damp · mean(diag F)` over the whole layer (scale-free, so one `damp` fits
//! every layer; `λ = damp` if the layer's gradients are all zero), and inverted. The saliency of
//! weight `i` is the loss increase of removing it alone with the best compensation,
//! `ρᵢ = wᵢ² / (2 [F⁻¹]ᵢᵢ)`; it is the score the pattern's mask builder keeps the most of. Then
//! within each block the kept weights absorb the removed set `Q` with the OBS update
//! `δ = −F⁻¹[:, Q] ([F⁻¹]_QQ)⁻¹ w_Q`, the exact minimiser of `½ δᵀ F δ` subject to `w_Q + δ_Q = 0`,
//! and the removed weights are set to exactly zero.

use candle_core::Tensor;
use datasets::Dataset;
use rand_chacha::ChaCha8Rng;

use super::linalg::{cholesky, cholesky_solve, spd_inverse};
use crate::model::net::Net;
use crate::train::{gather, shuffled};
use crate::{StageError, Weights};

/// Running sum of `g gᵀ` over samples, block-diagonal (full `b × b` per block).
pub(crate) struct BlockFisher {
    len: usize,
    block: usize,
    sums: Vec<Vec<f64>>,
    samples: usize,
}

impl BlockFisher {
    pub(crate) fn new(len: usize, block: usize) -> BlockFisher {
        let block = block.max(1);
        let sums = (0..len.div_ceil(block))
            .map(|k| {
                let b = block.min(len - k * block);
                vec![0f64; b * b]
            })
            .collect();
        BlockFisher {
            len,
            block,
            sums,
            samples: 0,
        }
    }

    /// Adds one per-sample gradient (the layer's weights, row-major).
    pub(crate) fn add(&mut self, g: &[f32]) {
        for (k, sum) in self.sums.iter_mut().enumerate() {
            let gb = &g[k * self.block..(k * self.block + self.block).min(self.len)];
            let b = gb.len();
            for (i, &gi) in gb.iter().enumerate() {
                if gi == 0.0 {
                    continue; // ReLU makes many per-sample gradients sparse.
                }
                let gi = gi as f64;
                let row = &mut sum[i * b..i * b + i + 1];
                for (s, &gj) in row.iter_mut().zip(gb) {
                    *s += gi * gj as f64;
                }
            }
        }
        self.samples += 1;
    }

    /// The damping λ for this layer.
    fn lambda(&self, damp: f64) -> f64 {
        let n = self.samples.max(1) as f64;
        let trace: f64 = self
            .sums
            .iter()
            .map(|s| {
                let b = (s.len() as f64).sqrt() as usize;
                (0..b).map(|i| s[i * b + i]).sum::<f64>()
            })
            .sum();
        let mean = trace / n / self.len.max(1) as f64;
        if mean > 0.0 {
            damp * mean
        } else {
            damp
        }
    }

    /// Block `k` of the damped Fisher `F + λI`, full and symmetric.
    pub(crate) fn damped_block(&self, k: usize, damp: f64) -> Vec<f64> {
        let lambda = self.lambda(damp);
        let s = &self.sums[k];
        let b = (s.len() as f64).sqrt() as usize;
        let n = self.samples.max(1) as f64;
        let mut f = vec![0f64; b * b];
        for i in 0..b {
            for j in 0..=i {
                f[i * b + j] = s[i * b + j] / n;
                f[j * b + i] = s[i * b + j] / n;
            }
            f[i * b + i] += lambda;
        }
        f
    }

    /// Inverses of every damped block, in order.
    pub(crate) fn inverses(&self, damp: f64) -> Result<Vec<Vec<f64>>, StageError> {
        (0..self.sums.len())
            .map(|k| {
                let b = (self.sums[k].len() as f64).sqrt() as usize;
                spd_inverse(&self.damped_block(k, damp), b).map_err(|e| {
                    StageError::InvalidConfig(format!(
                        "obs: Fisher block {k} is not positive definite (pivot {} = {:e}); raise damp",
                        e.pivot, e.value
                    ))
                })
            })
            .collect()
    }
}

/// OBS saliencies `wᵢ² / (2 [F⁻¹]ᵢᵢ)` of a layer's weights, from its block inverses.
pub(crate) fn saliencies(weight: &[f32], block: usize, inverses: &[Vec<f64>]) -> Vec<f32> {
    let block = block.max(1);
    weight
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let inv = &inverses[i / block];
            let b = (inv.len() as f64).sqrt() as usize;
            let d = i % block;
            ((w as f64).powi(2) / (2.0 * inv[d * b + d])) as f32
        })
        .collect()
}

/// Removes the weights where `keep` is false, with the OBS update of the kept weights of each
/// block; removed weights become exactly `+0.0`.
pub(crate) fn obs_update(weight: &mut [f32], keep: &[bool], block: usize, inverses: &[Vec<f64>]) {
    let block = block.max(1);
    for (k, inv) in inverses.iter().enumerate() {
        let start = k * block;
        let b = (inv.len() as f64).sqrt() as usize;
        let q: Vec<usize> = (0..b).filter(|&i| !keep[start + i]).collect();
        if q.is_empty() {
            continue;
        }
        let wq: Vec<f64> = q.iter().map(|&i| weight[start + i] as f64).collect();
        let inv_qq: Vec<f64> = q
            .iter()
            .flat_map(|&i| q.iter().map(move |&j| inv[i * b + j]))
            .collect();
        // [F⁻¹]_QQ is a principal block of an SPD matrix, hence SPD: the factorisation cannot
        // fail except by round-off on a hopeless block, where plain removal is the safe answer.
        if let Ok(l) = cholesky(&inv_qq, q.len()) {
            let z = cholesky_solve(&l, q.len(), &wq);
            for i in 0..b {
                let delta: f64 = q.iter().zip(&z).map(|(&j, zj)| inv[i * b + j] * zj).sum();
                weight[start + i] = (weight[start + i] as f64 - delta) as f32;
            }
        }
        for &i in &q {
            weight[start + i] = 0.0;
        }
    }
}

/// Empirical Fisher blocks of the selected layers from `grads` per-sample gradients of the
/// cross-entropy loss, on training samples drawn by `rng`.
pub(crate) fn layer_fishers(
    data: &Dataset,
    weights: &Weights,
    selected: &[bool],
    grads: usize,
    block: usize,
    rng: &mut ChaCha8Rng,
) -> Result<Vec<Option<BlockFisher>>, StageError> {
    let net = Net::from_weights(weights)?;
    let mut fishers: Vec<Option<BlockFisher>> = weights
        .layers
        .iter()
        .zip(selected)
        .map(|(l, &s)| s.then(|| BlockFisher::new(l.weight.len(), block)))
        .collect();
    let order = shuffled(data.n_train(), rng);
    for &i in order.iter().take(grads) {
        let (x, y) = gather(&data.train_x, &data.train_y, data.n_features, &[i]);
        let x = net.input(x, 1)?;
        let y = Tensor::from_vec(y, 1, x.device())?;
        let loss = candle_nn::loss::cross_entropy(&net.forward(&x)?, &y)?;
        let g = loss.backward()?;
        for (fisher, layer) in fishers.iter_mut().zip(&net.layers) {
            if let Some(fisher) = fisher {
                let gw: Vec<f32> = match g.get(layer.weight.as_tensor()) {
                    Some(t) => t.flatten_all()?.to_vec1()?,
                    None => vec![0.0; layer.weight.elem_count()],
                };
                fisher.add(&gw);
            }
        }
    }
    Ok(fishers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngCore, SeedableRng};

    fn random(n: usize, rng: &mut ChaCha8Rng) -> Vec<f32> {
        (0..n)
            .map(|_| (rng.next_u32() >> 8) as f32 / (1 << 24) as f32 * 2.0 - 1.0)
            .collect()
    }

    /// ½ δᵀ F δ, the loss increase of a quadratic model with Hessian F.
    fn quad(f: &[f64], d: &[f64]) -> f64 {
        let n = d.len();
        (0..n)
            .map(|i| (0..n).map(|j| d[i] * f[i * n + j] * d[j]).sum::<f64>())
            .sum::<f64>()
            / 2.0
    }

    /// The exact answer, solved on F itself (not its inverse): δ_Q = −w_Q and the free weights
    /// solve F_ff δ_f = −F_fQ δ_Q.
    fn exact_delta(f: &[f64], w: &[f32], keep: &[bool]) -> Vec<f64> {
        let n = w.len();
        let free: Vec<usize> = (0..n).filter(|&i| keep[i]).collect();
        let mut d: Vec<f64> = (0..n)
            .map(|i| if keep[i] { 0.0 } else { -(w[i] as f64) })
            .collect();
        if !free.is_empty() {
            let fff: Vec<f64> = free
                .iter()
                .flat_map(|&i| free.iter().map(move |&j| f[i * n + j]))
                .collect();
            let rhs: Vec<f64> = free
                .iter()
                .map(|&i| {
                    -(0..n)
                        .filter(|&j| !keep[j])
                        .map(|j| f[i * n + j] * d[j])
                        .sum::<f64>()
                })
                .collect();
            let l = cholesky(&fff, free.len()).unwrap();
            for (&i, v) in free.iter().zip(cholesky_solve(&l, free.len(), &rhs)) {
                d[i] = v;
            }
        }
        d
    }

    #[test]
    fn obs_matches_the_exact_constrained_optimum() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let (n, damp) = (6, 0.05);
        let mut fisher = BlockFisher::new(n, n);
        for _ in 0..4 {
            // Fewer samples than weights: F is singular without damping.
            fisher.add(&random(n, &mut rng));
        }
        let f = fisher.damped_block(0, damp);
        let inv = fisher.inverses(damp).unwrap();
        let w = random(n, &mut rng);
        let rho = saliencies(&w, n, &inv);

        // Single removals: the saliency is exactly the loss increase after the best update, so
        // the smallest saliency picks the weight whose removal costs least.
        let mut costs = Vec::new();
        for (i, &r) in rho.iter().enumerate() {
            let keep: Vec<bool> = (0..n).map(|j| j != i).collect();
            let cost = quad(&f, &exact_delta(&f, &w, &keep));
            assert!(
                (cost - r as f64).abs() <= 1e-6 * cost.max(1e-9),
                "weight {i}: {cost} vs {r}"
            );
            costs.push(cost);
        }
        let argmin = |v: &[f64]| (0..n).min_by(|&a, &b| v[a].total_cmp(&v[b])).unwrap();
        let rho64: Vec<f64> = rho.iter().map(|&r| r as f64).collect();
        assert_eq!(argmin(&rho64), argmin(&costs));

        // A set removal: the update equals the exact solution and the removed weights are +0.0.
        let keep = [true, false, true, false, false, true];
        let mut updated = w.clone();
        obs_update(&mut updated, &keep, n, &inv);
        let exact = exact_delta(&f, &w, &keep);
        for i in 0..n {
            if keep[i] {
                let want = w[i] as f64 + exact[i];
                assert!(
                    (updated[i] as f64 - want).abs() < 1e-5,
                    "weight {i}: {} vs {want}",
                    updated[i]
                );
            } else {
                assert_eq!(updated[i].to_bits(), 0.0f32.to_bits());
            }
        }
        // And it beats plain removal on the quadratic model.
        let plain: Vec<f64> = (0..n)
            .map(|i| if keep[i] { 0.0 } else { -(w[i] as f64) })
            .collect();
        assert!(quad(&f, &exact) < quad(&f, &plain));
    }

    #[test]
    fn blocks_partition_the_weights() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut fisher = BlockFisher::new(10, 4);
        fisher.add(&random(10, &mut rng));
        let inv = fisher.inverses(0.1).unwrap();
        assert_eq!(inv.iter().map(|b| b.len()).collect::<Vec<_>>(), [16, 16, 4]);
        // With one sample and isotropic damping, F = ggᵀ/1 + λI; check one diagonal entry.
        let f = fisher.damped_block(2, 0.1);
        assert!(f[0] > 0.0 && (f[1] - f[2]).abs() < 1e-12);
    }
}
