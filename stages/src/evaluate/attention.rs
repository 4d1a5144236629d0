//! Multi-head self-attention of the forward pass ([`super::graph`]), on feature-major
//! activations whose columns are token-major (column `t · samples + s`). `#[inline(always)]`
//! like the rest of the graph, so that it runs at the kernels' ISA.

use std::ops::Range;
use std::sync::Mutex;

use kernels::HostParts;

use super::encoder_ops::slot;
use super::graph::Real;
use crate::model::TransformerArch;

/// Multi-head self-attention on feature-major `q`, `k`, `v` (`d × (tokens·s)`, columns
/// token-major: column `i · samples + s` is token `i` of sample `s`), into `out` in the same
/// layout (as long as `q`, every value overwritten). With many samples the lanes of every
/// vector are samples, contiguous in this layout, 8 at a time, and the heads run on up to
/// `threads` of the kernels' threads; with fewer than 8, each sample runs alone over its
/// tokens.
#[inline(always)]
pub(super) fn attention<T: Real>(
    t: &TransformerArch,
    (q, k, v): (&[T], &[T], &[T]),
    samples: usize,
    mut out: Vec<T>,
    threads: usize,
) -> Vec<T> {
    let (tokens, dh) = (t.tokens(), t.head_dim());
    let n = samples * tokens;
    debug_assert_eq!(out.len(), q.len());
    if samples < 8 {
        // One sample at a time, its `d × tokens` columns gathered (none to gather for one).
        if samples == 1 {
            attention_of_one(t, (q, k, v), &mut out);
            return out;
        }
        let mut one_out = vec![T::default(); t.d_model * tokens];
        // Column `tok · samples + s` of each row, by loops (an index divided by `tokens` per
        // value cost ~30 µs a layer, most of the attention of one sample).
        let gather = |x: &[T], s: usize| -> Vec<T> {
            let mut one = Vec::with_capacity(t.d_model * tokens);
            for row in x.chunks(n) {
                one.extend((0..tokens).map(|tok| row[tok * samples + s]));
            }
            one
        };
        for s in 0..samples {
            let o = &mut one_out;
            attention_of_one(t, (&gather(q, s), &gather(k, s), &gather(v, s)), o);
            for (row, one) in out.chunks_mut(n).zip(o.chunks(tokens)) {
                for (tok, &x) in one.iter().enumerate() {
                    row[tok * samples + s] = x;
                }
            }
        }
        return out;
    }
    let heads = Heads {
        t,
        q,
        k,
        v,
        samples,
        outs: out.chunks_mut((dh * n).max(1)).map(Mutex::new).collect(),
    };
    // One slice of `head_dim × n` per head.
    kernels::run_host_parts(&heads, heads.outs.len(), threads);
    drop(heads);
    out
}

/// [`attention`]'s parts on the batched path: part `h` is head `h`, into `outs[h]` (the head's
/// rows of the output).
struct Heads<'a, T> {
    t: &'a TransformerArch,
    q: &'a [T],
    k: &'a [T],
    v: &'a [T],
    samples: usize,
    outs: Vec<Mutex<&'a mut [T]>>,
}

impl<T: Real> HostParts for Heads<'_, T> {
    #[inline(always)]
    fn part(&self, h: usize) {
        let mut out = slot(&self.outs[h]);
        head(self.t, (self.q, self.k, self.v), self.samples, h, &mut out);
    }
}

/// Samples per block of the batched path: one 256-bit vector of f32.
const LANES: usize = 8;

/// One token's values for a block of [`LANES`] samples, on its own 32-byte line half, so that
/// each is one aligned vector load (lanes past a partial block's samples hold zeros).
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Lanes<T>([T; LANES]);

