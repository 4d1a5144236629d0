//! The check a CUDA tuning's winner passes before it wins: its product against the CPU
//! reference.

use super::cuda::message;
use super::{argmin, summarise, Measured};
use crate::evaluate::cuda::CUDA_TOLERANCE;
use crate::StageError;
use kernels::cuda::Gpu;
use kernels::SparseMatrix;

/// Columns of B a tuning's winner is checked on against the CPU reference.
pub const CHECK_COLUMNS: usize = 256;

/// Checks the fastest measured point's product against the CPU reference (on at most
/// [`CHECK_COLUMNS`] columns); a point whose result is off by more than
/// [`CUDA_TOLERANCE`] of the reference's largest value, or whose check fails, gets that as
/// its error (with the time it ran in; its timings become NaN, as every failed point's) and
/// the next fastest is checked. Returns the first point that agrees, if any.
/// This is what keeps a kernel the device runs wrongly (a layout the ISA text left open, a
/// driver's miscompile) from winning a tuning: the tuning falls back to the kernels that agree.
pub(super) fn check_fastest(
    a: &SparseMatrix,
    n: usize,
    dev: &impl Gpu,
    points: &mut [Measured],
) -> Result<Option<usize>, StageError> {
    let columns = n.clamp(1, CHECK_COLUMNS);
    let b = kernels::random_values(a.cols() * columns, 0xc4ec);
    let mut reference = vec![0f32; a.rows() * columns];
    kernels::spmm_reference(a, &b, columns, &mut reference)?;
    let scale = reference
        .iter()
        .fold(0f32, |m, x| m.max(x.abs()))
        .max(f32::MIN_POSITIVE) as f64;
    while let Some(best) = argmin(points) {
        let verdict = match dev.spmm(a, &b, columns, &points[best].params) {
            Ok(c) => {
                let off = c
                    .iter()
                    .zip(&reference)
                    .fold(0f64, |m, (x, r)| m.max((x - r).abs() as f64))
                    / scale;
                if off <= CUDA_TOLERANCE && c.len() == reference.len() {
                    return Ok(Some(best));
                }
                format!(
                    "wrong result: off the CPU reference by {off:.2e} of its largest value \
                     (at most {CUDA_TOLERANCE:e}) on {columns} columns; not used (it ran in \
                     {:.2} us)",
                    points[best].timing.median_us
                )
            }
            Err(e) => format!("the check of its result failed: {}", message(&e)),
        };
        // A failed point's timings are NaN (rows.rs): nothing downstream takes it as fastest.
        points[best].error = Some(verdict);
        points[best].timing = summarise(vec![]);
    }
    Ok(None)
}
