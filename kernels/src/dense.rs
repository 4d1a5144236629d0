//! The dense baseline: SGEMM through `faer` (backend 0) or `gemm` with x86-v4 (backend 1). The
//! kernel-tune stage measures both per shape and keeps the faster, so that speedups are always
//! against a tuned dense kernel.

use crate::cpu::with_threads;
use crate::{dense_space, KernelError, ParamPoint};

/// `C (rows×n) = A (rows×cols) · B (cols×n)`, all row-major, `C` overwritten, with a point of
/// [`dense_space`].
pub fn dense_gemm(
    a: &[f32],
    rows: usize,
    cols: usize,
    b: &[f32],
    n: usize,
    c: &mut [f32],
    p: &ParamPoint,
) -> Result<(), KernelError> {
    KernelError::check_len("A", rows * cols, a.len())?;
    KernelError::check_len("B", cols * n, b.len())?;
    KernelError::check_len("C", rows * n, c.len())?;
    dense_space(rows, cols, n).contains(p)?;
    let (backend, threads) = (p.get("backend")?, p.count("threads")?);
    if rows == 0 || n == 0 {
        return Ok(());
    }
    if cols == 0 {
        c.fill(0.0);
        return Ok(());
    }
    with_threads(threads, || match backend {
        0 => {
            let par = if threads > 1 {
                faer::Par::rayon(threads)
            } else {
                faer::Par::Seq
            };
            let lhs = faer::MatRef::from_row_major_slice(a, rows, cols);
            let rhs = faer::MatRef::from_row_major_slice(b, cols, n);
            let dst = faer::MatMut::from_row_major_slice_mut(c, rows, n);
            faer::linalg::matmul::matmul(dst, faer::Accum::Replace, lhs, rhs, 1.0f32, par);
        }
        _ => {
            let par = if threads > 1 {
                gemm::Parallelism::Rayon(threads)
            } else {
                gemm::Parallelism::None
            };
            // SAFETY: the lengths were checked above: `c` is rows×n, `a` rows×cols and `b`
            // cols×n, all row-major (column stride 1, row stride = columns), and `c` does not
            // alias the inputs (it is a unique borrow). `read_dst = false` overwrites C.
            unsafe {
                gemm::gemm(
                    rows,
                    n,
                    cols,
                    c.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    a.as_ptr(),
                    1,
                    cols as isize,
                    b.as_ptr(),
                    1,
                    n as isize,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    par,
                );
            }
        }
    })
}
