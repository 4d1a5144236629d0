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
/// every value overwritten): per head, the scores by outer products over the head's rows, a
/// softmax per query, each output row as dot products.
#[inline(always)]
fn attention_of_one<T: Real>(t: &TransformerArch, (q, k, v): (&[T], &[T], &[T]), out: &mut [T]) {
    let (tokens, dh) = (t.tokens(), t.head_dim());
    let scale = T::of(1.0 / (dh as f64).sqrt());
    let mut scores = vec![T::default(); tokens * tokens];
    for h in 0..t.heads {
        scores.iter_mut().for_each(|x| *x = T::default());
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
            let mut sum = T::default();
            for x in row.iter_mut() {
                *x = ((*x - max) * scale).exp();
                sum += *x;
            }
            let inv = T::of(1.0) / sum;
            row.iter_mut().for_each(|x| *x = *x * inv);
        }
        for e in h * dh..(h + 1) * dh {
            let ve = &v[e * tokens..][..tokens];
            for (o, p) in out[e * tokens..][..tokens]
                .iter_mut()
                .zip(scores.chunks(tokens))
            {
                let mut acc = T::default();
                p.iter().zip(ve).for_each(|(&pj, &vj)| acc += pj * vj);
                *o = acc;
            }
        }
    }
}
