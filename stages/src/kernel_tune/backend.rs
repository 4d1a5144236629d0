//! Which kernels a tuning measures, and the tuning of one spec on its backend.

use super::{cpu::tune_cpu, cuda, TuneSpec, Tuned};
use crate::StageError;
use kernels::{KernelFamily, Pattern};

keytag::tagged_enum! {
    /// Which kernels a tuning measures.
    #[derive(Default)]
    pub enum Backend {
        /// The CPU kernels of [`kernels`] (f32).
        #[default]
        Cpu = "cpu",
        /// The CUDA kernels of [`kernels::cuda`] on the process's device ([`cuda::shared_device`]).
        Cuda = "cuda",
    }
}

/// The kernel families a tuning of `pattern` at `rows × cols` on `backend` measures: the
/// format's kernel (on CUDA, the CSR kernel for a format the tensor-core kernel does not run)
/// and the dense baseline that every tuning also measures.
pub fn families(
    backend: Backend,
    pattern: &Pattern,
    rows: usize,
    cols: usize,
) -> Vec<KernelFamily> {
    use kernels::PatternKind as K;
    let (sparse, dense) = match backend {
        Backend::Cpu => (
            match pattern.kind() {
                K::Dense => KernelFamily::CpuDense,
                K::Unstructured => KernelFamily::CpuCsr,
                K::Nm => KernelFamily::CpuNm,
                K::Vnm => KernelFamily::CpuVnm,
                K::Vector => KernelFamily::CpuVector,
            },
            KernelFamily::CpuDense,
        ),
        Backend::Cuda => (cuda::family(pattern, rows, cols), KernelFamily::CudaDense),
    };
    if sparse == dense {
        vec![dense]
    } else {
        vec![sparse, dense]
    }
}

/// Tunes one signature on the spec's backend. The caller holds the per-host measurement lock
/// around this call.
pub fn tune(spec: &TuneSpec) -> Result<Tuned, StageError> {
    match spec.backend {
        Backend::Cpu => tune_cpu(spec),
        Backend::Cuda => {
            let dev = cuda::shared_device().map_err(|e| StageError::Cuda(e.to_string()))?;
            cuda::tune_cuda(spec, dev)
        }
    }
}
