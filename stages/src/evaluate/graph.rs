//! The forward pass of any [`Arch`] on feature-major activations (`features × columns`,
//! row-major; a column per sample, or per sample and position), with every GEMM layer's
//! product `W · X` left to a caller's function, so that one pass serves the sparse kernels (f32)
//! and the masked dense reference (f64), each with its bias and activation (ReLU, GELU)
//! fused or applied by [`finish`]. Everything else (im2col, pooling, LayerNorm, attention,
//! residual adds) is computed here, in `T`.
//!
//! In a chain the columns are sample-major: column `s · positions + p` is position `p` of
//! sample `s` (for a convolution, `p = y · w + x`). In a transformer they are token-major:
//! column `t · samples + s` is token `t` of sample `s` (the class token first), so that
//! attention runs its inner loops over the samples.
//!
//! Every function here is `#[inline(always)]`, so that the timed pass, run inside
//! [`kernels::with_isa`], compiles all of it for the machine's AVX2 or AVX-512 rather than the
//! baseline SSE2 (the results are the same; only more lanes run at a time).

use std::ops::{Add, AddAssign, Div, Mul, Sub};

use kernels::Activation;

use crate::model::{Arch, LayerKind, ParamRef, TransformerArch, Weights};
use crate::StageError;

use super::attention::attention;
use super::encoder_ops::{add_residual, layer_norm};
use super::image_ops::{im2col, max_pool2, regroup};

/// The element types the pass runs in.
pub(crate) trait Real:
    Copy
    + Default
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + AddAssign
    + Send
    + Sync
{
    fn of(x: f64) -> Self;
    fn exp(self) -> Self;
    /// GELU (the tanh form, candle's `gelu`).
    fn gelu(self) -> Self;
    fn sqrt(self) -> Self;
    /// The values as f32, where they are f32: the pass's f32 path hands them to the kernels'
    /// explicit-vector code (the attention's heads, the LayerNorm), the f64 reference pass
    /// does not.
    fn f32s(x: &[Self]) -> Option<&[f32]>;
    /// [`Real::f32s`] of a buffer to write.
    fn f32s_mut(x: &mut [Self]) -> Option<&mut [f32]>;
}

impl Real for f32 {
    #[inline(always)]
    fn of(x: f64) -> Self {
        x as f32
    }
    #[inline(always)]
    fn exp(self) -> Self {
        // Cephes' `expf` without a libm call, so that loops over it vectorise.
        kernels::exp_f32(self)
    }
    #[inline(always)]
    fn gelu(self) -> Self {
        // The kernels' GELU, the same bits as their fused epilogue.
        kernels::gelu_f32(self)
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        f32::sqrt(self)
    }
    #[inline(always)]
    fn f32s(x: &[Self]) -> Option<&[f32]> {
        Some(x)
    }
    #[inline(always)]
    fn f32s_mut(x: &mut [Self]) -> Option<&mut [f32]> {
        Some(x)
    }
}

impl Real for f64 {
    fn of(x: f64) -> Self {
        x
    }
    fn exp(self) -> Self {
        f64::exp(self)
    }
    fn gelu(self) -> Self {
        let u = (2.0 / std::f64::consts::PI).sqrt() * (self + 0.044715 * self * self * self);
        0.5 * self * (1.0 + u.tanh())
    }
    fn sqrt(self) -> Self {
        f64::sqrt(self)
    }
    fn f32s(_: &[Self]) -> Option<&[f32]> {
        None
    }
    fn f32s_mut(_: &mut [Self]) -> Option<&mut [f32]> {
        None
    }
}

