//! Mask builder tests: counts, optimality against brute force, tie and NaN rules.

use super::*;
use crate::synthetic::random_values;

fn abs_scores(len: usize, seed: u64) -> Vec<f32> {
    random_values(len, seed).iter().map(|x| x.abs()).collect()
}

#[test]
fn unstructured_keeps_the_top_scores() {
    let (rows, cols) = (7, 13);
    let s = abs_scores(rows * cols, 1);
    let m = build_mask(&Pattern::Unstructured { sparsity: 0.75 }, &s, rows, cols).unwrap();
    assert_eq!(m.count(), (0.25f64 * 91.0).round() as usize);
    let min_kept = (0..91)
        .filter(|&i| m.as_slice()[i])
        .map(|i| s[i])
        .fold(f32::MAX, f32::min);
    let max_dropped = (0..91)
        .filter(|&i| !m.as_slice()[i])
        .map(|i| s[i])
        .fold(f32::MIN, f32::max);
    assert!(min_kept >= max_dropped);
}

#[test]
fn nm_keeps_n_per_group_and_the_partial_rule() {
    let (rows, cols) = (5, 19); // groups of 8: 8, 8, 3
    let s = abs_scores(rows * cols, 2);
    let m = build_mask(&Pattern::Nm { n: 2, m: 8 }, &s, rows, cols).unwrap();
    for r in 0..rows {
        for (g0, len, want) in [(0, 8, 2), (8, 8, 2), (16, 3, 1)] {
            let kept: Vec<usize> = (g0..g0 + len).filter(|&c| m.keep(r, c)).collect();
            assert_eq!(kept.len(), want, "row {r} group at {g0}");
            let best = (g0..g0 + len)
                .map(|c| s[r * cols + c])
                .fold(f32::MIN, f32::max);
            assert!(kept.iter().any(|&c| s[r * cols + c] == best));
        }
    }
}

#[test]
fn nan_scores_rank_last_and_ties_prefer_lower_index() {
    let s = [f32::NAN, 1.0, 1.0, 0.5];
    let m = build_mask(&Pattern::Nm { n: 2, m: 4 }, &s, 1, 4).unwrap();
    assert_eq!(m.as_slice(), &[false, true, true, false]);
    let t = [0.5, 0.5, 0.5, 0.5];
    let m = build_mask(&Pattern::Nm { n: 1, m: 4 }, &t, 1, 4).unwrap();
    assert_eq!(m.as_slice(), &[true, false, false, false]);
}

/// Brute force over column subsets (bitmasks), independent of the builder's enumeration.
fn brute_best_kept(s: &[f32], v: usize, m: usize) -> f64 {
    let mut best = f64::MIN;
    for bits in 0u32..(1 << m) {
        if bits.count_ones() != 4 {
            continue;
        }
        let total: f64 = (0..v)
            .map(|r| {
                let mut xs: Vec<f32> = (0..m)
                    .filter(|c| bits >> c & 1 == 1)
                    .map(|c| s[r * m + c])
                    .collect();
                xs.sort_by(|a, b| b.total_cmp(a));
                f64::from(xs[0]) + f64::from(xs[1])
            })
            .sum();
        best = best.max(total);
    }
    best
}

#[test]
fn vnm_choice_is_exactly_optimal() {
    for seed in 0..20 {
        let (v, m) = (3, 7);
        let s = abs_scores(v * m, 100 + seed);
        let mask = build_mask(&Pattern::Vnm { v, m }, &s, v, m).unwrap();
        let kept: f64 = (0..v * m)
            .filter(|&i| mask.as_slice()[i])
            .map(|i| f64::from(s[i]))
            .sum();
        assert!(
            (kept - brute_best_kept(&s, v, m)).abs() < 1e-9,
            "seed {seed}"
        );
        let cols: Vec<usize> = (0..m)
            .filter(|&c| (0..v).any(|r| mask.keep(r, c)))
            .collect();
        assert!(cols.len() <= 4);
        for r in 0..v {
            assert_eq!((0..m).filter(|&c| mask.keep(r, c)).count(), 2);
        }
    }
}

#[test]
fn vnm_partial_last_group_and_shape_errors() {
    // cols = 10 with M = 8: the last group has 2 columns, each row keeps both.
    let s = abs_scores(4 * 10, 5);
    let mask = build_mask(&Pattern::Vnm { v: 2, m: 8 }, &s, 4, 10).unwrap();
    for r in 0..4 {
        assert!(mask.keep(r, 8) && mask.keep(r, 9));
        assert_eq!((0..8).filter(|&c| mask.keep(r, c)).count(), 2);
    }
    let err = build_mask(&Pattern::Vnm { v: 3, m: 8 }, &s, 4, 10).unwrap_err();
    assert!(
        err.to_string().contains("V = 3") && err.to_string().contains("4 rows"),
        "{err}"
    );
}

