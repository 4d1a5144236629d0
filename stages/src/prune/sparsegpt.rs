//! SparseGPT (Frantar & Alistarh, ICML'23) on one layer: the OBS solve on the Hessian of its
//! calibration inputs, columns in order, with lazy batched updates.
//!
//! With `H = 2PᵀP/tokens + λI` (λ = `damp` · mean diagonal; inputs that are always zero get a
//! diagonal of 1 first) and `U` the upper Cholesky factor of `H⁻¹` (`H⁻¹ = UᵀU`), column `i` of
//! every row is frozen in turn: a pruned weight `w` is removed with `err = w / Uᵢᵢ`, and the
//! columns to its right absorb `−err · Uᵢⱼ`. That is the exact OBS update of the weights not yet
//! frozen, for all rows at once (the rows share `H`). Updates inside a block of `block` columns
//! are applied column by column; the block's effect on the columns after it, in one product.
//!
//! The mask is chosen during the pass from the saliency `w²/Uᵢᵢ²` of the current weights: for
//! N:M and V:N:M at the start of each group of M columns (so the block is a multiple of M), for
//! unstructured and vector-wise at the start of each block.

use faer::linalg::matmul::matmul;
use faer::linalg::solvers::DenseSolveCore;
use faer::{Accum, Mat, Par, Side};

use super::calibrate::LayerInputs;

/// The upper Cholesky factor `U` of the damped `H⁻¹` of a layer's inputs, or why there is
/// none (the damped Hessian is not positive definite).
pub(crate) fn inverse_factor(x: &LayerInputs, damp: f64) -> Result<Mat<f64>, String> {
    let (tokens, cols) = (x.tokens, x.cols);
    let p = Mat::<f64>::from_fn(tokens, cols, |t, c| f64::from(x.p[t * cols + c]));
    let mut h = Mat::<f64>::zeros(cols, cols);
    let scale = 2.0 / tokens.max(1) as f64;
    matmul(
        h.as_mut(),
        Accum::Replace,
        p.transpose(),
        p.as_ref(),
        scale,
        Par::Seq,
    );
    for i in 0..cols {
        if h[(i, i)] == 0.0 {
            h[(i, i)] = 1.0;
        }
    }
    let mean = (0..cols).map(|i| h[(i, i)]).sum::<f64>() / cols.max(1) as f64;
    let lambda = damp * mean;
    for i in 0..cols {
        h[(i, i)] += lambda;
    }
    let not_pd = |what: &str| {
        format!("the Hessian of its {tokens} calibration inputs is not positive definite after dampening λ = {lambda:e} ({what}); raise the dampening")
    };
    let hinv = h.llt(Side::Lower).map_err(|_| not_pd("H"))?.inverse();
    let l = hinv.llt(Side::Lower).map_err(|_| not_pd("H⁻¹"))?;
    Ok(l.L().transpose().to_owned())
}

/// A mask choice: the keep flags (row-major) of `rows × len` saliencies (row-major).
pub(crate) type Choose<'a> = &'a dyn Fn(&[f64], usize, usize) -> Result<Vec<bool>, String>;

/// How the mask of a pattern is chosen during the pass: every `step` columns (within a block),
/// `choose` gets the saliencies of the next `len` columns.
pub(crate) struct Selection<'a> {
    /// Columns per choice (M for N:M and V:N:M, else the block).
    pub(crate) step: usize,
    /// The choice.
    pub(crate) choose: Choose<'a>,
}