/// How a pass runs its layers' products. `gemm(layer, x, n, activation)`: layer `layer`'s
/// `W · x + bias` for `x` of `cols × n` (row-major), `rows × n`, then the activation. The CPU
/// kernels fuse the bias and the activation into the product ([`kernels::Epilogue`]); a gemm
/// that cannot calls [`finish`]. Any `FnMut(usize, &[T], usize, Activation) -> Result<Vec<T>,
/// _>` is one.
pub(crate) trait Gemm<T> {
    /// Layer `layer`'s output for `x`.
    fn gemm(
        &mut self,
        layer: usize,
        x: &[T],
        n: usize,
        activation: Activation,
    ) -> Result<Vec<T>, StageError>;
    /// Takes back an output of [`Self::gemm`] (or of [`Self::take`]) that the pass no longer
    /// reads, so that the next product can write into it (the default drops it).
    fn recycle(&mut self, _done: Vec<T>) {}
    /// A buffer of `len` values with unspecified contents, for host work that overwrites every
    /// one of them (the default: a fresh, zeroed one).
    fn take(&mut self, len: usize) -> Vec<T>
    where
        T: Copy + Default,
    {
        vec![T::default(); len]
    }
    /// Threads the host work between the products may use (LayerNorm, attention, residual): as
    /// many as the products use, so that neither waits on one core (the default: one).
    fn host_threads(&self) -> usize {
        1
    }
}

impl<T, F> Gemm<T> for F
where
    F: FnMut(usize, &[T], usize, Activation) -> Result<Vec<T>, StageError>,
{
    fn gemm(
        &mut self,
        layer: usize,
        x: &[T],
        n: usize,
        activation: Activation,
    ) -> Result<Vec<T>, StageError> {
        self(layer, x, n, activation)
    }
}

/// Layer `i`'s bias, then `activation`, on its product `out` (`rows × n`): what a gemm that
/// does not fuse them applies (per element the same operations as [`kernels::Epilogue`]).
#[inline(always)]
pub(crate) fn finish<T: Real>(
    w: &Weights,
    i: usize,
    out: &mut [T],
    n: usize,
    activation: Activation,
) {
    add_bias(out, &w.layers[i].bias, n);
    match activation {
        Activation::None => {}
        Activation::Relu => relu_in_place(out),
        Activation::Gelu => out.iter_mut().for_each(|v| *v = v.gelu()),
    }
}

/// Layer `i`'s `W · x` in f32, summed in order, with its bias and activation: the tests'
/// product.
#[cfg(test)]
pub(crate) fn naive_gemm(
    w: &Weights,
    i: usize,
    x: &[f32],
    n: usize,
    activation: Activation,
) -> Vec<f32> {
    let l = &w.layers[i];
    let mut out = vec![0f32; l.rows() * n];
    for r in 0..l.rows() {
        for k in 0..l.cols() {
            let a = l.weight[r * l.cols() + k];
            for j in 0..n {
                out[r * n + j] += a * x[k * n + j];
            }
        }
    }
    finish(w, i, &mut out, n, activation);
    out
}

/// Logits (`classes × samples`) of `x` (`features × samples`).
#[inline(always)]
pub(crate) fn forward<T: Real>(
    w: &Weights,
    x: &[T],
    samples: usize,
    gemm: &mut dyn Gemm<T>,
) -> Result<Vec<T>, StageError> {
    match &w.arch {
        Arch::Chain => chain(w, x, samples, gemm),
        Arch::Transformer(t) => transformer(w, t, x, samples, gemm),
    }
}

/// Adds each row's bias to `rows × n` values.
#[inline(always)]
fn add_bias<T: Real>(out: &mut [T], bias: &[f32], n: usize) {
    for (row, &b) in out.chunks_mut(n.max(1)).zip(bias) {
        let b = T::of(b as f64);
        row.iter_mut().for_each(|v| *v += b);
    }
}

/// ReLU with an unconditional store, so that it compiles to a compare and blend per vector:
/// the conditional store (`if x < 0 { x = 0 }`) became a branch per element, mispredicted on
/// half of them, and took ~190 µs of a 256×256 layer's 600 µs pass at batch 256. NaN stays NaN.
#[inline(always)]
fn relu_in_place<T: Real>(v: &mut [T]) {
    for x in v {
        *x = if *x < T::default() { T::default() } else { *x };
    }
}

