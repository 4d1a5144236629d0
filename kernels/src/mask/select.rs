//! Top-k selection for the unstructured, N:M and vector-wise mask builders.

use std::cmp::Ordering;

/// A score's rank key: NaN ranks below every number.
pub(crate) fn key(s: f32) -> f32 {
    if s.is_nan() {
        f32::NEG_INFINITY
    } else {
        s
    }
}

/// Orders candidates best first: higher score, then lower index.
pub(crate) fn better(a: (f32, usize), b: (f32, usize)) -> Ordering {
    key(b.0).total_cmp(&key(a.0)).then(a.1.cmp(&b.1))
}

/// Indices of the `k` best of `scores` (by [`better`]), in ascending index order.
pub(crate) fn top_k(scores: &[f32], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..scores.len()).collect();
    let k = k.min(idx.len());
    if k < idx.len() && k > 0 {
        idx.select_nth_unstable_by(k - 1, |&a, &b| better((scores[a], a), (scores[b], b)));
    }
    idx.truncate(k);
    idx.sort_unstable();
    idx
}

/// Global top-k over the whole matrix.
pub(crate) fn unstructured(scores: &[f32], density: f64) -> Vec<bool> {
    let k = (density * scores.len() as f64).round() as usize;
    let mut keep = vec![false; scores.len()];
    for i in top_k(scores, k) {
        keep[i] = true;
    }
    keep
}

/// How many of a group of `len` columns N:M keeps: N for a full group, ⌈N·len/M⌉ for a last
/// partial group.
pub(crate) fn nm_keep(n: usize, m: usize, len: usize) -> usize {
    if len == m {
        n
    } else {
        (n * len).div_ceil(m).min(len)
    }
}

/// Top-N per group of M consecutive columns in each row.
pub(crate) fn nm(scores: &[f32], rows: usize, cols: usize, n: usize, m: usize) -> Vec<bool> {
    let mut keep = vec![false; rows * cols];
    for r in 0..rows {
        for g0 in (0..cols).step_by(m) {
            let len = m.min(cols - g0);
            let base = r * cols + g0;
            for i in top_k(&scores[base..base + len], nm_keep(n, m, len)) {
                keep[base + i] = true;
            }
        }
    }
    keep
}

/// Whole column-vectors of `v` rows, ranked by the L2 norm of their scores.
pub(crate) fn vector(
    scores: &[f32],
    rows: usize,
    cols: usize,
    v: usize,
    density: f64,
) -> Vec<bool> {
    let blocks = rows / v;
    let norms: Vec<f32> = (0..blocks * cols)
        .map(|i| {
            let (b, c) = (i / cols, i % cols);
            let sq: f64 = (0..v)
                .map(|r| f64::from(scores[(b * v + r) * cols + c]).powi(2))
                .sum();
            sq.sqrt() as f32
        })
        .collect();
    let chosen = unstructured(&norms, density);
    let mut keep = vec![false; rows * cols];
    for (i, _) in chosen.iter().enumerate().filter(|(_, &k)| k) {
        let (b, c) = (i / cols, i % cols);
        for r in 0..v {
            keep[(b * v + r) * cols + c] = true;
        }
    }
    keep
}
