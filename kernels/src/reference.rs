//! The scalar reference SpMM: obviously correct, slow, accumulating in f64. Every kernel is
//! checked against it. It multiplies exactly the stored entries at real columns (stored zeros
//! included), so NaN/Inf in B reach the same outputs as in the kernels.

use crate::{KernelError, SparseMatrix};

/// Checks the shapes of `C (rows×n) = A (rows×cols) · B (cols×n)`.
pub(crate) fn check_shapes(
    a: &SparseMatrix,
    b: &[f32],
    n: usize,
    c: &[f32],
) -> Result<(), KernelError> {
    KernelError::check_len("B", a.cols() * n, b.len())?;
    KernelError::check_len("C", a.rows() * n, c.len())
}

/// Calls `f(row, col, value)` for every stored entry at a real column.
pub(crate) fn for_each_entry(a: &SparseMatrix, mut f: impl FnMut(usize, usize, f32)) {
    match a {
        SparseMatrix::Dense(d) => {
            for (i, &x) in d.values().iter().enumerate() {
                f(i / d.cols(), i % d.cols(), x);
            }
        }
        SparseMatrix::Csr(s) => {
            for r in 0..s.rows() {
                for i in s.row_range(r) {
                    f(r, s.col_idx()[i] as usize, s.values()[i]);
                }
            }
        }
        SparseMatrix::Nm(s) => {
            let groups = s.groups();
            for (i, (&x, &p)) in s.values().iter().zip(s.positions()).enumerate() {
                let (r, g) = (i / s.n() / groups, (i / s.n()) % groups);
                let c = g * s.m() + p as usize;
                if c < s.cols() {
                    f(r, c, x);
                }
            }
        }
        SparseMatrix::Vnm(s) => {
            for r in 0..s.rows() {
                for slot in 0..2 * s.groups() {
                    if let Some(c) = s.slot_column(r, slot) {
                        f(r, c, s.values()[r * s.k_sp() + slot]);
                    }
                }
            }
        }
        SparseMatrix::Vector(s) => {
            for blk in 0..s.blocks() {
                for j in s.block_range(blk) {
                    for i in 0..s.v() {
                        f(
                            blk * s.v() + i,
                            s.col_idx()[j] as usize,
                            s.values()[j * s.v() + i],
                        );
                    }
                }
            }
        }
    }
}

/// `C = A · B`, row-major, `C` overwritten; scalar, f64 accumulation.
pub fn spmm_reference(
    a: &SparseMatrix,
    b: &[f32],
    n: usize,
    c: &mut [f32],
) -> Result<(), KernelError> {
    check_shapes(a, b, n, c)?;
    let mut acc = vec![0.0f64; c.len()];
    for_each_entry(a, |r, k, x| {
        for j in 0..n {
            acc[r * n + j] += f64::from(x) * f64::from(b[k * n + j]);
        }
    });
    for (ci, ai) in c.iter_mut().zip(acc) {
        *ci = ai as f32;
    }
    Ok(())
}
