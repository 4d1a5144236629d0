//! The CUDA backend's error type. Every variant names what failed and with which value, so that
//! a kernel-tune row's `error` column says why a `cuda` trial could not run.

use thiserror::Error;

/// Errors of the CUDA backend, also returned by the stub built without feature `cuda`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CudaError {
    /// The crate was built without feature `cuda`.
    #[error("built without CUDA support (enable feature `cuda`)")]
    NotCompiled,
    /// `libcuda` could not be loaded: no NVIDIA driver on this machine.
    #[error("no NVIDIA driver found (libcuda.so could not be loaded)")]
    NoDriver,
    /// `libnvrtc` could not be loaded.
    #[error(
        "NVRTC not found: install `nvidia-cuda-nvrtc-cu12` and put its lib folder on LD_LIBRARY_PATH"
    )]
    NoNvrtc,
    /// `libcublas` could not be loaded.
    #[error("cuBLAS not found (libcublas.so could not be loaded)")]
    NoCublas,
    /// The driver is there but the device could not be opened.
    #[error("CUDA device {ordinal} unavailable: {reason}")]
    NoDevice {
        /// The device ordinal asked for.
        ordinal: usize,
        /// The driver's message.
        reason: String,
    },
    /// NVRTC rejected a kernel source.
    #[error("NVRTC failed to compile {kernel} [{defines}] for {arch}: {log}")]
    Compile {
        /// The kernel's name.
        kernel: &'static str,
        /// Its compile-time parameters, `NAME=value` separated by spaces.
        defines: String,
        /// The target, e.g. `sm_90`.
        arch: String,
        /// NVRTC's log.
        log: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA driver call `{op}` failed: {reason}")]
    Driver {
        /// What was being done.
        op: &'static str,
        /// The driver's message.
        reason: String,
    },
    /// A cuBLAS call failed.
    #[error("cuBLAS call `{op}` failed: {reason}")]
    Blas {
        /// What was being done.
        op: &'static str,
        /// cuBLAS's message.
        reason: String,
    },
    /// A kernel configuration breaks a constraint of its kernel.
    #[error("invalid {kernel} configuration {config}: {reason}")]
    Config {
        /// The kernel's name.
        kernel: &'static str,
        /// The configuration, displayed.
        config: String,
        /// The constraint that failed.
        reason: String,
    },
    /// Operand shapes do not fit together.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// The PTX cache folder could not be read or written.
    #[error("PTX cache {path}: {reason}")]
    Cache {
        /// The file or folder.
        path: String,
        /// The I/O error.
        reason: String,
    },
}

impl From<CudaError> for crate::KernelError {
    fn from(e: CudaError) -> Self {
        crate::KernelError::Backend(e.to_string())
    }
}
