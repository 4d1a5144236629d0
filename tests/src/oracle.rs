//! Independent computations the end-to-end tests compare the engine's results with.

use kernels::Pattern;

/// The retained L1 `‖W ⊙ mask‖₁ / ‖W‖₁` that magnitude pruning to `p` keeps by the rules
/// `kernels::build_mask` documents, computed directly from |w| (V:2:M by trying every 4 of each
/// block's M columns).
pub fn retained_l1(w: &[f32], rows: usize, cols: usize, p: &Pattern) -> f64 {
    let a: Vec<f64> = w.iter().map(|x| x.abs() as f64).collect();
    let total: f64 = a.iter().sum();
    let kept = match *p {
        Pattern::Unstructured { sparsity } => {
            let mut s = a.clone();
            s.sort_by(|x, y| y.total_cmp(x));
            let keep = ((1.0 - sparsity) * s.len() as f64).round() as usize;
            s[..keep].iter().sum()
        }
        Pattern::Nm { n, m } => a
            .chunks(m)
            .map(|g| {
                let mut g = g.to_vec();
                g.sort_by(|x, y| y.total_cmp(x));
                g[..n].iter().sum::<f64>()
            })
            .sum(),
        Pattern::Vnm { v, m } => {
            let mut kept = 0.0;
            for r0 in (0..rows).step_by(v) {
                for c0 in (0..cols).step_by(m) {
                    let mut best = 0f64;
                    // Every 4 of the block's M columns; each row keeps its best 2 of them.
                    for set in 0u32..(1 << m) {
                        if set.count_ones() != 4 {
                            continue;
                        }
                        let chosen: Vec<usize> = (0..m).filter(|&c| set >> c & 1 == 1).collect();
                        let value: f64 = (r0..r0 + v)
                            .map(|r| {
                                let mut x: Vec<f64> =
                                    chosen.iter().map(|&c| a[r * cols + c0 + c]).collect();
                                x.sort_by(|p, q| q.total_cmp(p));
                                x[0] + x[1]
                            })
                            .sum();
                        best = best.max(value);
                    }
                    kept += best;
                }
            }
            kept
        }
        Pattern::Vector { v, sparsity } => {
            let mut vectors: Vec<(f64, f64)> = vec![];
            for r0 in (0..rows).step_by(v) {
                for c in 0..cols {
                    let x: Vec<f64> = (r0..r0 + v).map(|r| a[r * cols + c]).collect();
                    let l2 = x.iter().map(|y| y * y).sum::<f64>().sqrt();
                    vectors.push((l2, x.iter().sum()));
                }
            }
            vectors.sort_by(|x, y| y.0.total_cmp(&x.0));
            let keep = ((1.0 - sparsity) * vectors.len() as f64).round() as usize;
            vectors[..keep].iter().map(|x| x.1).sum()
        }
        Pattern::Dense => total,
    };
    kept / total
}
