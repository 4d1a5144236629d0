//! Sparse formats and SpMM kernels for cotune: the patterns of the accuracy search space, their
//! mask builders and storage formats, the CPU kernels of the performance search space with their
//! parameter spaces and cost model, and the dense baseline; also the host operations of a
//! model's pass that are written on the kernels' vectors (a transformer's attention heads and
//! LayerNorm, the activations). See DESIGN.md, "Sparse formats" and "Kernels".
#![forbid(missing_docs)]

mod calibrate;
mod cost;
mod cpu;
mod cpu_wait;
pub mod cuda;
mod dense;
mod error;
pub mod family;
mod format;
mod isa;
mod mask;
mod pattern;
mod reference;
mod space;
mod synthetic;

/// The L2 cache size the CPU kernels' row bands and the cost model assume: this CPU's (sysfs),
/// or 1 MiB where it is unknown.
pub fn l2_cache_bytes() -> usize {
    cost::l2_bytes() as usize
}

pub use calibrate::{Calibration, CalibrationSample};
pub use cost::{dense_predicted_cost, predicted_cost, regret_at_budget, spearman};
pub use cpu::{
    attention_head, attention_head_at, exp_f32, gelu_f32, layer_norm_columns,
    layer_norm_columns_at, run_host_parts, spmm, spmm_with, with_isa, Activation, Epilogue,
    HeadShape, HostOp, HostParts, LineAligned,
};
pub use cpu_wait::{cpu_wait_during, CpuWait, Waited, BUSY_SHARE};
pub use dense::{dense_gemm, dense_gemm_with};
pub use error::KernelError;
pub use family::{family_version, KernelFamily};
pub use format::{
    meta_word_shift, vnm_k_sp, vnm_meta_words, CsrMatrix, DenseMatrix, NmMatrix, SparseMatrix,
    VectorMatrix, VnmMatrix,
};
pub use isa::{available_cores, cpu_fingerprint, isa, Isa};
pub use mask::{build_mask, build_vnm_nested, Mask};
pub use pattern::{FormatSignature, Pattern, PatternKind};
pub use reference::spmm_reference;
pub use space::{
    cpu_space, dense_space, effective_point, Constraint, KernelSpace, ParamDef, ParamPoint,
};
pub use synthetic::{random_values, synthetic};