/// Head `h` of [`attention`] on the batched path into `out` (its `head_dim × n` rows), a block
/// of [`LANES`] samples at a time. The block's q and k rows of the head are packed row-major
/// (`[e][token]`), its v rows token-major (`[token][e]`); then come its scores from
/// [`products`] (`S[j][i] = Σ_e k[e][j] · q[e][i]`, key-major), a softmax per query, and the
/// output from [`products`] again (`O[i][e] = Σ_j P[j][i] · v[j][e]`). The block's ~44 KiB stay
/// in L1 or L2 while it is used. (Summing each score over the rows in memory, a load and a
/// store of the score per multiply-add, took 1.9 ms a layer at batch 256 on a Zen 3 core.)
#[inline(always)]
fn head<T: Real>(
    t: &TransformerArch,
    qkv: (&[T], &[T], &[T]),
    samples: usize,
    h: usize,
    out: &mut [T],
) {
    let (tokens, dh) = (t.tokens(), t.head_dim());
    let zero = Lanes([T::default(); LANES]);
    let mut block = SampleBlock {
        qkv,
        samples,
        tokens,
        rows: h * dh..(h + 1) * dh,
        scale: T::of(1.0 / (dh as f64).sqrt()),
        qb: vec![zero; dh * tokens],
        kb: vec![zero; dh * tokens],
        vb: vec![zero; tokens * dh],
        pt: vec![zero; tokens * tokens],
        o: vec![zero; tokens * dh],
        inv: vec![[T::default(); LANES]; tokens],
    };
    for s0 in (0..samples).step_by(LANES) {
        let len = LANES.min(samples - s0);
        // Full blocks get their own copy of the code, where every copy of lanes has a fixed
        // length: with one copy, the full and partial paths' copies became one `memcpy` call
        // of a variable length per lane vector, most of the attention's time.
        if len == LANES {
            block.run::<true>(s0, LANES, out);
        } else {
            block.run::<false>(s0, len, out);
        }
    }
}

/// A head's work on one block of samples ([`head`]), with its buffers.
struct SampleBlock<'a, T> {
    qkv: (&'a [T], &'a [T], &'a [T]),
    samples: usize,
    tokens: usize,
    /// The head's rows of q, k, v and the output.
    rows: Range<usize>,
    scale: T,
    /// q and k packed `[e][token]`, v `[token][e]`.
    qb: Vec<Lanes<T>>,
    kb: Vec<Lanes<T>>,
    vb: Vec<Lanes<T>>,
    /// Scores, then probabilities, `[key][query]`.
    pt: Vec<Lanes<T>>,
    /// The block's output, `[query][e]`.
    o: Vec<Lanes<T>>,
    /// Per query, the inverse of its probabilities' sum.
    inv: Vec<[T; LANES]>,
}

impl<T: Real> SampleBlock<'_, T> {
    /// The samples `s0..s0 + len` (`len` is [`LANES`] when `FULL`) into `out`.
    #[inline(always)]
    fn run<const FULL: bool>(&mut self, s0: usize, len: usize, out: &mut [T]) {
        let len = if FULL { LANES } else { len };
        let (tokens, dh, scale) = (self.tokens, self.rows.len(), self.scale);
        let n = self.samples * tokens;
        let (q, k, v) = self.qkv;
        for (e, r) in self.rows.clone().enumerate() {
            for tok in 0..tokens {
                let at = r * n + tok * self.samples + s0;
                self.qb[e * tokens + tok] = load_lanes(&q[at..], len);
                self.kb[e * tokens + tok] = load_lanes(&k[at..], len);
                self.vb[tok * dh + e] = load_lanes(&v[at..], len);
            }
        }
        let pt = &mut self.pt;
        products((&self.kb, tokens), (&self.qb, tokens), dh, pt);
        // Softmax over the keys, per query and sample (lane).
        for (i, inv) in self.inv.iter_mut().enumerate() {
            let mut max = pt[i].0;
            for j in 1..tokens {
                for (m, &x) in max.iter_mut().zip(&pt[j * tokens + i].0) {
                    // An unconditional store, as in `relu`: a select per vector, no branch.
                    *m = if x > *m { x } else { *m };
                }
            }
            let mut sum = [T::default(); LANES];
            for j in 0..tokens {
                let p = &mut pt[j * tokens + i].0;
                for ((x, &m), s) in p.iter_mut().zip(&max).zip(sum.iter_mut()) {
                    *x = ((*x - m) * scale).exp();
                    *s += *x;
                }
            }
            *inv = sum.map(|s| T::of(1.0) / s);
        }
        products((pt, tokens), (&self.vb, dh), tokens, &mut self.o);
        for (i, (oi, inv)) in self.o.chunks_exact(dh).zip(&self.inv).enumerate() {
            for (r, oe) in self.rows.clone().zip(oi) {
                let x: [T; LANES] = std::array::from_fn(|l| oe.0[l] * inv[l]);
                let local = r - self.rows.start;
                out[local * n + i * self.samples + s0..][..len].copy_from_slice(&x[..len]);
            }
        }
    }
}

/// Rows of each [`products`] operand held in registers at once: 3 × 3 outputs, 3 + 3 loads
/// per step and 9 accumulators, 15 of AVX2's 16 vector registers.
const BLOCK: usize = 3;