/// Prunes `w` (row-major `rows × cols`) in place with `u` from [`inverse_factor`]; returns the
/// row-major keep flags. `block` is rounded down to a multiple of `select.step` (at least one
/// step) when the step is smaller than the block.
pub(crate) fn prune(
    w: &mut [f32],
    rows: usize,
    cols: usize,
    u: &Mat<f64>,
    block: usize,
    select: &Selection,
) -> Result<Vec<bool>, String> {
    let step = select.step.max(1);
    let block = if step < block {
        (block / step).max(1) * step
    } else {
        step
    };
    let mut wm = Mat::<f64>::from_fn(rows, cols, |r, c| f64::from(w[r * cols + c]));
    let mut keep = vec![true; rows * cols];
    let d: Vec<f64> = (0..cols).map(|i| u[(i, i)]).collect();
    let mut i1 = 0;
    while i1 < cols {
        let i2 = (i1 + block).min(cols);
        let count = i2 - i1;
        // The block's columns, row-major, and its rows of U, row-major.
        let mut w1: Vec<f64> = (0..rows * count)
            .map(|k| wm[(k / count, i1 + k % count)])
            .collect();
        let u1: Vec<f64> = (0..count * count)
            .map(|k| u[(i1 + k / count, i1 + k % count)])
            .collect();
        let mut err = Mat::<f64>::zeros(rows, count);
        for i in 0..count {
            if i % step == 0 {
                let len = step.min(count - i);
                let sal: Vec<f64> = (0..rows * len)
                    .map(|k| {
                        let (r, j) = (k / len, i + k % len);
                        (w1[r * count + j] / d[i1 + j]).powi(2)
                    })
                    .collect();
                let chosen = (select.choose)(&sal, rows, len)?;
                for r in 0..rows {
                    for j in 0..len {
                        keep[r * cols + i1 + i + j] = chosen[r * len + j];
                    }
                }
            }
            let urow = &u1[i * count..(i + 1) * count];
            for r in 0..rows {
                let row = &mut w1[r * count..(r + 1) * count];
                if keep[r * cols + i1 + i] {
                    continue;
                }
                let e = row[i] / urow[i];
                row[i] = 0.0;
                for (x, &uij) in row[i + 1..].iter_mut().zip(&urow[i + 1..]) {
                    *x -= e * uij;
                }
                err[(r, i)] = e;
            }
        }
        for k in 0..rows * count {
            wm[(k / count, i1 + k % count)] = w1[k];
        }
        if i2 < cols {
            let rest = cols - i2;
            matmul(
                wm.as_mut().submatrix_mut(0, i2, rows, rest),
                Accum::Add,
                err.as_ref(),
                u.as_ref().submatrix(i1, i2, count, rest),
                -1.0,
                Par::Seq,
            );
        }
        i1 = i2;
    }
    for (k, x) in w.iter_mut().enumerate() {
        let v = wm[(k / cols, k % cols)];
        if !v.is_finite() {
            return Err("the update produced a non-finite weight".into());
        }
        *x = if keep[k] { v as f32 } else { 0.0 };
    }
    Ok(keep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn inputs(tokens: usize, cols: usize, seed: u64) -> LayerInputs {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        LayerInputs {
            p: (0..tokens * cols)
                .map(|_| rng.random_range(-1.0..1.0))
                .collect(),
            tokens,
            cols,
        }
    }

    /// The damped Hessian of [`inverse_factor`], densely.
    fn hessian(x: &LayerInputs, damp: f64) -> Vec<f64> {
        let n = x.cols;
        let mut h = vec![0f64; n * n];
        for t in 0..x.tokens {
            for i in 0..n {
                for j in 0..n {
                    h[i * n + j] += 2.0 * f64::from(x.p[t * n + i]) * f64::from(x.p[t * n + j])
                        / x.tokens as f64;
                }
            }
        }
        let mean = (0..n).map(|i| h[i * n + i]).sum::<f64>() / n as f64;
        for i in 0..n {
            h[i * n + i] += damp * mean;
        }
        h
    }

    /// The oracle: for one row, freeze columns in order; a pruned weight is removed with the
    /// exact OBS update of the not-yet-frozen weights, `δ = −wᵢ/[H_F⁻¹]ᵢᵢ · [H_F⁻¹]ᵢ,·`,
    /// with `H_F` the Hessian restricted to them, inverted afresh at every column.
    fn obs_column_by_column(w: &[f64], h: &[f64], keep: &[bool]) -> Vec<f64> {
        let n = w.len();
        let mut w = w.to_vec();
        for i in 0..n {
            if keep[i] {
                continue;
            }
            let f: Vec<usize> = (i..n).collect();
            let m = f.len();
            let sub: Vec<f64> = (0..m * m).map(|k| h[f[k / m] * n + f[k % m]]).collect();
            let inv = super::super::linalg::spd_inverse(&sub, m).unwrap();
            let wi = w[i];
            for (a, &j) in f.iter().enumerate() {
                w[j] -= wi / inv[0] * inv[a];
            }
            w[i] = 0.0;
        }
        w
    }

    #[test]
    fn the_lazy_pass_is_the_exact_column_by_column_obs_solve() {
        let (rows, cols, damp) = (5, 13, 0.05);
        let x = inputs(40, cols, 1);
        let u = inverse_factor(&x, damp).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let w0: Vec<f32> = (0..rows * cols)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        // A fixed mask, so that the oracle and the pass remove the same weights.
        let fixed: Vec<bool> = (0..rows * cols).map(|k| (k * 7) % 3 != 0).collect();
        for block in [1, 4, 5, 13, 64] {
            let mut w = w0.clone();
            // Choose the fixed mask, step by step.
            let col = std::cell::Cell::new(0usize);
            let pick = |_: &[f64], r: usize, len: usize| -> Result<Vec<bool>, String> {
                let c0 = col.get();
                col.set(c0 + len);
                Ok((0..r * len)
                    .map(|k| fixed[(k / len) * cols + c0 + k % len])
                    .collect())
            };
            let keep = prune(
                &mut w,
                rows,
                cols,
                &u,
                block,
                &Selection {
                    step: block,
                    choose: &pick,
                },
            )
            .unwrap();
            assert_eq!(keep, fixed);
            let h = hessian(&x, damp);
            for r in 0..rows {
                let row: Vec<f64> = w0[r * cols..(r + 1) * cols]
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect();
                let want = obs_column_by_column(&row, &h, &fixed[r * cols..(r + 1) * cols]);
                for c in 0..cols {
                    let got = f64::from(w[r * cols + c]);
                    assert!(
                        (got - want[c]).abs() < 1e-5 * (1.0 + want[c].abs()),
                        "block {block}, ({r}, {c}): {got} vs {}",
                        want[c]
                    );
                    if !fixed[r * cols + c] {
                        assert_eq!(
                            w[r * cols + c].to_bits(),
                            0,
                            "a pruned weight is exactly +0.0"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_singular_hessian_is_an_error_not_nan() {
        // Two identical inputs and no dampening: H is singular.
        let x = LayerInputs {
            p: vec![1.0, 1.0, 2.0, 2.0, -1.0, -1.0],
            tokens: 3,
            cols: 2,
        };
        let e = inverse_factor(&x, 0.0).unwrap_err();
        assert!(e.contains("not positive definite"), "{e}");
        assert!(inverse_factor(&x, 0.01).is_ok());
    }
}
