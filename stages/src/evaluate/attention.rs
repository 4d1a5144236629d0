//! Multi-head self-attention of the forward pass ([`super::graph`]), on feature-major
//! activations whose columns are token-major (column `t · samples + s`). `#[inline(always)]`
//! like the rest of the graph, so that it runs at the kernels' ISA.

use std::sync::Mutex;

use kernels::HostParts;

use super::encoder_ops::slot;
use super::graph::Real;
use crate::model::TransformerArch;

/// Multi-head self-attention on feature-major `q`, `k`, `v` (`d × (tokens·s)`, columns
/// token-major: column `i · samples + s` is token `i` of sample `s`), into the same layout.
/// With many samples every inner loop runs over the samples, contiguous in this layout (the
/// `tokens × tokens` scores of all samples at once), and the heads run on up to `threads` of
/// the kernels' threads; with few, over one sample's tokens.
#[inline(always)]
pub(super) fn attention<T: Real>(
    t: &TransformerArch,
    q: &[T],
    k: &[T],
    v: &[T],
    samples: usize,
    threads: usize,
) -> Vec<T> {
    let (tokens, dh) = (t.tokens(), t.head_dim());
    let n = samples * tokens;
    if samples < 8 {
        // One sample at a time, its `d × tokens` columns gathered (none to gather for one).
        let mut out = vec![T::default(); q.len()];
        let gather = |x: &[T], s: usize| -> Vec<T> {
            (0..t.d_model * tokens)
                .map(|at| x[(at / tokens) * n + (at % tokens) * samples + s])
                .collect()
        };
        for s in 0..samples {
            let o = attention_of_one(t, &gather(q, s), &gather(k, s), &gather(v, s));
            for (at, &x) in o.iter().enumerate() {
                out[(at / tokens) * n + (at % tokens) * samples + s] = x;
            }
        }
        return out;
    }
    let mut out = vec![T::default(); q.len()];
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

/// Head `h` of [`attention`] on the batched path into `out` (its `head_dim × n` rows): every
/// inner loop runs over the samples.
#[inline(always)]
fn head<T: Real>(
    t: &TransformerArch,
    (q, k, v): (&[T], &[T], &[T]),
    samples: usize,
    h: usize,
    out: &mut [T],
) {
    let (tokens, dh) = (t.tokens(), t.head_dim());
    let n = samples * tokens;
    let scale = T::of(1.0 / (dh as f64).sqrt());
    // Scores `[query][key][sample]` of the head.
    let mut scores = vec![T::default(); tokens * tokens * samples];
    let rows = h * dh..(h + 1) * dh;
    // Each (query, key) score row of the samples summed over the head's rows while it is in
    // L1 (the rows outermost would stream all tokens² × samples scores through L2 once per
    // row); the same additions in the same order.
    for (i, sij_all) in scores.chunks_mut(tokens * samples).enumerate() {
        for (j, sij) in sij_all.chunks_mut(samples).enumerate() {
            for e in rows.clone() {
                let qi = &q[e * n + i * samples..][..samples];
                let kj = &k[e * n + j * samples..][..samples];
                for ((x, &a), &b) in sij.iter_mut().zip(qi).zip(kj) {
                    *x += a * b;
                }
            }
        }
    }
    // Softmax over the keys, per query and sample.
    for query in scores.chunks_mut(tokens * samples) {
        let mut max: Vec<T> = query[..samples].to_vec();
        for key in query.chunks(samples).skip(1) {
            for (m, &x) in max.iter_mut().zip(key) {
                // An unconditional store, as in `relu`: a select per vector, no branch.
                *m = if x > *m { x } else { *m };
            }
        }
        let mut sum = vec![T::default(); samples];
        for key in query.chunks_mut(samples) {
            for ((x, &m), s) in key.iter_mut().zip(&max).zip(sum.iter_mut()) {
                *x = ((*x - m) * scale).exp();
                *s += *x;
            }
        }
        let inv: Vec<T> = sum.iter().map(|&s| T::of(1.0) / s).collect();
        for key in query.chunks_mut(samples) {
            key.iter_mut().zip(&inv).for_each(|(x, &i)| *x = *x * i);
        }
    }
    for e in rows {
        let ve = &v[e * n..][..n];
        let oe = &mut out[(e - h * dh) * n..][..n];
        for (i, oi) in oe.chunks_mut(samples).enumerate() {
            for (j, vj) in ve.chunks(samples).enumerate() {
                let p = &scores[(i * tokens + j) * samples..][..samples];
                for ((o, &pj), &x) in oi.iter_mut().zip(p).zip(vj) {
                    *o += pj * x;
                }
            }
        }
    }
}

/// [`attention`] of one sample whose `q`, `k`, `v` are `d × tokens`: per head, the scores by
/// outer products over the head's rows, a softmax per query, each output row as dot products.
#[inline(always)]
fn attention_of_one<T: Real>(t: &TransformerArch, q: &[T], k: &[T], v: &[T]) -> Vec<T> {
    let (tokens, dh) = (t.tokens(), t.head_dim());
    let scale = T::of(1.0 / (dh as f64).sqrt());
    let mut out = vec![T::default(); q.len()];
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
    out
}
