//! The dense baseline: SGEMM through `faer` (backend 0) or `gemm` with x86-v4 (backend 1). The
//! kernel-tune stage measures both per shape and keeps the faster, so that speedups are always
//! against a tuned dense kernel.
//!
//! With more than one thread the rows of A are split into that many bands, each a sequential
//! product, on the same pool as the sparse kernels (`cpu::split_rows`): the dense baseline and
//! the sparse kernels pay the same for their threads (rayon's parked workers cost 80–100 µs to
//! wake inside a model pass, see `cpu::pool`).

use crate::cpu::{split_rows, Epilogue};
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
    dense_gemm_with(a, rows, cols, b, n, c, p, Epilogue::default())
}

/// [`dense_gemm`], then `epilogue` on each thread's band of rows as soon as it is computed.
#[allow(clippy::too_many_arguments)] // dense_gemm's operands and the epilogue.
pub fn dense_gemm_with(
    a: &[f32],
    rows: usize,
    cols: usize,
    b: &[f32],
    n: usize,
    c: &mut [f32],
    p: &ParamPoint,
    epilogue: Epilogue,
) -> Result<(), KernelError> {
    KernelError::check_len("A", rows * cols, a.len())?;
    KernelError::check_len("B", cols * n, b.len())?;
    KernelError::check_len("C", rows * n, c.len())?;
    if let Some(bias) = epilogue.bias {
        KernelError::check_len("bias", rows, bias.len())?;
    }
    dense_space(rows, cols, n).contains(p)?;
    let (backend, threads) = (p.get("backend")?, p.count("threads")?);
    if rows == 0 || n == 0 {
        return Ok(());
    }
    if cols == 0 {
        c.fill(0.0);
        epilogue.apply(0, c, n);
        return Ok(());
    }
    let band = rows.div_ceil(threads.max(1));
    let parts: Vec<std::ops::Range<usize>> = (0..rows)
        .step_by(band.max(1))
        .map(|r| r..(r + band).min(rows))
        .collect();
    let run = |range: std::ops::Range<usize>, c: &mut [f32]| {
        let a = &a[range.start * cols..range.end * cols];
        sequential(backend, a, range.len(), cols, b, n, c)
    };
    split_rows(&parts, n, c, threads, &run, &epilogue);
    Ok(())
}

/// One sequential product on `backend`: `c (rows×n) = a (rows×cols) · b (cols×n)`.
fn sequential(
    backend: i64,
    a: &[f32],
    rows: usize,
    cols: usize,
    b: &[f32],
    n: usize,
    c: &mut [f32],
) {
    match backend {
        0 => {
            let lhs = faer::MatRef::from_row_major_slice(a, rows, cols);
            let rhs = faer::MatRef::from_row_major_slice(b, cols, n);
            let dst = faer::MatMut::from_row_major_slice_mut(c, rows, n);
            faer::linalg::matmul::matmul(
                dst,
                faer::Accum::Replace,
                lhs,
                rhs,
                1.0f32,
                faer::Par::Seq,
            );
        }
        _ => {
            // SAFETY: the callers' lengths: `c` is rows×n, `a` rows×cols and `b` cols×n, all
            // row-major (column stride 1, row stride = columns), and `c` does not alias the
            // inputs (it is a unique borrow). `read_dst = false` overwrites C.
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
                    gemm::Parallelism::None,
                );
            }
        }
    }
}
