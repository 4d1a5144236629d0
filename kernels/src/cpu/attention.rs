//! One head of multi-head self-attention over a batch of samples, on the kernels' explicit
//! vectors ([`Simd`]): the batched path of a transformer's attention (`stages::evaluate`).
//!
//! The activations are feature-major with token-major columns: column `t · samples + s` is
//! token `t` of sample `s`, so the samples of one token lie side by side and fill a vector's
//! lanes, [`Simd::LANES`] samples at a time (a masked partial block at the end). Per block the
//! head's q and k rows are packed `[e][token]`, its v rows `[token][e]`; the scores are
//! `S[j][i] = Σ_e k[e][j] · q[e][i]` (key-major), then a softmax per query, then
//! `O[i][e] = Σ_j P[j][i] · v[j][e]`, each product blocked in registers
//! ([`products`]). Every lane computes its sample with the same operations in the same order
//! (fused multiply-adds, summed in order of e or j; [`exp`]'s polynomial), so every ISA gives
//! the same bits, the scalar code's included, and a scalar loop written in that order gives
//! them too (the test).
//!
//! Written on intrinsics rather than left to the vectoriser: the same code written on arrays of
//! lanes in `stages` ran 2.5× slower after unrelated edits to the crate changed what LLVM
//! made of it (kernels/BENCH.md, the forty-first session).

use std::ops::Range;

use super::activation::exp;
use super::host_isa::{run_vectors_at, VectorOp};
use super::simd::{load_n, store_n, Simd};
use crate::{isa, Isa, KernelError};

/// The shape of [`attention_head`]'s activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadShape {
    /// Tokens per sample.
    pub tokens: usize,
    /// Samples in the batch.
    pub samples: usize,
    /// Rows of q, k and v per head.
    pub head_dim: usize,
}

/// Head `rows` of the attention of `q`, `k`, `v` (each `d × (tokens · samples)`, columns
/// token-major) into `out`, the head's `head_dim × (tokens · samples)` rows of the output,
/// every value overwritten, at the kernels' ISA ([`isa`]). Scores are scaled by
/// `1 / √head_dim` inside the softmax.
pub fn attention_head(
    qkv: (&[f32], &[f32], &[f32]),
    shape: HeadShape,
    rows: Range<usize>,
    out: &mut [f32],
) -> Result<(), KernelError> {
    attention_head_at(isa(), qkv, shape, rows, out)
}

/// [`attention_head`] at `at` (a narrower ISA than [`isa`] to test the others; a wider one runs
/// at [`isa`]'s).
pub fn attention_head_at(
    at: Isa,
    (q, k, v): (&[f32], &[f32], &[f32]),
    shape: HeadShape,
    rows: Range<usize>,
    out: &mut [f32],
) -> Result<(), KernelError> {
    let HeadShape {
        tokens,
        samples,
        head_dim: dh,
    } = shape;
    // Every size the head computes, checked: a product that wrapped would pass the length
    // checks and run past the buffers.
    let l = at.lanes().max(isa().lanes());
    let sizes = (|| {
        let n = tokens.checked_mul(samples)?;
        let input = rows.end.checked_mul(n)?;
        let output = dh.checked_mul(n)?;
        tokens.checked_mul(tokens.max(dh))?.checked_mul(l)?;
        Some((n, input, output))
    })();
    let Some((n, input, output)) = sizes else {
        return Err(KernelError::InvalidFormat {
            format: "attention head",
            reason: format!("{shape:?} with rows {rows:?}: its sizes overflow"),
        });
    };
    for (what, x) in [("attention q", q), ("attention k", k), ("attention v", v)] {
        if x.len() < input {
            return Err(KernelError::LengthMismatch {
                what,
                expected: input,
                got: x.len(),
            });
        }
    }
    if rows.len() != dh {
        return Err(KernelError::LengthMismatch {
            what: "attention head rows",
            expected: dh,
            got: rows.len(),
        });
    }
    if out.len() != output {
        return Err(KernelError::LengthMismatch {
            what: "attention head output",
            expected: output,
            got: out.len(),
        });
    }
    if n == 0 || dh == 0 {
        return Ok(());
    }
    let head = Head {
        qkv: (q, k, v),
        shape,
        rows,
        out,
    };
    run_vectors_at(at, head);
    Ok(())
}

