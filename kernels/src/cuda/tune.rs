//! What kernel-tune and evaluate call: run or time any [`SparseMatrix`] with the CUDA kernel
//! and configuration a [`ParamPoint`] of its [`super::cuda_space`] names. V:N:M runs on the
//! `mma.sp` kernel, N:M 2:4 (and 1:4) on the same kernel as V:N:M with M = 4, CSR on the
//! row-split kernel, dense on cuBLAS; vector-wise has no CUDA kernel.

use super::device::CudaDevice;
use super::pack::vnm_from_nm;
use super::random::exact_values;
use super::{CsrConfig, CudaError, DeviceInfo, Gpu, Timing, VnmConfig};
use crate::{KernelError, ParamPoint, SparseMatrix, VnmMatrix};

/// Warm-up launches before a measurement.
const WARMUP: usize = 3;
/// Launches per timed sample (host launch overhead overlaps device work).
const BATCH: usize = 10;

fn unsupported(a: &SparseMatrix) -> KernelError {
    KernelError::Backend(format!(
        "no CUDA kernel for {:?} matrices",
        a.signature().kind
    ))
}

/// The V:N:M form the `mma.sp` kernel runs for `a` under `cfg` (2:4 converted).
fn as_vnm(a: &SparseMatrix, cfg: &VnmConfig) -> Result<Option<VnmMatrix>, KernelError> {
    Ok(match a {
        SparseMatrix::Vnm(v) => Some(v.clone()),
        SparseMatrix::Nm(nm) => Some(vnm_from_nm(nm, cfg.bm)?),
        _ => None,
    })
}

impl Gpu for CudaDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn spmm(
        &self,
        a: &SparseMatrix,
        b: &[f32],
        n: usize,
        point: &ParamPoint,
    ) -> Result<Vec<f32>, KernelError> {
        match a {
            SparseMatrix::Vnm(_) | SparseMatrix::Nm(_) => {
                let cfg = VnmConfig::from_point(point)?;
                let v = as_vnm(a, &cfg)?.ok_or_else(|| unsupported(a))?;
                Ok(self.spmm_vnm(&v, b, n, &cfg)?)
            }
            SparseMatrix::Csr(c) => Ok(self.spmm_csr(c, b, n, &CsrConfig::from_point(point)?)?),
            SparseMatrix::Dense(d) => Ok(self.gemm_f16(d.values(), d.rows(), d.cols(), b, n)?),
            SparseMatrix::Vector(_) => Err(unsupported(a)),
        }
    }

    /// `reps` samples of 10 back-to-back launches after 3 warm-ups, each on a random B.
    fn measure(
        &self,
        a: &SparseMatrix,
        n: usize,
        point: &ParamPoint,
        reps: usize,
    ) -> Result<Timing, KernelError> {
        let (rows, cols) = (a.rows(), a.cols());
        match a {
            SparseMatrix::Vnm(_) | SparseMatrix::Nm(_) => {
                let cfg = VnmConfig::from_point(point)?;
                let v = as_vnm(a, &cfg)?.ok_or_else(|| unsupported(a))?;
                let da = self.upload_vnm(&v, cfg.bk)?;
                let db = self.upload_f16(&exact_values(cols * n, 1), cols, n)?;
                let mut dc = self.zeros_f16(rows, n)?;
                Ok(self.time(WARMUP, reps, BATCH, |_| {
                    self.launch_vnm(&da, &db, &mut dc, &cfg)
                })?)
            }
            SparseMatrix::Csr(c) => {
                let cfg = CsrConfig::from_point(point)?;
                let da = self.upload_csr(c)?;
                let db = self.upload_f32(&exact_values(cols * n, 1))?;
                let mut dc = self.zeros_f32(rows * n)?;
                Ok(self.time(WARMUP, reps, BATCH, |_| {
                    self.launch_csr(&da, &db, &mut dc, n, &cfg)
                })?)
            }
            SparseMatrix::Dense(_) => Ok(self.measure_dense(rows, cols, n, reps)?),
            SparseMatrix::Vector(_) => Err(unsupported(a)),
        }
    }

    fn measure_dense(
        &self,
        rows: usize,
        cols: usize,
        n: usize,
        reps: usize,
    ) -> Result<Timing, CudaError> {
        let da = self.upload_f16(&exact_values(rows * cols, 2), rows, cols)?;
        let db = self.upload_f16(&exact_values(cols * n, 1), cols, n)?;
        let mut dc = self.zeros_f16(rows, n)?;
        self.time(WARMUP, reps, BATCH, |_| {
            self.launch_gemm_f16(&da, &db, &mut dc)
        })
    }
}
