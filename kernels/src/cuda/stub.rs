//! The device without feature `cuda`: a [`CudaDevice`] that cannot be opened (every
//! [`Gpu`] call is then unreachable), so that callers need no `#[cfg]`. The kernels' sources
//! still compile to PTX in CI through the real backend (`--features cuda`, NVRTC, no GPU).

use super::{CudaError, DeviceInfo, Gpu, Timing};
use crate::{KernelError, ParamPoint, SparseMatrix};
use std::convert::Infallible;
use std::path::PathBuf;

/// Always false without feature `cuda`.
pub fn nvrtc_available() -> bool {
    false
}

/// Where compiled PTX would be cached; without feature `cuda` nothing is compiled.
#[derive(Debug, Clone)]
pub struct PtxCache {
    _dir: PathBuf,
}

impl PtxCache {
    /// A cache in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { _dir: dir.into() }
    }
}

/// A CUDA device; cannot be opened without feature `cuda`.
pub struct CudaDevice {
    never: Infallible,
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

    /// Caches compiled PTX in `$COTUNE_PTX_CACHE` where it is set.
    pub fn with_env_ptx_cache(self) -> Self {
        self
    }
}

impl Gpu for CudaDevice {
    fn info(&self) -> &DeviceInfo {
        match self.never {}
    }
    fn spmm(
        &self,
        _: &SparseMatrix,
        _: &[f32],
        _: usize,
        _: &ParamPoint,
    ) -> Result<Vec<f32>, KernelError> {
        match self.never {}
    }
    fn measure(
        &self,
        _: &SparseMatrix,
        _: usize,
        _: &ParamPoint,
        _: usize,
    ) -> Result<Timing, KernelError> {
        match self.never {}
    }
    fn measure_dense(&self, _: usize, _: usize, _: usize, _: usize) -> Result<Timing, CudaError> {
        match self.never {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_says_built_without_cuda() {
        assert_eq!(CudaDevice::new(0).err(), Some(CudaError::NotCompiled));
        assert!(!nvrtc_available());
        assert!(CudaError::NotCompiled
            .to_string()
            .contains("enable feature `cuda`"));
    }
}
