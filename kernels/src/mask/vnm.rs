//! The exact V:2:M mask builder: per V×M block, the quadruple of columns (over all C(M,4)) that
//! keeps the most score once each row takes its best 2 of the 4; then each row's best 2.

use super::select::{key, top_k};

/// A score as a finite f64 for summing: NaN and −∞ become the lowest f32, +∞ the highest, so
/// a sum is never NaN and NaN still ranks last.
fn finite(s: f32) -> f64 {
    f64::from(key(s).clamp(f32::MIN, f32::MAX))
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
/// (each `len` finite scores). Ties keep the lexicographically first quadruple.
fn best_quad(rows_scores: &[Vec<f64>], len: usize) -> [usize; 4] {
    let mut best = [0, 1, 2, 3];
    let mut best_val = f64::NEG_INFINITY;
    for a in 0..len {
        for b in a + 1..len {
            for c in b + 1..len {
                for d in c + 1..len {
                    let val: f64 = rows_scores
                        .iter()
                        .map(|s| best_two([s[a], s[b], s[c], s[d]]))
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
            let quad: Vec<usize> = if len <= 4 {
                (0..len).collect()
            } else {
                let finite_rows: Vec<Vec<f64>> = row_slices
                    .iter()
                    .map(|s| s.iter().map(|&x| finite(x)).collect())
                    .collect();
                best_quad(&finite_rows, len).to_vec()
            };
            for (i, s) in row_slices.iter().enumerate() {
                let cand: Vec<f32> = quad.iter().map(|&q| s[q]).collect();
                for j in top_k(&cand, 2) {
                    keep[(b * v + i) * cols + g0 + quad[j]] = true;
                }
            }
        }
    }
    keep
}