/// [`attention_head`]'s arguments, checked.
struct Head<'a> {
    qkv: (&'a [f32], &'a [f32], &'a [f32]),
    shape: HeadShape,
    rows: Range<usize>,
    out: &'a mut [f32],
}

impl VectorOp for Head<'_> {
    /// The head, [`Simd::LANES`] samples at a time.
    ///
    /// # Safety
    /// `S`'s ISA is available.
    #[inline(always)]
    unsafe fn run<S: Simd>(self) {
        let HeadShape {
            tokens,
            samples,
            head_dim: dh,
        } = self.shape;
        let (l, n) = (S::LANES, tokens * samples);
        let (q, k, v) = self.qkv;
        // As `1 / √dh` computed in f64 and rounded once, like the f64 reference pass.
        let scale = (1.0 / (dh as f64).sqrt()) as f32;
        let mut qb = vec![0.0f32; dh * tokens * l];
        let mut kb = vec![0.0f32; dh * tokens * l];
        let mut vb = vec![0.0f32; tokens * dh * l];
        let mut pt = vec![0.0f32; tokens * tokens * l];
        let mut inv = vec![0.0f32; tokens * l];
        // SAFETY (the block below): `S`'s ISA is available (the caller); `attention_head_at`
        // checked that q, k, v hold the rows `rows` of `n` columns and `out` `dh` rows of them,
        // and every packed buffer holds its `count · l` floats; a partial block reads and
        // writes only its `len` lanes.
        unsafe {
            for s0 in (0..samples).step_by(l) {
                let len = l.min(samples - s0);
                for (e, r) in self.rows.clone().enumerate() {
                    for tok in 0..tokens {
                        let at = r * n + tok * samples + s0;
                        let (packed, by_token) = ((e * tokens + tok) * l, (tok * dh + e) * l);
                        S::store(
                            qb.as_mut_ptr().add(packed),
                            load_n::<S>(q.as_ptr().add(at), len),
                        );
                        S::store(
                            kb.as_mut_ptr().add(packed),
                            load_n::<S>(k.as_ptr().add(at), len),
                        );
                        S::store(
                            vb.as_mut_ptr().add(by_token),
                            load_n::<S>(v.as_ptr().add(at), len),
                        );
                    }
                }
                let scores = Packed {
                    dst: pt.as_mut_ptr(),
                    ys: tokens,
                };
                products::<S, _>((&kb, tokens), (&qb, tokens), dh, scores);
                softmax::<S>(&mut pt, tokens, scale, &mut inv);
                // `O[i][e] · (1 / Σ_j)` straight into the block's samples of the output.
                let outputs = Scaled {
                    out: self.out.as_mut_ptr(),
                    inv: inv.as_ptr(),
                    n,
                    samples,
                    s0,
                    len,
                };
                products::<S, _>((&pt, tokens), (&vb, dh), tokens, outputs);
            }
        }
    }
}

/// The scores `pt` (`[key][query]`, vectors of lanes) become `e^((s − max) · scale)` per query
/// and lane, the maximum over the keys; `inv[i]` becomes `1 / Σ_j` of query i's (summed in key
/// order).
///
/// # Safety
/// `S`'s ISA is available; `pt` holds `tokens² · S::LANES` floats, `inv` `tokens · S::LANES`.
#[inline(always)]
unsafe fn softmax<S: Simd>(pt: &mut [f32], tokens: usize, scale: f32, inv: &mut [f32]) {
    let l = S::LANES;
    debug_assert!(pt.len() >= tokens * tokens * l && inv.len() >= tokens * l);
    // SAFETY: the caller's contract; every offset is below `tokens² · l` or `tokens · l`.
    unsafe {
        let p = pt.as_mut_ptr();
        for i in 0..tokens {
            let mut max = S::load(p.add(i * l));
            for j in 1..tokens {
                max = S::max(S::load(p.add((j * tokens + i) * l)), max);
            }
            let mut sum = S::zero();
            for j in 0..tokens {
                let at = p.add((j * tokens + i) * l);
                let e = exp::<S>(S::mul(S::sub(S::load(at), max), S::splat(scale)));
                S::store(at, e);
                sum = S::add(sum, e);
            }
            S::store(inv.as_mut_ptr().add(i * l), S::div(S::splat(1.0), sum));
        }
    }
}