#[test]
fn vector_keeps_whole_vectors_by_norm() {
    let (rows, cols, v) = (8, 9, 4);
    let s = abs_scores(rows * cols, 9);
    let m = build_mask(&Pattern::Vector { v, sparsity: 0.5 }, &s, rows, cols).unwrap();
    let vectors = rows / v * cols;
    assert_eq!(m.count(), v * (0.5f64 * vectors as f64).round() as usize);
    let norm = |b: usize, c: usize| {
        (0..v)
            .map(|i| s[(b * v + i) * cols + c].powi(2))
            .sum::<f32>()
    };
    let (mut kept_min, mut dropped_max) = (f32::MAX, f32::MIN);
    for b in 0..rows / v {
        for c in 0..cols {
            let k = (0..v).filter(|&i| m.keep(b * v + i, c)).count();
            assert!(k == 0 || k == v);
            if k == v {
                kept_min = kept_min.min(norm(b, c));
            } else {
                dropped_max = dropped_max.max(norm(b, c));
            }
        }
    }
    assert!(kept_min >= dropped_max);
}

#[test]
fn bad_inputs_are_errors() {
    assert!(build_mask(&Pattern::Nm { n: 2, m: 2 }, &[0.0; 4], 2, 2).is_err());
    assert!(build_mask(&Pattern::Unstructured { sparsity: 1.5 }, &[0.0; 4], 2, 2).is_err());
    // Sparsity 1 keeps nothing (a layer's measured sparsity can be 1).
    let none = build_mask(&Pattern::Unstructured { sparsity: 1.0 }, &[0.0; 4], 2, 2).unwrap();
    assert_eq!(none.density(), 0.0);
    assert!(build_mask(&Pattern::Dense, &[0.0; 3], 2, 2).is_err());
    assert!(build_mask(&Pattern::Vnm { v: 1, m: 3 }, &[0.0; 4], 2, 2).is_err());
}

/// The nested steps towards V:2:M: its own step (k = 4, 2 a row) is V:2:M's mask; each step of
/// fewer columns, then fewer a row, keeps a subset of the step before when removed weights score
/// 0, so the last step keeps only weights every step kept. Stepping through V:2:M at a smaller
/// M (what OBS and gradual pruning did) does not: rows then keep weights already removed.
#[test]
fn nested_vnm_steps_keep_subsets_and_end_on_vnm() {
    let (rows, cols, v) = (32, 45, 8); // groups of 16: 16, 16, 13
    let s = abs_scores(rows * cols, 9);
    for m in [8, 16] {
        let own = build_vnm_nested(&s, rows, cols, (v, m), (4, 2)).unwrap();
        assert_eq!(
            own,
            build_mask(&Pattern::Vnm { v, m }, &s, rows, cols).unwrap()
        );
    }
    let zeroed = |s: &[f32], m: &Mask| -> Vec<f32> {
        s.iter()
            .zip(m.as_slice())
            .map(|(&x, &k)| if k { x } else { 0.0 })
            .collect()
    };
    let mut scores = s.clone();
    let mut last: Option<Mask> = None;
    for (k, per_row) in [(8, 8), (4, 4), (4, 3), (4, 2)] {
        let mask = build_vnm_nested(&scores, rows, cols, (v, 16), (k, per_row)).unwrap();
        if let Some(prev) = &last {
            let outside = (0..rows * cols)
                .filter(|&i| mask.as_slice()[i] && !prev.as_slice()[i])
                .count();
            assert_eq!(outside, 0, "step {k}:{per_row} keeps what the last removed");
        }
        scores = zeroed(&scores, &mask);
        last = Some(mask);
    }
    let end = last.unwrap();
    assert!(end
        .as_slice()
        .iter()
        .zip(&scores)
        .all(|(&k, &x)| !k || x > 0.0));
    // Through V:2:8 instead, V:2:16 keeps slots on removed weights.
    let through = zeroed(
        &s,
        &build_mask(&Pattern::Vnm { v, m: 8 }, &s, rows, cols).unwrap(),
    );
    let vnm16 = build_mask(&Pattern::Vnm { v, m: 16 }, &through, rows, cols).unwrap();
    let wasted = (0..rows * cols)
        .filter(|&i| vnm16.as_slice()[i] && through[i] == 0.0)
        .count();
    assert!(wasted > 0);
    for (k, per_row) in [(3, 2), (17, 2), (4, 1), (4, 5)] {
        assert!(build_vnm_nested(&s, rows, cols, (v, 16), (k, per_row)).is_err());
    }
    assert!(build_vnm_nested(&s, rows, cols, (5, 16), (4, 2)).is_err());
}