/// `dst[a · ys + b] = Σ_k x[k][a] · y[k][b]` for every `a < xs` and `b < ys`, lane by lane,
/// summed in order of `k < depth`, where operand `(z, s)` holds `z[k][a]` at `z[k · s + a]`.
/// Blocks of [`BLOCK`] × [`BLOCK`] outputs, so that each load feeds three multiply-adds (a dot
/// product at a time loads two vectors per multiply-add).
#[inline(always)]
fn products<T: Real>(
    x: (&[Lanes<T>], usize),
    y: (&[Lanes<T>], usize),
    depth: usize,
    dst: &mut [Lanes<T>],
) {
    // The arms below instantiate every block shape up to 3 × 3.
    const { assert!(BLOCK == 3) };
    for a0 in (0..x.1).step_by(BLOCK) {
        for b0 in (0..y.1).step_by(BLOCK) {
            let at = (x, y, a0, b0, depth);
            match (BLOCK.min(x.1 - a0), BLOCK.min(y.1 - b0)) {
                (3, 3) => block::<T, 3, 3>(at, dst),
                (3, 2) => block::<T, 3, 2>(at, dst),
                (3, _) => block::<T, 3, 1>(at, dst),
                (2, 3) => block::<T, 2, 3>(at, dst),
                (2, 2) => block::<T, 2, 2>(at, dst),
                (2, _) => block::<T, 2, 1>(at, dst),
                (_, 3) => block::<T, 1, 3>(at, dst),
                (_, 2) => block::<T, 1, 2>(at, dst),
                _ => block::<T, 1, 1>(at, dst),
            }
        }
    }
}

/// The `A × B` outputs of [`products`] at `a0.., b0..`, accumulated in registers.
#[inline(always)]
#[allow(clippy::type_complexity)] // [`products`]' arguments, passed on as they came
fn block<T: Real, const A: usize, const B: usize>(
    ((x, xs), (y, ys), a0, b0, depth): (
        (&[Lanes<T>], usize),
        (&[Lanes<T>], usize),
        usize,
        usize,
        usize,
    ),
    dst: &mut [Lanes<T>],
) {
    let mut acc = [[[T::default(); LANES]; B]; A];
    for (xk, yk) in x.chunks_exact(xs).zip(y.chunks_exact(ys)).take(depth) {
        let xa: &[Lanes<T>; A] = xk[a0..][..A].try_into().expect("A rows");
        let yb: &[Lanes<T>; B] = yk[b0..][..B].try_into().expect("B rows");
        for (acc, xa) in acc.iter_mut().zip(xa) {
            for (acc, yb) in acc.iter_mut().zip(yb) {
                for ((s, &x), &y) in acc.iter_mut().zip(&xa.0).zip(&yb.0) {
                    *s = x.mul_add(y, *s);
                }
            }
        }
    }
    for (a, row) in acc.into_iter().enumerate() {
        dst[(a0 + a) * ys + b0..][..B]
            .iter_mut()
            .zip(row)
            .for_each(|(d, s)| *d = Lanes(s));
    }
}

/// The first `len` values of `src` as lanes, zeros after them.
#[inline(always)]
fn load_lanes<T: Real>(src: &[T], len: usize) -> Lanes<T> {
    let mut lanes = Lanes([T::default(); LANES]);
    lanes.0[..len].copy_from_slice(&src[..len]);
    lanes
}