/// ReLU after every layer of a chain but the last.
fn relu_unless(last: bool) -> Activation {
    if last {
        Activation::None
    } else {
        Activation::Relu
    }
}

/// An MLP or CNN: each layer feeds the next, ReLU between.
#[inline(always)]
fn chain<T: Real>(
    w: &Weights,
    x: &[T],
    samples: usize,
    gemm: &mut dyn Gemm<T>,
) -> Result<Vec<T>, StageError> {
    // While the activations are an image: (channels, height, width), columns (s, y, x).
    let mut image = match (w.image_shape, w.layers.first().map(|l| &l.kind)) {
        (Some(s), Some(LayerKind::Conv2d { .. })) => Some(s),
        _ => None,
    };
    let mut cur = match image {
        Some((_, h, wd)) => regroup(x, samples, h * wd, false, gemm.take(x.len())),
        None => {
            let mut cur = gemm.take(x.len());
            cur.copy_from_slice(x);
            cur
        }
    };
    let last = w.layers.len().saturating_sub(1);
    for (i, l) in w.layers.iter().enumerate() {
        match l.kind {
            LayerKind::Linear => {
                if let Some((_, h, wd)) = image.take() {
                    let flat = regroup(&cur, samples, h * wd, true, gemm.take(cur.len()));
                    gemm.recycle(std::mem::replace(&mut cur, flat));
                }
                let out = gemm.gemm(i, &cur, samples, relu_unless(i == last))?;
                gemm.recycle(std::mem::replace(&mut cur, out));
            }
            LayerKind::Conv2d { padding, pool } => {
                let Some((c, h, wd)) = image else {
                    return Err(StageError::InvalidConfig(format!(
                        "layer {}: a convolution after a linear layer",
                        l.name
                    )));
                };
                let k = l.shape[2];
                let (oh, ow) = (h + 2 * padding + 1 - k, wd + 2 * padding + 1 - k);
                let patches = gemm.take(c * k * k * samples * oh * ow);
                let patches = im2col(&cur, (c, h, wd), samples, (k, padding), patches);
                let out = gemm.gemm(i, &patches, samples * oh * ow, relu_unless(i == last))?;
                gemm.recycle(patches);
                gemm.recycle(std::mem::replace(&mut cur, out));
                image = Some((l.rows(), oh, ow));
                if pool {
                    let pooled = gemm.take(l.rows() * samples * (oh / 2) * (ow / 2));
                    let pooled = max_pool2(&cur, (l.rows(), oh, ow), samples, pooled);
                    gemm.recycle(std::mem::replace(&mut cur, pooled));
                    image = Some((l.rows(), oh / 2, ow / 2));
                }
            }
        }
    }
    Ok(cur)
}

