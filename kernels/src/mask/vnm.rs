//! The exact V:2:M mask builder: per V×M block, the quadruple of columns (over all C(M,4)) that
//! keeps the most score once each row takes its best 2 of the 4; then each row's best 2.
//!
//! And the steps of the nested structure towards it ([`vnm_nested`]): per block, `k` columns
//! kept (the `k` of the largest summed score, or at `k = 4` with fewer a row the quadruple as
//! above, each row counting its best `per_row`), each row keeping its best `per_row` of them. V:2:M is `k = 4, per_row = 2`; a step with fewer columns
//! or fewer per row keeps a subset of a step with more, so pruning along them never spends a
//! kept slot on a weight an earlier step removed (which scores 0).

use super::select::{key, top_k};

/// A score as a finite f64 for summing: NaN and −∞ become the lowest f32, +∞ the highest, so
/// a sum is never NaN and NaN still ranks last.
fn finite(s: f32) -> f64 {
    f64::from(key(s).clamp(f32::MIN, f32::MAX))
}

/// Sum of the best `n` of four scores (`n` ≥ 2; the best two as [`best_two`] adds them).
fn best_n(s: [f64; 4], n: usize) -> f64 {
    if n == 2 {
        return best_two(s);
    }
    let mut sorted = s;
    sorted.sort_by(|a, b| b.total_cmp(a));
    sorted[..n.min(4)].iter().sum()
}

/// Sum of the best two of four scores.
fn best_two(s: [f64; 4]) -> f64 {
    let (mut hi, mut lo) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    for x in s {
        if x > hi {
            lo = hi;
            hi = x;
        } else if x > lo {
            lo = x;
        }
    }
    hi + lo
}

/// The best quadruple of columns `0..len` (len ≥ 4) of a block whose rows are `rows_scores`
/// (each `len` finite scores), each row counting its best `per_row` of the four. Ties keep the
/// lexicographically first quadruple.
fn best_quad(rows_scores: &[Vec<f64>], len: usize, per_row: usize) -> [usize; 4] {
    let mut best = [0, 1, 2, 3];
    let mut best_val = f64::NEG_INFINITY;
    for a in 0..len {
        for b in a + 1..len {
            for c in b + 1..len {
                for d in c + 1..len {
                    let val: f64 = rows_scores
                        .iter()
                        .map(|s| best_n([s[a], s[b], s[c], s[d]], per_row))
                        .sum();
                    if val > best_val {
                        best_val = val;
                        best = [a, b, c, d];
                    }
                }
            }
        }
    }
    best
}

/// The V:2:M keep-mask (rows must be a multiple of `v`, checked by the caller).
pub(crate) fn vnm(scores: &[f32], rows: usize, cols: usize, v: usize, m: usize) -> Vec<bool> {
    vnm_nested(scores, rows, cols, v, m, 4, 2)
}

/// The keep-mask of a nested step: per V × M block, `k` columns (4 ≤ `k` ≤ M; a last group
/// narrower than `k` keeps all its columns), each row keeping its best `per_row` of them
/// (2 ≤ `per_row` ≤ `k`). Rows must be a multiple of `v`, checked by the caller.
pub(crate) fn vnm_nested(
    scores: &[f32],
    rows: usize,
    cols: usize,
    v: usize,
    m: usize,
    k: usize,
    per_row: usize,
) -> Vec<bool> {
    let mut keep = vec![false; rows * cols];
    for b in 0..rows / v {
        for g0 in (0..cols).step_by(m) {
            let len = m.min(cols - g0);
            let row_slices: Vec<&[f32]> = (0..v)
                .map(|i| {
                    let base = (b * v + i) * cols + g0;
                    &scores[base..base + len]
                })
                .collect();
            let finite_rows = || -> Vec<Vec<f64>> {
                row_slices
                    .iter()
                    .map(|s| s.iter().map(|&x| finite(x)).collect())
                    .collect()
            };
            let chosen: Vec<usize> = if len <= k {
                (0..len).collect()
            } else if k == 4 && per_row < 4 {
                best_quad(&finite_rows(), len, per_row).to_vec()
            } else {
                // The `k` columns of the largest score summed over the block's rows (ties: the
                // first), in column order: what each row keeping all `k` keeps most of.
                let rows_f = finite_rows();
                let sums: Vec<f64> = (0..len)
                    .map(|c| rows_f.iter().map(|r| r[c]).sum())
                    .collect();
                let mut order: Vec<usize> = (0..len).collect();
                order.sort_by(|&a, &b| sums[b].total_cmp(&sums[a]).then(a.cmp(&b)));
                order.truncate(k);
                order.sort_unstable();
                order
            };
            for (i, s) in row_slices.iter().enumerate() {
                let cand: Vec<f32> = chosen.iter().map(|&q| s[q]).collect();
                for j in top_k(&cand, per_row.min(cand.len())) {
                    keep[(b * v + i) * cols + g0 + chosen[j]] = true;
                }
            }
        }
    }
    keep
}
