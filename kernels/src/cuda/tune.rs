//! What kernel-tune and evaluate call: run or time any [`SparseMatrix`] with the CUDA kernel
//! and configuration a [`ParamPoint`] of its [`super::cuda_space`] names. V:N:M runs on the
//! `mma.sp` kernel, or on sm_90 the Hopper `wgmma` kernel when the point is one of its space's
//! ([`super::is_wgmma_point`]), N:M 2:4 (and 1:4) on the same kernels as V:N:M with M = 4, CSR
//! on the row-split kernel, dense on cuBLAS; vector-wise has no CUDA kernel.

use super::device::CudaDevice;
use super::pack::vnm_from_nm;
use super::random::exact_values;
use super::{
    is_wgmma_point, CsrConfig, CudaError, DeviceInfo, Gpu, Timing, VnmConfig, WgmmaConfig,
};
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

/// The V:N:M form a tensor-core kernel with blocks of `bm` rows runs for `a` (2:4 converted
/// at V = `bm`).
fn as_vnm(a: &SparseMatrix, bm: usize) -> Result<VnmMatrix, KernelError> {
    match a {
        SparseMatrix::Vnm(v) => Ok(v.clone()),
        SparseMatrix::Nm(nm) => Ok(vnm_from_nm(nm, bm)?),
        _ => Err(unsupported(a)),
    }
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
            SparseMatrix::Vnm(_) | SparseMatrix::Nm(_) if is_wgmma_point(point) => {
                let cfg = WgmmaConfig::from_point(point)?;
                Ok(self.spmm_wgmma(&as_vnm(a, cfg.bm)?, b, n, &cfg)?)
            }
            SparseMatrix::Vnm(_) | SparseMatrix::Nm(_) => {
                let cfg = VnmConfig::from_point(point)?;
                Ok(self.spmm_vnm(&as_vnm(a, cfg.bm)?, b, n, &cfg)?)
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
            SparseMatrix::Vnm(_) | SparseMatrix::Nm(_) if is_wgmma_point(point) => {
                let cfg = WgmmaConfig::from_point(point)?;
                let da = self.upload_vnm(&as_vnm(a, cfg.bm)?, cfg.bk)?;
                let db = self.upload_f16(&exact_values(cols * n, 1), cols, n)?;
                let mut dc = self.zeros_f16(rows, n)?;
                Ok(self.time(WARMUP, reps, BATCH, |_| {
                    self.launch_wgmma(&da, &db, &mut dc, &cfg)
                })?)
            }
            SparseMatrix::Vnm(_) | SparseMatrix::Nm(_) => {
                let cfg = VnmConfig::from_point(point)?;
                let da = self.upload_vnm(&as_vnm(a, cfg.bm)?, cfg.bk)?;
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
