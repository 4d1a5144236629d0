//! The device API without feature `cuda`: the same types and signatures as the real backend,
//! every call returning [`CudaError::NotCompiled`], so that callers need no `#[cfg]`.

use std::path::{Path, PathBuf};

use super::config::{CsrConfig, VnmConfig};
use super::source::KernelSource;
use super::{CudaError, DeviceInfo, Timing};
use crate::{CsrMatrix, KernelError, ParamPoint, SparseMatrix, VnmMatrix};

/// Always false without feature `cuda`.
pub fn nvrtc_available() -> bool {
    false
}

/// Always [`CudaError::NotCompiled`].
pub fn nvrtc_version() -> Result<(i32, i32), CudaError> {
    Err(CudaError::NotCompiled)
}

/// Always [`CudaError::NotCompiled`].
pub fn compile_ptx(
    _kernel: KernelSource,
    _defines: &[(&'static str, usize)],
    _arch: &'static str,
) -> Result<String, CudaError> {
    Err(CudaError::NotCompiled)
}

/// Always [`CudaError::NotCompiled`].
pub fn compile_ptx_from(
    _kernel: KernelSource,
    _text: &str,
    _defines: &[(&'static str, usize)],
    _arch: &'static str,
) -> Result<String, CudaError> {
    Err(CudaError::NotCompiled)
}

/// PTX files in a folder; without feature `cuda` nothing can be compiled into it.
#[derive(Debug, Clone)]
pub struct PtxCache {
    dir: PathBuf,
}

impl PtxCache {
    /// A cache in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn get_or_compile(
        &self,
        _kernel: KernelSource,
        _defines: &[(&'static str, usize)],
        _arch: &'static str,
    ) -> Result<String, CudaError> {
        Err(CudaError::NotCompiled)
    }
}

/// A CUDA device; cannot be opened without feature `cuda`.
pub struct CudaDevice {
    info: DeviceInfo,
}

/// A V:N:M matrix on the device (never constructed without feature `cuda`).
pub struct DeviceVnm {
    _private: (),
}

/// An fp16 matrix on the device (never constructed without feature `cuda`).
pub struct DeviceMatrixF16 {
    _private: (),
}

/// A CSR matrix on the device (never constructed without feature `cuda`).
pub struct DeviceCsr {
    _private: (),
}

/// f32 values on the device (never constructed without feature `cuda`).
pub struct DeviceVecF32 {
    _private: (),
}

impl DeviceVecF32 {
    /// Number of values.
    pub fn len(&self) -> usize {
        0
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        true
    }
}

impl CudaDevice {
    /// Always [`CudaError::NotCompiled`].
    pub fn new(_ordinal: usize) -> Result<Self, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Uses `cache` for compiled PTX.
    pub fn with_ptx_cache(self, _cache: PtxCache) -> Self {
        self
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn prepare_vnm(&self, _cfg: &VnmConfig) -> Result<(), CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn upload_vnm(&self, _a: &VnmMatrix, _bk: usize) -> Result<DeviceVnm, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn upload_f16(
        &self,
        _x: &[f32],
        _rows: usize,
        _cols: usize,
    ) -> Result<DeviceMatrixF16, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn zeros_f16(&self, _rows: usize, _cols: usize) -> Result<DeviceMatrixF16, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn download_f16(&self, _x: &DeviceMatrixF16) -> Result<Vec<f32>, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn launch_vnm(
        &self,
        _a: &DeviceVnm,
        _b: &DeviceMatrixF16,
        _c: &mut DeviceMatrixF16,
        _cfg: &VnmConfig,
    ) -> Result<(), CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn upload_csr(&self, _a: &CsrMatrix) -> Result<DeviceCsr, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn launch_csr(
        &self,
        _a: &DeviceCsr,
        _b: &DeviceVecF32,
        _c: &mut DeviceVecF32,
        _n: usize,
        _cfg: &CsrConfig,
    ) -> Result<(), CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn upload_f32(&self, _x: &[f32]) -> Result<DeviceVecF32, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn zeros_f32(&self, _len: usize) -> Result<DeviceVecF32, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn download_f32(&self, _x: &DeviceVecF32) -> Result<Vec<f32>, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn launch_gemm_f16(
        &self,
        _a: &DeviceMatrixF16,
        _b: &DeviceMatrixF16,
        _c: &mut DeviceMatrixF16,
    ) -> Result<(), CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn time(
        &self,
        _warmup: usize,
        _reps: usize,
        _batch: usize,
        _run: impl FnMut(usize) -> Result<(), CudaError>,
    ) -> Result<Timing, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn synchronize(&self) -> Result<(), CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn spmm_vnm(
        &self,
        _a: &VnmMatrix,
        _b: &[f32],
        _n: usize,
        _cfg: &VnmConfig,
    ) -> Result<Vec<f32>, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn spmm_csr(
        &self,
        _a: &CsrMatrix,
        _b: &[f32],
        _n: usize,
        _cfg: &CsrConfig,
    ) -> Result<Vec<f32>, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn gemm_f16(
        &self,
        _a: &[f32],
        _rows: usize,
        _k: usize,
        _b: &[f32],
        _n: usize,
    ) -> Result<Vec<f32>, CudaError> {
        Err(CudaError::NotCompiled)
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn spmm(
        &self,
        _a: &SparseMatrix,
        _b: &[f32],
        _n: usize,
        _point: &ParamPoint,
    ) -> Result<Vec<f32>, KernelError> {
        Err(CudaError::NotCompiled.into())
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn measure(
        &self,
        _a: &SparseMatrix,
        _n: usize,
        _point: &ParamPoint,
        _reps: usize,
    ) -> Result<Timing, KernelError> {
        Err(CudaError::NotCompiled.into())
    }

    /// Always [`CudaError::NotCompiled`].
    pub fn measure_dense(
        &self,
        _rows: usize,
        _cols: usize,
        _n: usize,
        _reps: usize,
    ) -> Result<Timing, CudaError> {
        Err(CudaError::NotCompiled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_says_built_without_cuda() {
        assert_eq!(CudaDevice::new(0).err(), Some(CudaError::NotCompiled));
        assert!(!nvrtc_available());
        assert_eq!(nvrtc_version(), Err(CudaError::NotCompiled));
        let cache = PtxCache::new("/nonexistent");
        assert_eq!(
            cache.get_or_compile(KernelSource::SpmmCsrF32, &[], "sm_90"),
            Err(CudaError::NotCompiled)
        );
        assert!(CudaError::NotCompiled
            .to_string()
            .contains("enable feature `cuda`"));
    }
}
