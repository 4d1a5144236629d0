//! Which source files make up each kernel family (paths relative to the `kernels` crate).
//!
//! Each listed file's text is compiled into the crate (`include_str!`), so a family's digest is
//! always that of the code built beside it: no build script can be skipped and leave it stale.
//! A file shared by several families is listed in each; a file that no tuning's results depend
//! on is in [`NOT_MEASURED`]. A test fails when a source file of the crate is in neither.

/// A source file: its path relative to the crate, and its text as this crate was compiled.
pub type Source = (&'static str, &'static str);

/// [`Source`]s from paths relative to the crate.
macro_rules! sources {
    ($($path:literal),* $(,)?) => {
        &[$(($path, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $path)))),*]
    };
}

/// Code every family runs: matrix types, patterns, masks and the synthetic weights tunings
/// are measured on.
const COMMON: &[Source] = sources![
    "src/format/mod.rs",
    "src/mask/mod.rs",
    "src/mask/select.rs",
    "src/mask/vnm.rs",
    "src/pattern.rs",
    "src/synthetic.rs",
];

/// The CPU kernels' driver, SIMD layer, parameter spaces and cost model (with its calibration).
const CPU: &[Source] = sources![
    "src/calibrate.rs",
    "src/cpu/batch_one.rs",
    "src/cpu/column_rest.rs",
    "src/cost.rs",
    "src/cpu/dispatch.rs",
    "src/cpu/few_columns.rs",
    "src/cpu/kernels/mod.rs",
    "src/cpu/line_aligned.rs",
    "src/cpu/mod.rs",
    "src/cpu/panel_layout.rs",
    "src/cpu/pool.rs",
    "src/cpu/simd.rs",
    "src/cpu/tiles.rs",
    "src/cpu/transpose.rs",
    "src/isa.rs",
    "src/space.rs",
];

/// The CUDA device, compilation, launch geometry, spaces and cost model.
const CUDA: &[Source] = sources![
    "src/cuda/config.rs",
    "src/cuda/cost.rs",
    "src/cuda/device.rs",
    "src/cuda/device_memory.rs",
    "src/cuda/launch.rs",
    "src/cuda/mod.rs",
    "src/cuda/nvrtc.rs",
    "src/cuda/source.rs",
    "src/cuda/space.rs",
    "src/cuda/tune.rs",
    "src/cuda/wgmma_cost.rs",
    "src/cuda/wgmma_space.rs",
];

/// Each family's tag and its files (groups concatenated in order).
pub const FAMILY_SOURCES: &[(&str, &[&[Source]])] = &[
    (
        "cpu-dense",
        &[COMMON, CPU, sources!["src/dense.rs", "src/format/dense.rs"]],
    ),
    (
        "cpu-csr",
        &[
            COMMON,
            CPU,
            sources![
                "src/cpu/kernels/csr.rs",
                "src/cpu/kernels/gemm_panels.rs",
                "src/cpu/kernels/gemv.rs",
                "src/cpu/kernels/gemv_panels.rs",
                "src/format/csr.rs",
                "src/format/panels.rs",
            ],
        ],
    ),
    (
        "cpu-nm",
        &[
            COMMON,
            CPU,
            sources![
                "src/cpu/kernels/gemm_panels.rs",
                "src/cpu/kernels/gemv.rs",
                "src/cpu/kernels/gemv_panels.rs",
                "src/cpu/kernels/nm.rs",
                // 2:M in row pairs runs as V:N:M with V = 2 (`NmMatrix::as_row_pairs`).
                "src/cpu/kernels/vnm.rs",
                "src/format/nm.rs",
                "src/format/panels.rs",
                "src/format/row_pairs.rs",
                "src/format/vnm.rs",
            ],
        ],
    ),
    (
        "cpu-vnm",
        &[
            COMMON,
            CPU,
            sources![
                "src/cpu/kernels/gemm_panels.rs",
                "src/cpu/kernels/gemv.rs",
                "src/cpu/kernels/gemv_panels.rs",
                "src/cpu/kernels/vnm.rs",
                "src/format/panels.rs",
                "src/format/row_pairs.rs",
                "src/format/vnm.rs",
            ],
        ],
    ),
    (
        "cpu-vector",
        &[
            COMMON,
            CPU,
            sources![
                "src/cpu/kernels/gemv_vector.rs",
                "src/cpu/kernels/vector.rs",
                "src/format/vector.rs",
            ],
        ],
    ),
    (
        "cuda-vnm",
        &[
            COMMON,
            CUDA,
            sources![
                "cuda/spmm_vnm_f16.cu",
                "cuda/spmm_vnm_wgmma_f16.cu",
                "cuda/ptxas_resources.csv",
                "src/cuda/device_wgmma.rs",
                "src/cuda/pack.rs",
                "src/cuda/tensor_map.rs",
                "src/cuda/wgmma.rs",
                "src/cuda/wgmma_exclude.rs",
                "src/cuda/wgmma_launch.rs",
                "src/cuda/wgmma_reading.rs",
                "src/format/nm.rs",
                "src/format/vnm.rs",
            ],
        ],
    ),
    (
        "cuda-csr",
        &[
            COMMON,
            CUDA,
            sources!["cuda/spmm_csr_f32.cu", "src/format/csr.rs"],
        ],
    ),
    ("cuda-dense", &[COMMON, CUDA, sources!["src/cuda/blas.rs"]]),
];

/// Source files that no tuning's results depend on: re-exports, messages, the scalar reference
/// used by tests and checks, tools, the host emulator, and the stub of a build without CUDA.
pub const NOT_MEASURED: &[&str] = &[
    // Runs evaluate's host code (not a kernel) at the kernels' ISA; evaluate's version says so.
    "src/cpu/host_isa.rs",
    // The bias and activation evaluate fuses into its products; tunings run without one.
    "src/cpu/epilogue.rs",
    "src/cpu/activation.rs",
    // Evaluate's attention heads and LayerNorm on the kernels' vectors; no tuning runs them.
    "src/cpu/attention.rs",
    "src/cpu/layer_norm.rs",
    "src/lib.rs",
    // How busy the machine was while something was timed: read beside timings, never in them.
    "src/cpu_wait.rs",
    "src/error.rs",
    "src/reference.rs",
    "src/family/mod.rs",
    "src/family/normalize.rs",
    "src/family/sources.rs",
    "src/family/tests.rs",
    "src/mask/tests.rs",
    "src/cuda/cost_check.rs",
    "src/cuda/wgmma_fit.rs",
    "src/cuda/error.rs",
    "src/cuda/gpu.rs",
    "src/cuda/ptxas.rs",
    "src/cuda/random.rs",
    "src/cuda/stub.rs",
];

/// Folders whose files are never measured code (binaries, the emulator, recorded results).
pub const NOT_MEASURED_DIRS: &[&str] = &["src/bin", "cuda/emu", "cuda/results"];