/// [`attention`] of one sample whose `q`, `k`, `v` are `d × tokens` into `out` (`d × tokens`,
/// every value overwritten): per head, the scores key-major (`st[j][i]`, key `j`, query `i`)
/// by outer products over the head's rows, a softmax per query down the columns, and each
/// output row as a sum of the value rows' multiples. Every loop runs along the queries with
/// nothing carried from one query to the next, so each vectorises; the same operations in the
/// same order per value as the query-major form (scores row by row, dot products per output),
/// whose per-row maximum, sum and dot products were sequential reductions that ran one value
/// at a time: the attention was 36-53 µs of a 64-133 µs ViT pass at batch 1 (Zen 4).
#[inline(always)]
fn attention_of_one<T: Real>(t: &TransformerArch, (q, k, v): (&[T], &[T], &[T]), out: &mut [T]) {
    let (tokens, dh) = (t.tokens(), t.head_dim());
    let scale = T::of(1.0 / (dh as f64).sqrt());
    let mut st = vec![T::default(); tokens * tokens];
    let (mut max, mut sum) = (vec![T::default(); tokens], vec![T::default(); tokens]);
    for h in 0..t.heads {
        st.iter_mut().for_each(|x| *x = T::default());
        for e in h * dh..(h + 1) * dh {
            let (qe, ke) = (&q[e * tokens..][..tokens], &k[e * tokens..][..tokens]);
            for (row, &kj) in st.chunks_mut(tokens).zip(ke) {
                row.iter_mut().zip(qe).for_each(|(x, &qi)| *x += qi * kj);
            }
        }
        max.copy_from_slice(&st[..tokens]);
        for row in st.chunks(tokens) {
            for (m, &x) in max.iter_mut().zip(row) {
                *m = if x > *m { x } else { *m };
            }
        }
        sum.iter_mut().for_each(|s| *s = T::default());
        for row in st.chunks_mut(tokens) {
            for (x, &m) in row.iter_mut().zip(&max) {
                *x = ((*x - m) * scale).exp();
            }
            sum.iter_mut().zip(row.iter()).for_each(|(s, &x)| *s += x);
        }
        // Each query's sum becomes its inverse.
        sum.iter_mut().for_each(|s| *s = T::of(1.0) / *s);
        for row in st.chunks_mut(tokens) {
            row.iter_mut().zip(&sum).for_each(|(x, &inv)| *x = *x * inv);
        }
        for e in h * dh..(h + 1) * dh {
            let o = &mut out[e * tokens..][..tokens];
            o.iter_mut().for_each(|x| *x = T::default());
            for (row, &vj) in st.chunks(tokens).zip(&v[e * tokens..][..tokens]) {
                o.iter_mut().zip(row).for_each(|(x, &pj)| *x += pj * vj);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The query-major attention of one sample that [`attention_of_one`] replaced: scores row
    /// by row, a softmax per row, dot products per output.
    fn query_major(t: &TransformerArch, (q, k, v): (&[f32], &[f32], &[f32])) -> Vec<f32> {
        let (tokens, dh) = (t.tokens(), t.head_dim());
        let scale = 1.0 / (dh as f32).sqrt();
        let mut out = vec![0.0; q.len()];
        let mut scores = vec![0.0f32; tokens * tokens];
        for h in 0..t.heads {
            scores.iter_mut().for_each(|x| *x = 0.0);
            for e in h * dh..(h + 1) * dh {
                let (qe, ke) = (&q[e * tokens..][..tokens], &k[e * tokens..][..tokens]);
                for (row, &qi) in scores.chunks_mut(tokens).zip(qe) {
                    row.iter_mut().zip(ke).for_each(|(x, &kj)| *x += qi * kj);
                }
            }
            for row in scores.chunks_mut(tokens) {
                let mut max = row[0];
                row.iter().for_each(|&x| {
                    if x > max {
                        max = x;
                    }
                });
                let mut sum = 0.0;
                for x in row.iter_mut() {
                    *x = Real::exp((*x - max) * scale);
                    sum += *x;
                }
                let inv = 1.0 / sum;
                row.iter_mut().for_each(|x| *x *= inv);
            }
            for e in h * dh..(h + 1) * dh {
                let ve = &v[e * tokens..][..tokens];
                for (o, p) in out[e * tokens..][..tokens]
                    .iter_mut()
                    .zip(scores.chunks(tokens))
                {
                    let mut acc = 0.0;
                    p.iter().zip(ve).for_each(|(&pj, &vj)| acc += pj * vj);
                    *o = acc;
                }
            }
        }
        out
    }

    /// Key-major scores give the query-major attention bit for bit (the same operations in
    /// the same order per value), on a ViT's 17 tokens and on odd sizes, into a NaN-filled
    /// output.
    #[test]
    fn one_sample_key_major_equals_query_major_bit_for_bit() {
        for (d_model, heads, patches) in [(64, 4, 16), (24, 3, 4), (8, 1, 1)] {
            let t = TransformerArch {
                blocks: 1,
                d_model,
                heads,
                d_ff: 2 * d_model,
                patch: 2,
                patches,
                patch_dim: 4,
            };
            let n = d_model * t.tokens();
            let q = kernels::random_values(n, 1);
            let k = kernels::random_values(n, 2);
            let v = kernels::random_values(n, 3);
            let mut got = vec![f32::NAN; n];
            attention_of_one(&t, (&q, &k, &v), &mut got);
            let want = query_major(&t, (&q, &k, &v));
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "d_model {d_model}, {heads} heads");
        }
    }
}
