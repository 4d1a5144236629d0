//! The little dense linear algebra OBS needs, in `f64` on small symmetric positive definite
//! blocks (B ≤ a few hundred): Cholesky factorisation, inverse and solve.

/// Why a factorisation failed: the matrix is not positive definite (pivot index and value).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NotPositiveDefinite {
    pub pivot: usize,
    pub value: f64,
}

/// Lower Cholesky factor `L` (row-major `n × n`, upper part zero) of an SPD matrix.
pub(crate) fn cholesky(a: &[f64], n: usize) -> Result<Vec<f64>, NotPositiveDefinite> {
    let mut l = vec![0f64; n * n];
    for i in 0..n {
        for j in 0..=i {
            let dot: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
            let v = a[i * n + j] - dot;
            if i == j {
                if !(v > 0.0 && v.is_finite()) {
                    return Err(NotPositiveDefinite { pivot: i, value: v });
                }
                l[i * n + i] = v.sqrt();
            } else {
                l[i * n + j] = v / l[j * n + j];
            }
        }
    }
    Ok(l)
}

/// Solves `A x = b` given the Cholesky factor `L` of `A`.
pub(crate) fn cholesky_solve(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut y = b.to_vec();
    for i in 0..n {
        let s: f64 = (0..i).map(|k| l[i * n + k] * y[k]).sum();
        y[i] = (y[i] - s) / l[i * n + i];
    }
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|k| l[k * n + i] * y[k]).sum();
        y[i] = (y[i] - s) / l[i * n + i];
    }
    y
}

/// The inverse of an SPD matrix (row-major `n × n`), column by column from its Cholesky factor.
pub(crate) fn spd_inverse(a: &[f64], n: usize) -> Result<Vec<f64>, NotPositiveDefinite> {
    let l = cholesky(a, n)?;
    let mut inv = vec![0f64; n * n];
    let mut e = vec![0f64; n];
    for j in 0..n {
        e.iter_mut().for_each(|v| *v = 0.0);
        e[j] = 1.0;
        for (i, v) in cholesky_solve(&l, n, &e).into_iter().enumerate() {
            inv[i * n + j] = v;
        }
    }
    Ok(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_times_matrix_is_identity() {
        // A = M Mᵀ + I for an arbitrary M: SPD.
        let n = 5;
        let m: Vec<f64> = (0..n * n)
            .map(|i| ((i * 7 % 11) as f64 - 5.0) / 3.0)
            .collect();
        let mut a = vec![0f64; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = (0..n).map(|k| m[i * n + k] * m[j * n + k]).sum::<f64>()
                    + (i == j) as u8 as f64;
            }
        }
        let inv = spd_inverse(&a, n).unwrap();
        for i in 0..n {
            for j in 0..n {
                let p: f64 = (0..n).map(|k| a[i * n + k] * inv[k * n + j]).sum();
                assert!((p - (i == j) as u8 as f64).abs() < 1e-10, "({i},{j}) = {p}");
            }
        }
        assert!(cholesky(&[1.0, 2.0, 2.0, 1.0], 2).is_err());
    }
}
