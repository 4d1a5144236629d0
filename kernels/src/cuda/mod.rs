//! The CUDA backend: SpMM kernels written in CUDA C++ (`kernels/cuda/*.cu`), compiled at run
//! time with NVRTC (tunable parameters as `#define`s, PTX cached by digest), launched through
//! cudarc, with cuBLAS as the dense baseline.
//!
//! Kernels: V:N:M on sparse tensor cores (`mma.sp`, Spatha structure; 2:4 is its M = 4 case),
//! on Hopper also V:N:M on sparse `wgmma` (V = 64 / 128 and 2:4, sm_90a), CSR row split
//! (fp32), and cuBLAS fp16 GEMM. Configurations and their spaces ([`VnmConfig`],
//! [`WgmmaConfig`], [`CsrConfig`], [`cuda_spaces`]) and the host-side packing are plain Rust
//! and always built. Callers reach a device through one trait, [`Gpu`]. Without feature `cuda`,
//! [`CudaDevice::new`] returns [`CudaError::NotCompiled`] (a stub of a few lines); with it and
//! no driver, [`CudaError::NoDriver`] (the driver library is probed before any call).

mod config;
mod cost;
mod cost_check;
mod error;
mod gpu;
mod launch;
mod pack;
mod ptxas;
mod random;
mod source;
mod space;
mod wgmma;
mod wgmma_cost;
mod wgmma_exclude;
mod wgmma_fit;
mod wgmma_launch;
mod wgmma_reading;
mod wgmma_space;

#[cfg(feature = "cuda")]
mod blas;
#[cfg(feature = "cuda")]
mod device;
#[cfg(feature = "cuda")]
mod device_memory;
#[cfg(feature = "cuda")]
mod device_wgmma;
#[cfg(feature = "cuda")]
mod nvrtc;
#[cfg(not(feature = "cuda"))]
mod stub;
#[cfg(feature = "cuda")]
mod tensor_map;
#[cfg(feature = "cuda")]
mod tune;

pub use config::{
    csr_configs, vnm_configs, vnm_wm_values, CsrConfig, VnmConfig, CSR_COLS_PER_LANE, CSR_WARPS,
    MAX_SHARED_BYTES, MAX_WARPS_M, VNM_BK, VNM_BLOCK_ROWS, VNM_BN, VNM_MMA_K, VNM_STAGES, VNM_WN,
};
pub use cost::{
    csr_cycles, cuda_predicted_cost, vnm_cycles, vnm_registers, GpuModel, RegisterSource,
};
pub use cost_check::{check_model, spread, ModelCheck, Spread};
pub use error::CudaError;
pub use gpu::Gpu;
pub use launch::{csr_device_arrays, CsrArrays, CsrLaunch, VnmDims, VnmLaunch};
pub use pack::{
    emulate_vnm, f16_device_layout, from_f16_bits, pack_vnm, packed_slots, pad_rows_f16, padded_ld,
    to_f16_bits, vnm_from_nm, VnmPacked,
};
pub use ptxas::{parse_ptxas, ptxas_summary, PtxasReport};
pub use random::{exact_values, random_csr, random_vnm, vnm_mask};
pub use source::{describe_defines, program_of, KernelSource};
pub use space::*;
pub use wgmma::{
    wgmma_configs, WgmmaConfig, SM90_MAX_SHARED_BYTES, WGMMA_BK, WGMMA_BLOCK_ROWS, WGMMA_BM,
    WGMMA_BN, WGMMA_BULK, WGMMA_CLUSTER, WGMMA_CONSUMER_REGISTERS, WGMMA_KEEP, WGMMA_PERSISTENT,
    WGMMA_PINGPONG, WGMMA_PRODUCER_REGISTERS, WGMMA_RASTER, WGMMA_SPLIT_K, WGMMA_STAGES,
    WGMMA_SWIZZLE, WGMMA_TMA,
};
pub use wgmma_cost::{wgmma_cycles, wgmma_cycles_with, WgmmaConstants};
pub use wgmma_exclude::{env_exclusions, wgmma_param_values, WgmmaExclusions, WGMMA_EXCLUDE_ENV};
pub use wgmma_fit::{fit_wgmma, WgmmaFit};
pub use wgmma_launch::{WgmmaLaunch, WGMMA_REDUCE_PER_THREAD, WGMMA_REDUCE_THREADS};
pub use wgmma_reading::{
    env_reading, format_reading, parse_reading, reading_defines, reading_variants, READING_DEFINES,
    WGMMA_READING_ENV,
};
pub(crate) use wgmma_space::kernel_accepts;
pub use wgmma_space::{
    cuda_spaces, is_wgmma_point, wgmma_block_rows, wgmma_space, WGMMA_ARCH, WGMMA_KERNEL,
};