/// `Σ_k x[k][a] · y[k][b]` for every `a < xs` and `b < ys` into `sink`, lane by lane and summed
/// in order of `k < depth` (fused), where operand `(z, s)` holds the vector `z[k][a]` at float
/// `(k · s + a) · LANES`. In blocks of up to 4 × 4 outputs (3 × 3 with 16 registers),
/// the rows cut into blocks as even as can be (17 tokens: 4, 4, 3, 3, 3), so that each load
/// feeds three or four multiply-adds.
///
/// # Safety
/// `S`'s ISA is available; the operands hold `depth · s · LANES` floats, and `sink` takes
/// every `a < xs`, `b < ys`.
#[inline(always)]
unsafe fn products<S: Simd, D: Sink>(
    x: (&[f32], usize),
    y: (&[f32], usize),
    depth: usize,
    sink: D,
) {
    let most = if S::LANES >= 16 { 4 } else { 3 };
    debug_assert!(x.0.len() >= depth * x.1 * S::LANES && y.0.len() >= depth * y.1 * S::LANES);
    for (a0, a) in even_blocks(x.1, most) {
        for (b0, b) in even_blocks(y.1, most) {
            let at = Block {
                x: (x.0.as_ptr(), x.1),
                y: (y.0.as_ptr(), y.1),
                a0,
                b0,
                depth,
                sink,
            };
            // SAFETY: the caller's contract; `a0 + a ≤ xs` and `b0 + b ≤ ys`.
            unsafe {
                match (a, b) {
                    (4, 4) => at.run::<S, 4, 4>(),
                    (4, 3) => at.run::<S, 4, 3>(),
                    (4, 2) => at.run::<S, 4, 2>(),
                    (4, _) => at.run::<S, 4, 1>(),
                    (3, 4) => at.run::<S, 3, 4>(),
                    (3, 3) => at.run::<S, 3, 3>(),
                    (3, 2) => at.run::<S, 3, 2>(),
                    (3, _) => at.run::<S, 3, 1>(),
                    (2, 4) => at.run::<S, 2, 4>(),
                    (2, 3) => at.run::<S, 2, 3>(),
                    (2, 2) => at.run::<S, 2, 2>(),
                    (2, _) => at.run::<S, 2, 1>(),
                    (_, 4) => at.run::<S, 1, 4>(),
                    (_, 3) => at.run::<S, 1, 3>(),
                    (_, 2) => at.run::<S, 1, 2>(),
                    _ => at.run::<S, 1, 1>(),
                }
            }
        }
    }
}

/// `0..len` cut into `⌈len / most⌉` blocks whose sizes differ by at most one, larger first:
/// `(start, size)`.
fn even_blocks(len: usize, most: usize) -> impl Iterator<Item = (usize, usize)> {
    let count = len.div_ceil(most);
    let (base, extra) = (len / count.max(1), len % count.max(1));
    (0..count).scan(0, move |start, b| {
        let size = base + usize::from(b < extra);
        let at = *start;
        *start += size;
        Some((at, size))
    })
}

/// Where [`products`] puts its sums. A trait rather than a closure: a closure is compiled
/// without the caller's target features.
trait Sink: Copy {
    /// Takes the sum at `(a, b)`.
    ///
    /// # Safety
    /// `S`'s ISA is available; `(a, b)` is inside the product.
    unsafe fn put<S: Simd>(self, a: usize, b: usize, sum: S::V);
}

/// Sums stored as they are: `(a, b)` at float `(a · ys + b) · LANES` of `dst`.
#[derive(Clone, Copy)]
struct Packed {
    dst: *mut f32,
    ys: usize,
}

impl Sink for Packed {
    #[inline(always)]
    unsafe fn put<S: Simd>(self, a: usize, b: usize, sum: S::V) {
        // SAFETY: the caller's contract; `dst` holds `xs · ys` vectors.
        unsafe { S::store(self.dst.add((a * self.ys + b) * S::LANES), sum) }
    }
}

