//! The CUDA C++ sources (one `.cu` per kernel family, named `{op}_{dtype}`) and how a
//! configuration turns into one NVRTC program: its `#define`s prepended to the source text,
//! so that the program text alone determines the PTX.

/// A kernel family compiled at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KernelSource {
    /// V:N:M (and 2:4) SpMM on sparse tensor cores, fp16 in, fp32 accumulate, fp16 out.
    SpmmVnmF16,
    /// V:N:M (and 2:4) SpMM on Hopper's sparse warpgroup MMA (`wgmma.mma_async.sp`, sm_90a).
    SpmmVnmWgmmaF16,
    /// CSR row-split SpMM in fp32.
    SpmmCsrF32,
}

impl KernelSource {
    /// The `extern "C"` entry point, also the `.cu` file's stem.
    pub fn name(self) -> &'static str {
        match self {
            KernelSource::SpmmVnmF16 => "spmm_vnm_f16",
            KernelSource::SpmmVnmWgmmaF16 => "spmm_vnm_wgmma_f16",
            KernelSource::SpmmCsrF32 => "spmm_csr_f32",
        }
    }

    /// The source text, embedded at build time.
    pub fn text(self) -> &'static str {
        match self {
            KernelSource::SpmmVnmF16 => include_str!("../../cuda/spmm_vnm_f16.cu"),
            KernelSource::SpmmVnmWgmmaF16 => include_str!("../../cuda/spmm_vnm_wgmma_f16.cu"),
            KernelSource::SpmmCsrF32 => include_str!("../../cuda/spmm_csr_f32.cu"),
        }
    }

    /// The program NVRTC compiles: one `#define NAME value` line per parameter, then the source.
    pub fn program(self, defines: &[(&'static str, usize)]) -> String {
        program_of(self.text(), defines)
    }
}

/// The program of source `text` (this kernel's, or another version of it) with `defines`.
pub fn program_of(text: &str, defines: &[(&'static str, usize)]) -> String {
    let mut s = String::new();
    for (name, value) in defines {
        s.push_str(&format!("#define {name} {value}\n"));
    }
    s.push_str(text);
    s
}

/// `NAME=value` pairs separated by spaces, for messages.
pub fn describe_defines(defines: &[(&'static str, usize)]) -> String {
    defines
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}
