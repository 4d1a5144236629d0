//! Kernel families: the kernel code a tuning measures, and its version.
//!
//! A tuning's key covers the digests of the families it measured (the format's kernel and the
//! dense baseline), computed from the texts of those families' source files compiled into the
//! crate, with comments and formatting removed ([`normalize`]). Editing one kernel therefore re-tunes only the tunings
//! that measured it, and editing a comment re-tunes nothing. Which files belong to which family
//! is one table, [`sources::FAMILY_SOURCES`]; a test fails when a source file is in no family
//! and not listed as unmeasured.

pub mod normalize;
pub mod sources;

use keytag::Tagged;
use std::collections::BTreeMap;
use std::sync::OnceLock;

keytag::tagged_enum! {
    /// A family of kernels that tunings measure.
    pub enum KernelFamily {
        /// The CPU dense baseline (the faster of `faer` and `gemm` per shape).
        CpuDense = "cpu-dense",
        /// The CPU CSR kernel (unstructured).
        CpuCsr = "cpu-csr",
        /// The CPU N:M kernel.
        CpuNm = "cpu-nm",
        /// The CPU V:N:M kernel.
        CpuVnm = "cpu-vnm",
        /// The CPU vector-wise kernel.
        CpuVector = "cpu-vector",
        /// The CUDA V:N:M kernel on sparse tensor cores (2:4 too).
        CudaVnm = "cuda-vnm",
        /// The CUDA CSR kernel (every format the tensor-core kernel does not run).
        CudaCsr = "cuda-csr",
        /// The CUDA dense baseline (cuBLAS fp16).
        CudaDense = "cuda-dense",
    }
}

impl KernelFamily {
    /// The digest of the family's sources this crate was built from (16 hex digits), computed
    /// once per process from their compiled-in texts.
    pub fn digest(self) -> &'static str {
        static BUILT: OnceLock<BTreeMap<KernelFamily, String>> = OnceLock::new();
        BUILT
            .get_or_init(|| {
                KernelFamily::ALL
                    .iter()
                    .map(|&f| (f, normalize::family_digest(f.texts())))
                    .collect()
            })
            .get(&self)
            .map_or("unknown", String::as_str)
    }

    /// The family's source files, relative to the crate.
    pub fn sources(self) -> Vec<&'static str> {
        self.texts().map(|(path, _)| path).collect()
    }

    /// The family's source files with their texts as this crate was compiled.
    fn texts(self) -> impl Iterator<Item = (&'static str, &'static str)> {
        sources::FAMILY_SOURCES
            .iter()
            .filter(move |(tag, _)| *tag == self.tag())
            .flat_map(|(_, groups)| groups.iter().flat_map(|g| g.iter().copied()))
    }
}

/// The version string a tuning's key covers: `tag:digest` of each family, joined by `+`.
pub fn family_version(families: &[KernelFamily]) -> String {
    family_version_with(families, |f| f.digest().to_owned())
}

/// [`family_version`] with the digests from elsewhere (tests compute them from edited sources).
pub fn family_version_with(
    families: &[KernelFamily],
    digest: impl Fn(KernelFamily) -> String,
) -> String {
    families
        .iter()
        .map(|&f| format!("{}:{}", f.tag(), digest(f)))
        .collect::<Vec<_>>()
        .join("+")
}

/// Every family's digest computed from source texts (`read` gives a file's text by its path
/// relative to the crate), as [`KernelFamily::digest`] computes them from the compiled-in texts.
pub fn digests_from<E>(
    mut read: impl FnMut(&str) -> Result<String, E>,
) -> Result<BTreeMap<KernelFamily, String>, E> {
    let mut out = BTreeMap::new();
    for &family in KernelFamily::ALL {
        let files = family.sources();
        let texts = files
            .iter()
            .map(|f| Ok((*f, read(f)?)))
            .collect::<Result<Vec<_>, E>>()?;
        let digest = normalize::family_digest(texts.iter().map(|(f, t)| (*f, t.as_str())));
        out.insert(family, digest);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
