//! LayerNorm over the rows of feature-major activations (each column is one token's features),
//! on the kernels' explicit vectors: the transformer's normalisation (`stages::evaluate`).
//!
//! Columns are independent, so the lanes of a vector are columns. A step takes [`STEP`]
//! vectors of columns through three passes over the rows (the mean, the variance, the output),
//! its `d` rows × `STEP · LANES` columns small enough to be read from L1 in the second and
//! third. Each column's sums run over the rows in order with separate multiplies and adds (no
//! fused multiply-add), so every ISA gives the same bits, the scalar code's included, and the
//! same as a plain loop in that order.

use std::ops::Range;

use super::host_isa::{run_vectors_at, VectorOp};
use super::simd::{load_n, store_n, Simd};
use crate::{isa, Isa, KernelError};

/// Vectors of columns per step (64 columns at AVX-512: 64 rows of them are 16 KiB).
const STEP: usize = 4;

/// LayerNorm of the columns `cols` of `x` (`d × n`, row-major, `d = out.len()`) into `out`,
/// one slice per row holding those columns: per column, `(x − mean) · (1 / √(var + eps)) · gain
/// + shift` with the row's `gain` and `shift`, the mean and the (biased) variance over the `d`
/// rows. At the kernels' ISA ([`isa`]).
pub fn layer_norm_columns(
    x: &[f32],
    n: usize,
    cols: Range<usize>,
    (gain, shift, eps): (&[f32], &[f32], f32),
    out: &mut [&mut [f32]],
) -> Result<(), KernelError> {
    layer_norm_columns_at(isa(), x, n, cols, (gain, shift, eps), out)
}

/// [`layer_norm_columns`] at `at` (a narrower ISA than [`isa`] to test the others; a wider one
/// runs at [`isa`]'s).
pub fn layer_norm_columns_at(
    at: Isa,
    x: &[f32],
    n: usize,
    cols: Range<usize>,
    (gain, shift, eps): (&[f32], &[f32], f32),
    out: &mut [&mut [f32]],
) -> Result<(), KernelError> {
    let d = out.len();
    let check = |what, expected: usize, got: usize| {
        if got < expected {
            Err(KernelError::LengthMismatch {
                what,
                expected,
                got,
            })
        } else {
            Ok(())
        }
    };
    check("layer norm columns", cols.end, n)?;
    // A product that wrapped would pass the length check and run past `x`.
    let input = d.checked_mul(n).ok_or_else(|| KernelError::InvalidFormat {
        format: "layer norm",
        reason: format!("{d} rows of {n} columns: the size overflows"),
    })?;
    check("layer norm input", input, x.len())?;
    check("layer norm gain", d, gain.len())?;
    check("layer norm shift", d, shift.len())?;
    for row in out.iter() {
        check("layer norm output row", cols.len(), row.len())?;
    }
    if cols.is_empty() || d == 0 {
        return Ok(());
    }
    let norm = Norm {
        x,
        n,
        cols,
        gain,
        shift,
        eps,
        out,
    };
    run_vectors_at(at, norm);
    Ok(())
}

/// [`layer_norm_columns`]' arguments, checked.
struct Norm<'a, 'o> {
    x: &'a [f32],
    n: usize,
    cols: Range<usize>,
    gain: &'a [f32],
    shift: &'a [f32],
    eps: f32,
    out: &'a mut [&'o mut [f32]],
}

