//! Multi-head self-attention of the forward pass ([`super::graph`]), on feature-major
//! activations whose columns are token-major (column `t · samples + s`). `#[inline(always)]`
//! like the rest of the graph, so that it runs at the kernels' ISA; the batched path is the
//! kernels' own (`kernels::attention_head`, on explicit vectors).

use std::sync::Mutex;

use kernels::HostParts;

use super::encoder_ops::slot;
use super::graph::Real;
use crate::model::TransformerArch;
use crate::StageError;

/// Multi-head self-attention on feature-major `q`, `k`, `v` (`d × (tokens·s)`, columns
/// token-major: column `i · samples + s` is token `i` of sample `s`), into `out` in the same
/// layout (as long as `q`, every value overwritten). With [`BATCHED`] samples or more, in f32,
/// each head runs in the kernels' explicit vectors (`kernels::attention_head`: the lanes of
/// every vector are samples, contiguous in this layout), the heads on up to `threads` of the
/// kernels' threads; otherwise (and in the f64 reference pass) each sample runs alone over
/// its tokens.
#[inline(always)]
pub(super) fn attention<T: Real>(
    t: &TransformerArch,
    (q, k, v): (&[T], &[T], &[T]),
    samples: usize,
    mut out: Vec<T>,
    threads: usize,
) -> Result<Vec<T>, StageError> {
    let tokens = t.tokens();
    let n = samples * tokens;
    debug_assert_eq!(out.len(), q.len());
    if samples == 1 {
        attention_of_one(t, (q, k, v), &mut out);
        return Ok(out);
    }
    if samples >= BATCHED {
        if let (Some(q), Some(k), Some(v), Some(o)) =
            (T::f32s(q), T::f32s(k), T::f32s(v), T::f32s_mut(&mut out))
        {
            batched(t, (q, k, v), samples, o, threads)?;
            return Ok(out);
        }
    }
    // One sample at a time, its `d × tokens` columns gathered.
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
    Ok(out)
}

/// Samples from which [`attention`] runs batched in f32: below, most lanes of a vector would
/// be empty.
const BATCHED: usize = 8;

/// [`attention`]'s batched path: head `h` into its rows of `out` as part `h` on the kernels'
/// threads.
fn batched(
    t: &TransformerArch,
    qkv: (&[f32], &[f32], &[f32]),
    samples: usize,
    out: &mut [f32],
    threads: usize,
) -> Result<(), StageError> {
    let (tokens, dh) = (t.tokens(), t.head_dim());
    let heads = Heads {
        qkv,
        shape: kernels::HeadShape {
            tokens,
            samples,
            head_dim: dh,
        },
        outs: out
            .chunks_mut((dh * tokens * samples).max(1))
            .map(|o| Mutex::new((o, Ok(()))))
            .collect(),
    };
    kernels::run_host_parts(&heads, heads.outs.len(), threads);
    for part in heads.outs {
        part.into_inner().unwrap_or_else(|e| e.into_inner()).1?;
    }
    Ok(())
}

/// [`batched`]'s parts: part `h` is head `h`, into `outs[h]` (the head's rows of the output)
/// with its result beside it.
struct Heads<'a> {
    qkv: (&'a [f32], &'a [f32], &'a [f32]),
    shape: kernels::HeadShape,
    #[allow(clippy::type_complexity)] // a part's output and its result
    outs: Vec<Mutex<(&'a mut [f32], Result<(), kernels::KernelError>)>>,
}

impl HostParts for Heads<'_> {
    fn part(&self, h: usize) {
        let mut part = slot(&self.outs[h]);
        let (out, result) = &mut *part;
        let dh = self.shape.head_dim;
        *result = kernels::attention_head(self.qkv, self.shape, h * dh..(h + 1) * dh, out);
    }
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