/// The encoder of [`TransformerArch`], as `model::transformer` computes it in candle.
#[inline(always)]
fn transformer<T: Real>(
    w: &Weights,
    t: &TransformerArch,
    x: &[T],
    samples: usize,
    gemm: &mut dyn Gemm<T>,
) -> Result<Vec<T>, StageError> {
    let (d, tokens, np, pd) = (t.d_model, t.tokens(), t.patches, t.patch_dim);
    let n = samples * tokens;
    // Patches: row j of patch (s, p) is input feature idx[p·pd + j] of sample s.
    let idx = t.patch_index(w.image_shape);
    // Every buffer of the host work comes from `gemm.take` and goes back by `recycle`, as the
    // products' outputs do: fresh, each was zeroed on the calling thread first (~1.1 MB a
    // LayerNorm at batch 256). On the ViT shape of `experiments/vit-digits.toml` (Zen 4, dense,
    // recycled against fresh in alternation) the pass took 1.4-1.8 % less at batch 1 and the
    // same within 2 % at batch 256, where the zeroing had also brought the lines into cache
    // for the writes that followed.
    let mut patches = gemm.take(pd * samples * np);
    for j in 0..pd {
        for p in 0..np {
            let src = &x[idx[p * pd + j] * samples..][..samples];
            patches[(j * np + p) * samples..][..samples].copy_from_slice(src);
        }
    }
    let embedded = gemm.gemm(0, &patches, samples * np, Activation::None)?;
    gemm.recycle(patches);
    let (cls, pos) = (
        &w.params[t.param(ParamRef::Cls)].values,
        &w.params[t.param(ParamRef::Pos)].values,
    );
    let mut h = gemm.take(d * n);
    for r in 0..d {
        for tok in 0..tokens {
            let p = T::of(pos[tok * d + r] as f64);
            let dst = &mut h[r * n + tok * samples..][..samples];
            if tok == 0 {
                dst.iter_mut().for_each(|v| *v = T::of(cls[r] as f64) + p);
            } else {
                let src = &embedded[r * samples * np + (tok - 1) * samples..][..samples];
                dst.iter_mut().zip(src).for_each(|(v, &e)| *v = e + p);
            }
        }
    }
    gemm.recycle(embedded);
    let threads = gemm.host_threads();
    for b in 0..t.blocks {
        let x1 = gemm.take(d * n);
        let x1 = layer_norm(w, t.param(ParamRef::Norm1(b)), &h, (d, n), x1, threads)?;
        let q = gemm.gemm(t.block_layer(b, 0), &x1, n, Activation::None)?;
        let k = gemm.gemm(t.block_layer(b, 1), &x1, n, Activation::None)?;
        let v = gemm.gemm(t.block_layer(b, 2), &x1, n, Activation::None)?;
        gemm.recycle(x1);
        let mixed = gemm.take(q.len());
        let mixed = attention(t, (&q, &k, &v), samples, mixed, threads)?;
        [q, k, v].into_iter().for_each(|done| gemm.recycle(done));
        let o = gemm.gemm(t.block_layer(b, 3), &mixed, n, Activation::None)?;
        gemm.recycle(mixed);
        add_residual(&mut h, &o, (n, n), threads);
        gemm.recycle(o);
        let x2 = gemm.take(d * n);
        let x2 = layer_norm(w, t.param(ParamRef::Norm2(b)), &h, (d, n), x2, threads)?;
        // GELU fused into the up-projection's epilogue (the kernels apply it as they store).
        let up = gemm.gemm(t.block_layer(b, 4), &x2, n, Activation::Gelu)?;
        gemm.recycle(x2);
        let down = gemm.gemm(t.block_layer(b, 5), &up, n, Activation::None)?;
        gemm.recycle(up);
        // After the last block only the class tokens' columns (token 0: the first `samples`
        // of each row) are read.
        let cols = if b + 1 == t.blocks { samples } else { n };
        add_residual(&mut h, &down, (n, cols), threads);
        gemm.recycle(down);
    }
    // The class tokens' columns.
    let mut first = gemm.take(d * samples);
    for r in 0..d {
        first[r * samples..][..samples].copy_from_slice(&h[r * n..][..samples]);
    }
    gemm.recycle(h);
    let normed = gemm.take(d * samples);
    let normed = layer_norm(
        w,
        t.param(ParamRef::NormFinal),
        &first,
        (d, samples),
        normed,
        threads,
    )?;
    gemm.recycle(first);
    let logits = gemm.gemm(t.head(), &normed, samples, Activation::None);
    gemm.recycle(normed);
    logits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::net::Net;
    use crate::ModelSpec;

    /// `w`'s GEMMs in f64 from its own weights.
    fn dense_gemm(
        w: &Weights,
    ) -> impl FnMut(usize, &[f64], usize, Activation) -> Result<Vec<f64>, StageError> + '_ {
        move |i, x, n, activation| {
            let l = &w.layers[i];
            let (rows, cols) = (l.rows(), l.cols());
            let mut out = vec![0f64; rows * n];
            for r in 0..rows {
                for k in 0..cols {
                    let a = l.weight[r * cols + k] as f64;
                    for j in 0..n {
                        out[r * n + j] += a * x[k * n + j];
                    }
                }
            }
            finish(w, i, &mut out, n, activation);
            Ok(out)
        }
    }

    /// Logits of `samples` random inputs, one pass for all of them and one per sample, against
    /// candle's forward pass on the same weights.
    fn check(spec: &ModelSpec, image: Option<(usize, usize, usize)>, features: usize) {
        let w = Weights::init(spec, features, image, 5, 3).unwrap();
        let samples = 11;
        let x = kernels::random_values(samples * features, 4);
        let xt: Vec<f64> = (0..features * samples)
            .map(|at| x[(at % samples) * features + at / samples] as f64)
            .collect();
        let all = forward(&w, &xt, samples, &mut dense_gemm(&w)).unwrap();
        let net = Net::from_weights(&w).unwrap();
        let candle: Vec<f32> = net
            .forward(&net.input(x.clone(), samples).unwrap())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1()
            .unwrap();
        for s in 0..samples {
            let one: Vec<f64> = (0..features).map(|f| xt[f * samples + s]).collect();
            let alone = forward(&w, &one, 1, &mut dense_gemm(&w)).unwrap();
            for c in 0..5 {
                let (a, b, want) = (all[c * samples + s], alone[c], candle[s * 5 + c] as f64);
                assert!(
                    (a - b).abs() < 1e-9,
                    "{spec:?}: sample {s} class {c}: {a} vs {b}"
                );
                assert!(
                    (a - want).abs() < 1e-4,
                    "{spec:?}: sample {s} class {c}: {a} vs candle {want}"
                );
            }
        }
    }

    /// The f32 pass, the one evaluate runs, against the f64 pass on the same weights: what
    /// only f32 runs (the exponential's polynomial, the kernels' batched attention with its
    /// fused multiply-adds and their LayerNorm) on the ViT's 17 tokens, at 1, 5 and 19 samples
    /// (19: batched, in full blocks of 8 or 16 samples and a partial one; the f64 pass runs each
    /// sample alone). The passes' shared structure is checked against candle above.
    #[test]
    fn the_f32_pass_agrees_with_the_f64_pass() {
        let vit = ModelSpec::Transformer {
            layers: 2,
            d_model: 32,
            heads: 4,
            d_ff: 48,
            patch: 2,
        };
        let w = Weights::init(&vit, 64, Some((1, 8, 8)), 10, 3).unwrap();
        for samples in [1, 5, 19] {
            let x = kernels::random_values(64 * samples, 8);
            let x64: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            let want = forward(&w, &x64, samples, &mut dense_gemm(&w)).unwrap();
            let mut gemm =
                |i: usize, x: &[f32], n: usize, act: Activation| Ok(naive_gemm(&w, i, x, n, act));
            let got = forward(&w, &x, samples, &mut gemm).unwrap();
            let scale = want.iter().fold(1f64, |m, v| m.max(v.abs()));
            for (at, (&g, &e)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g as f64 - e).abs() <= 1e-5 * scale,
                    "{samples} samples, logit {at}: f32 {g}, f64 {e}"
                );
            }
        }
    }

    #[test]
    fn every_architecture_matches_candle_and_batches_do_not_mix() {
        let vit = ModelSpec::Transformer {
            layers: 2,
            d_model: 16,
            heads: 4,
            d_ff: 24,
            patch: 2,
        };
        check(&vit, Some((2, 4, 6)), 48);
        let seq = ModelSpec::Transformer {
            layers: 1,
            d_model: 8,
            heads: 2,
            d_ff: 8,
            patch: 5,
        };
        check(&seq, None, 20);
        let cnn = ModelSpec::Cnn {
            channels: vec![3, 4],
            hidden: vec![6],
        };
        check(&cnn, Some((2, 5, 7)), 70);
        check(&ModelSpec::Mlp { hidden: vec![7] }, None, 9);
    }
}