impl VectorOp for Norm<'_, '_> {
    /// The columns, [`STEP`] vectors at a time.
    ///
    /// # Safety
    /// `S`'s ISA is available.
    #[inline(always)]
    unsafe fn run<S: Simd>(self) {
        let (l, n, d) = (S::LANES, self.n, self.out.len());
        let inv_d = (1.0 / d as f64) as f32;
        let x = self.x.as_ptr();
        // SAFETY (the block below): `S`'s ISA is available (the caller);
        // `layer_norm_columns_at` checked that `x` holds `d` rows of `n ≥ cols.end` columns
        // and each output row `cols.len()` values; a vector holds `lens[w] ≤ LANES` of them
        // and reads or writes no more.
        unsafe {
            for start in self.cols.clone().step_by(STEP * l) {
                let left = self.cols.end - start;
                let lens: [usize; STEP] =
                    std::array::from_fn(|w| left.saturating_sub(w * l).min(l));
                let mut mean = [S::zero(); STEP];
                for r in 0..d {
                    let row = x.add(r * n + start);
                    for (w, m) in mean.iter_mut().enumerate() {
                        if lens[w] > 0 {
                            *m = S::add(*m, load_n::<S>(row.add(w * l), lens[w]));
                        }
                    }
                }
                for m in &mut mean {
                    *m = S::mul(*m, S::splat(inv_d));
                }
                let mut inv = [S::zero(); STEP];
                for r in 0..d {
                    let row = x.add(r * n + start);
                    for (w, (s, &m)) in inv.iter_mut().zip(&mean).enumerate() {
                        if lens[w] > 0 {
                            let c = S::sub(load_n::<S>(row.add(w * l), lens[w]), m);
                            *s = S::add(*s, S::mul(c, c));
                        }
                    }
                }
                for s in &mut inv {
                    let var = S::add(S::mul(*s, S::splat(inv_d)), S::splat(self.eps));
                    *s = S::div(S::splat(1.0), S::sqrt(var));
                }
                let at = start - self.cols.start;
                for (r, o) in self.out.iter_mut().enumerate() {
                    let row = x.add(r * n + start);
                    let (g, b) = (S::splat(self.gain[r]), S::splat(self.shift[r]));
                    for (w, (&m, &i)) in mean.iter().zip(&inv).enumerate() {
                        if lens[w] > 0 {
                            let c = S::sub(load_n::<S>(row.add(w * l), lens[w]), m);
                            let y = S::add(S::mul(S::mul(c, i), g), b);
                            store_n::<S>(o.as_mut_ptr().add(at + w * l), y, lens[w]);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LayerNorm one column at a time in the kernel's order of operations.
    fn plain(
        x: &[f32],
        n: usize,
        cols: Range<usize>,
        d: usize,
        gain: &[f32],
        shift: &[f32],
    ) -> Vec<Vec<f32>> {
        let inv_d = (1.0 / d as f64) as f32;
        let mut out = vec![vec![0.0; cols.len()]; d];
        for (at, c) in cols.enumerate() {
            let mean = (0..d).fold(0.0f32, |m, r| m + x[r * n + c]) * inv_d;
            let var = (0..d).fold(0.0f32, |s, r| {
                let v = x[r * n + c] - mean;
                s + v * v
            });
            let inv = 1.0 / (var * inv_d + 1e-5).sqrt();
            for r in 0..d {
                out[r][at] = (x[r * n + c] - mean) * inv * gain[r] + shift[r];
            }
        }
        out
    }

    /// Every ISA this machine runs gives the plain loop's bits, for column ranges that start
    /// and end anywhere (full steps, partial vectors, a lone column), into NaN-filled rows.
    #[test]
    fn every_isa_gives_the_plain_loops_bits() {
        for (d, n) in [(64, 300), (5, 17), (1, 9), (24, 67)] {
            let x: Vec<f32> = crate::random_values(d * n, 4)
                .iter()
                .map(|v| 3.0 * v + 0.5)
                .collect();
            let gain = crate::random_values(d, 5);
            let shift = crate::random_values(d, 6);
            for cols in [0..n, 1..n, 3..n - 2, 5..6, n / 2..n] {
                let want = plain(&x, n, cols.clone(), d, &gain, &shift);
                for at in [Isa::Scalar, Isa::Avx2, Isa::Avx512] {
                    if at.lanes() > isa().lanes() {
                        continue;
                    }
                    // Each row followed by values that must stay as they are.
                    let mut rows = vec![vec![f32::NAN; cols.len()]; d];
                    rows.iter_mut().for_each(|r| r.extend([7.0; 16]));
                    let mut out: Vec<&mut [f32]> =
                        rows.iter_mut().map(|r| &mut r[..cols.len()]).collect();
                    let params = (&gain[..], &shift[..], 1e-5);
                    layer_norm_columns_at(at, &x, n, cols.clone(), params, &mut out).unwrap();
                    let what = format!("{at}, d {d}, n {n}, columns {cols:?}");
                    let bits = |v: &[Vec<f32>]| {
                        v.iter()
                            .flat_map(|r| &r[..cols.len()])
                            .map(|x| x.to_bits())
                            .collect::<Vec<_>>()
                    };
                    assert_eq!(bits(&rows), bits(&want), "{what}");
                    let kept = rows
                        .iter()
                        .all(|r| r[cols.len()..].iter().all(|&x| x == 7.0));
                    assert!(kept, "{what}: a store ran past a row");
                }
            }
        }
    }

    /// Short buffers and sizes that overflow are errors, not panics or reads past them.
    #[test]
    fn bad_lengths_are_errors() {
        let (x, g) = (vec![1.0; 2 * 10], vec![1.0; 2]);
        let mut rows = [vec![0.0; 4], vec![0.0; 4]];
        let mut out: Vec<&mut [f32]> = rows.iter_mut().map(|r| r.as_mut_slice()).collect();
        let p = (&g[..], &g[..], 1e-5);
        assert!(layer_norm_columns(&x, 10, 6..10, p, &mut out).is_ok());
        assert!(layer_norm_columns(&x, 10, 6..11, p, &mut out).is_err());
        assert!(layer_norm_columns(&x[..19], 10, 6..10, p, &mut out).is_err());
        assert!(layer_norm_columns(&x, 10, 5..10, p, &mut out).is_err());
        assert!(layer_norm_columns(&x, 10, 6..10, (&g[..1], &g[..], 1e-5), &mut out).is_err());
        // 2 rows of 2⁶³ columns: 0 values modulo 2⁶⁴.
        let mut rows = [vec![0.0; 1], vec![0.0; 1]];
        let mut out: Vec<&mut [f32]> = rows.iter_mut().map(|r| r.as_mut_slice()).collect();
        let huge = 1 << 63;
        assert!(layer_norm_columns(&[], huge, huge - 1..huge, p, &mut out).is_err());
    }
}
