//! [`Gpu`]: the one seam between the CUDA backend and its callers. The device implements it,
//! and so does the stub of a build without feature `cuda` (every call an error), so callers
//! need no `#[cfg]`; the stages' tests implement it on a CPU stand-in.

use super::{CudaError, DeviceInfo, Timing};
use crate::{KernelError, ParamPoint, SparseMatrix};

/// What kernel tuning and evaluation need of a CUDA device.
pub trait Gpu {
    /// What the device is (for fingerprints, cost models and result rows).
    fn info(&self) -> &DeviceInfo;

    /// C = A·B (`b` is `a.cols() × n` row-major f32) with the kernel and configuration of
    /// `point` from the format's [`super::cuda_space`]; fp16 kernels round A, B and C to fp16.
    fn spmm(
        &self,
        a: &SparseMatrix,
        b: &[f32],
        n: usize,
        point: &ParamPoint,
    ) -> Result<Vec<f32>, KernelError>;

    /// Times A·B for a B of `n` columns with the kernel and configuration of `point`: `reps`
    /// device-timed samples, per launch.
    fn measure(
        &self,
        a: &SparseMatrix,
        n: usize,
        point: &ParamPoint,
        reps: usize,
    ) -> Result<Timing, KernelError>;

    /// Times the dense baseline (cuBLAS fp16) on a `rows × cols` A and a `cols × n` B.
    fn measure_dense(
        &self,
        rows: usize,
        cols: usize,
        n: usize,
        reps: usize,
    ) -> Result<Timing, CudaError>;
}