/// The output product's sums `(i, e)` times `inv[i]`, stored to row `e`, token `i` of the
/// block's samples `s0..s0 + len` of `out` (`d × n`, columns token-major).
#[derive(Clone, Copy)]
struct Scaled {
    out: *mut f32,
    inv: *const f32,
    n: usize,
    samples: usize,
    s0: usize,
    len: usize,
}

impl Sink for Scaled {
    #[inline(always)]
    unsafe fn put<S: Simd>(self, i: usize, e: usize, sum: S::V) {
        // SAFETY: the caller's contract; `inv` holds a vector per token, `out` the head's rows
        // of `n` columns, and the block's `len` samples of token `i` lie inside its row.
        unsafe {
            let x = S::mul(sum, S::load(self.inv.add(i * S::LANES)));
            let at = self.out.add(e * self.n + i * self.samples + self.s0);
            store_n::<S>(at, x, self.len);
        }
    }
}

/// One block of [`products`]' outputs: rows `a0..`, columns `b0..`.
struct Block<D> {
    x: (*const f32, usize),
    y: (*const f32, usize),
    a0: usize,
    b0: usize,
    depth: usize,
    sink: D,
}

impl<D: Sink> Block<D> {
    /// The `A × B` outputs, accumulated in registers.
    ///
    /// # Safety
    /// As [`products`], with `a0 + A ≤ xs` and `b0 + B ≤ ys`.
    #[inline(always)]
    unsafe fn run<S: Simd, const A: usize, const B: usize>(&self) {
        let l = S::LANES;
        let ((x, xs), (y, ys)) = (self.x, self.y);
        // SAFETY: the caller's contract bounds every offset.
        unsafe {
            let mut acc = [[S::zero(); B]; A];
            for k in 0..self.depth {
                let xk = x.add((k * xs + self.a0) * l);
                let yk = y.add((k * ys + self.b0) * l);
                let mut ya = [S::zero(); B];
                for (b, yb) in ya.iter_mut().enumerate() {
                    *yb = S::load(yk.add(b * l));
                }
                for (a, row) in acc.iter_mut().enumerate() {
                    let xa = S::load(xk.add(a * l));
                    for (s, &yb) in row.iter_mut().zip(&ya) {
                        *s = S::mul_add(xa, yb, *s);
                    }
                }
            }
            for (a, row) in acc.iter().enumerate() {
                for (b, &s) in row.iter().enumerate() {
                    self.sink.put::<S>(self.a0 + a, self.b0 + b, s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exp_f32;

    /// The head one sample and one value at a time, with the kernel's operations in its order
    /// (fused multiply-adds summed in order of e or j, the scalar `exp` of every lane).
    fn replica(qkv: (&[f32], &[f32], &[f32]), shape: HeadShape, rows: Range<usize>) -> Vec<f32> {
        let HeadShape {
            tokens,
            samples,
            head_dim: dh,
        } = shape;
        let n = tokens * samples;
        let (q, k, v) = qkv;
        let at =
            |x: &[f32], e: usize, tok: usize, s: usize| x[(rows.start + e) * n + tok * samples + s];
        let scale = (1.0 / (dh as f64).sqrt()) as f32;
        let mut out = vec![0.0; dh * n];
        for s in 0..samples {
            for i in 0..tokens {
                let scores: Vec<f32> = (0..tokens)
                    .map(|j| {
                        (0..dh).fold(0.0f32, |acc, e| at(k, e, j, s).mul_add(at(q, e, i, s), acc))
                    })
                    .collect();
                let max = scores[1..]
                    .iter()
                    .fold(scores[0], |m, &x| if x > m { x } else { m });
                let p: Vec<f32> = scores.iter().map(|&x| exp_f32((x - max) * scale)).collect();
                let inv = 1.0 / p.iter().fold(0.0f32, |sum, &x| sum + x);
                for e in 0..dh {
                    let o = (0..tokens).fold(0.0f32, |acc, j| p[j].mul_add(at(v, e, j, s), acc));
                    out[e * n + i * samples + s] = o * inv;
                }
            }
        }
        out
    }

    /// The ISAs this machine runs.
    fn isas() -> Vec<Isa> {
        [Isa::Scalar, Isa::Avx2, Isa::Avx512]
            .into_iter()
            .filter(|i| i.lanes() <= isa().lanes())
            .collect()
    }

    /// Every ISA gives the replica's bits, on the ViT's 17 tokens and awkward sizes, with full
    /// and partial blocks of samples, for a head that is not the first, into a NaN-filled
    /// output followed by values that must stay as they are (no masked store runs past it).
    #[test]
    fn every_isa_gives_the_replicas_bits() {
        for (tokens, dh) in [(17, 16), (5, 3), (1, 4), (2, 1), (9, 5)] {
            for samples in [1, 7, 16, 17, 35] {
                let shape = HeadShape {
                    tokens,
                    samples,
                    head_dim: dh,
                };
                let (n, d) = (tokens * samples, 2 * dh);
                let q = crate::random_values(d * n, 1);
                let k = crate::random_values(d * n, 2);
                let v = crate::random_values(d * n, 3);
                let want = replica((&q, &k, &v), shape, dh..2 * dh);
                for at in isas() {
                    let mut got = vec![f32::NAN; dh * n];
                    got.extend([7.0; 16]);
                    let out = &mut got[..dh * n];
                    attention_head_at(at, (&q, &k, &v), shape, dh..2 * dh, out).unwrap();
                    let what = format!("{at}, {tokens} tokens, head_dim {dh}, {samples} samples");
                    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got[..dh * n]), bits(&want), "{what}");
                    assert!(
                        got[dh * n..].iter().all(|&x| x == 7.0),
                        "{what}: past the end"
                    );
                }
            }
        }
    }

    /// The blocks cover `0..len` in order, at most `most` each, sizes within one of each other.
    #[test]
    fn even_blocks_cover_the_rows() {
        for most in 1..=4 {
            for len in 0..40 {
                let blocks: Vec<_> = even_blocks(len, most).collect();
                let mut next = 0;
                for &(start, size) in &blocks {
                    assert_eq!(start, next);
                    assert!((1..=most).contains(&size), "{len} {most}: {blocks:?}");
                    next += size;
                }
                assert_eq!(next, len);
                let sizes = blocks.iter().map(|b| b.1);
                assert!(sizes.clone().max().unwrap_or(0) - sizes.min().unwrap_or(0) <= 1);
            }
        }
        assert_eq!(
            even_blocks(17, 4).map(|b| b.1).collect::<Vec<_>>(),
            [4, 4, 3, 3, 3]
        );
    }

    /// Short inputs, a head whose rows are not `head_dim` and sizes that overflow are errors,
    /// not panics or reads past the buffers.
    #[test]
    fn bad_lengths_are_errors() {
        let shape = HeadShape {
            tokens: 3,
            samples: 4,
            head_dim: 2,
        };
        let x = vec![0.0; 4 * 12];
        let mut out = vec![0.0; 2 * 12];
        assert!(attention_head((&x, &x, &x[..40]), shape, 2..4, &mut out).is_err());
        assert!(attention_head((&x, &x, &x), shape, 1..4, &mut out).is_err());
        assert!(attention_head((&x, &x, &x), shape, 2..4, &mut out[..23]).is_err());
        assert!(attention_head((&x, &x, &x), shape, 2..4, &mut out).is_ok());
        // Sizes whose products wrap: 3 · ((2⁶⁴ + 2) / 3) is 2 modulo 2⁶⁴.
        let wraps = HeadShape {
            tokens: 3,
            samples: usize::MAX / 3 + 1,
            head_dim: 1,
        };
        let mut two = vec![0.0; 2];
        let x = vec![0.0; 2];
        assert!(attention_head((&x, &x, &x), wraps, 0..1, &mut two).is_err());
        let wide = HeadShape {
            tokens: 1 << 32,
            samples: 1,
            head_dim: 0,
        };
        assert!(attention_head((&[], &[], &[]), wide, 0..0, &mut []).is_err());
    }
}