#[cfg(feature = "cuda")]
pub use device::CudaDevice;
#[cfg(feature = "cuda")]
pub use device_memory::{DeviceCsr, DeviceMatrixF16, DeviceVecF32, DeviceVnm};
#[cfg(feature = "cuda")]
pub use nvrtc::{
    compile_program, compile_ptx, compile_ptx_from, nvrtc_available, nvrtc_version, Compiled,
    PtxCache,
};
#[cfg(not(feature = "cuda"))]
pub use stub::{nvrtc_available, CudaDevice, PtxCache};

/// The environment variable naming a folder for compiled programs (the engine's cache, and the
/// device tests' through [`CudaDevice::with_env_ptx_cache`]).
pub const PTX_CACHE_ENV: &str = "COTUNE_PTX_CACHE";

/// Whether this build has the CUDA backend (feature `cuda`).
pub const CUDA_ENABLED: bool = cfg!(feature = "cuda");

/// The NVRTC targets CI compiles every configuration for.
pub const CI_ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// What a CUDA device is, for fingerprints and result rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device's name, e.g. "NVIDIA H200".
    pub name: String,
    /// Compute capability (major, minor).
    pub sm: (i32, i32),
    /// The NVRTC target used for it, e.g. "sm_90".
    pub arch: &'static str,
    /// The driver's CUDA version, e.g. 13000.
    pub driver_version: i32,
    /// Streaming multiprocessors.
    pub multiprocessors: i32,
    /// Shared memory a block may opt in to, in bytes.
    pub max_shared_per_block: i32,
    /// Shared memory per SM, in bytes.
    pub shared_per_sm: i32,
    /// 32-bit registers per SM.
    pub registers_per_sm: i32,
}

impl DeviceInfo {
    /// "NVIDIA H200 sm_90 driver 13000": the device part of a kernel-tune key. On sm_90 a
    /// reading of the `wgmma` layouts other than the kernel's own (`COTUNE_WGMMA_READING`,
    /// which changes the Hopper kernel's code) is part of it: "… wgmma-reading META_SWAP";
    /// and so are the Hopper configurations left out (`COTUNE_WGMMA_EXCLUDE`, which changes
    /// its space): "… wgmma-exclude tma=1".
    pub fn fingerprint(&self) -> String {
        let mut base = format!(
            "{} sm_{}{} driver {}",
            self.name, self.sm.0, self.sm.1, self.driver_version
        );
        if self.sm == (9, 0) {
            match env_exclusions() {
                Ok(ex) if ex.is_empty() => {}
                Ok(ex) => base.push_str(&format!(" wgmma-exclude {ex}")),
                Err(_) => base.push_str(&format!(
                    " wgmma-exclude {}",
                    std::env::var(WGMMA_EXCLUDE_ENV).unwrap_or_default()
                )),
            }
        }
        match env_reading() {
            Ok(r) if r.is_empty() || self.sm != (9, 0) => base,
            Ok(r) => format!("{base} wgmma-reading {}", format_reading(&r)),
            // Launches refuse a bad reading with its error; the key only has to differ.
            Err(_) => format!(
                "{base} wgmma-reading {}",
                std::env::var(WGMMA_READING_ENV).unwrap_or_default()
            ),
        }
    }
}

/// Device-event timings of repeated launches, in microseconds per launch.
#[derive(Debug, Clone, PartialEq)]
pub struct Timing {
    /// Every sample, in launch order.
    pub samples_us: Vec<f64>,
    /// Median.
    pub median_us: f64,
    /// Fastest.
    pub min_us: f64,
    /// Slowest.
    pub max_us: f64,
}

impl Timing {
    /// Summarises samples (NaN statistics when there are none).
    pub fn from_samples(samples_us: Vec<f64>) -> Self {
        let mut sorted = samples_us.clone();
        sorted.sort_by(f64::total_cmp);
        let median_us = match sorted.len() {
            0 => f64::NAN,
            n if n % 2 == 1 => sorted[n / 2],
            n => 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]),
        };
        Self {
            median_us,
            min_us: sorted.first().copied().unwrap_or(f64::NAN),
            max_us: sorted.last().copied().unwrap_or(f64::NAN),
            samples_us,
        }
    }
}
