//! Run-time compilation with NVRTC (no GPU needed) and the on-disk PTX cache keyed by digest.

use std::fs;
use std::path::{Path, PathBuf};

use cudarc::nvrtc::{self, CompileError, CompileOptions};

use super::source::{describe_defines, program_of, KernelSource};
use super::CudaError;

/// Whether libnvrtc can be loaded (checked before any NVRTC call: cudarc panics otherwise).
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to dlopen the library under its known names; no NVRTC call is made.
    unsafe { nvrtc::sys::is_culib_present() }
}

/// The version of the loaded NVRTC, `(major, minor)`.
pub fn nvrtc_version() -> Result<(i32, i32), CudaError> {
    if !nvrtc_available() {
        return Err(CudaError::NoNvrtc);
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present (checked above); both pointers are valid for writes.
    let status = unsafe { nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    if status != nvrtc::sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(CudaError::Driver {
            op: "nvrtcVersion",
            reason: format!("{status:?}"),
        });
    }
    Ok((major, minor))
}

/// Compiles one configuration of a kernel to PTX for `arch` (e.g. `"sm_90"`).
pub fn compile_ptx(
    kernel: KernelSource,
    defines: &[(&'static str, usize)],
    arch: &'static str,
) -> Result<String, CudaError> {
    compile_ptx_from(kernel, kernel.text(), defines, arch)
}

/// [`compile_ptx`] of another version `text` of the kernel's source (e.g. the file at an older
/// commit): what `cuda_ptx_digest` uses to show that an edit leaves every PTX unchanged.
pub fn compile_ptx_from(
    kernel: KernelSource,
    text: &str,
    defines: &[(&'static str, usize)],
    arch: &'static str,
) -> Result<String, CudaError> {
    if !nvrtc_available() {
        return Err(CudaError::NoNvrtc);
    }
    let opts = CompileOptions {
        arch: Some(arch),
        name: Some(format!("{}.cu", kernel.name())),
        options: vec!["--std=c++17".into()],
        ..Default::default()
    };
    match nvrtc::compile_ptx_with_opts(program_of(text, defines), opts) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(e) => Err(CudaError::Compile {
            kernel: kernel.name(),
            defines: describe_defines(defines),
            arch: arch.to_string(),
            log: match e {
                CompileError::CompileError { log, .. } => log.to_string_lossy().into_owned(),
                other => format!("{other:?}"),
            },
        }),
    }
}

/// PTX files in a folder (the engine passes `<store>/ptx/`), one per digest of (program text,
/// arch, NVRTC version). Files are written to a temporary name and renamed into place, so a
/// reader never sees half a file; a file is never rewritten.
#[derive(Debug, Clone)]
pub struct PtxCache {
    dir: PathBuf,
}

impl PtxCache {
    /// A cache in `dir` (created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cache key: blake3 over length-prefixed program text, arch and NVRTC version.
    pub fn key(
        kernel: KernelSource,
        defines: &[(&'static str, usize)],
        arch: &str,
        nvrtc: (i32, i32),
    ) -> String {
        let mut h = blake3::Hasher::new();
        for part in [
            kernel.program(defines).as_bytes(),
            arch.as_bytes(),
            format!("{}.{}", nvrtc.0, nvrtc.1).as_bytes(),
        ] {
            h.update(&(part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.finalize().to_hex().to_string()
    }

    /// The PTX of this configuration: read from the cache, or compiled and stored.
    pub fn get_or_compile(
        &self,
        kernel: KernelSource,
        defines: &[(&'static str, usize)],
        arch: &'static str,
    ) -> Result<String, CudaError> {
        let key = Self::key(kernel, defines, arch, nvrtc_version()?);
        let path = self.dir.join(format!("{key}.ptx"));
        if let Ok(text) = fs::read_to_string(&path) {
            return Ok(text);
        }
        let ptx = compile_ptx(kernel, defines, arch)?;
        let io = |e: std::io::Error, p: &Path| CudaError::Cache {
            path: p.display().to_string(),
            reason: e.to_string(),
        };
        fs::create_dir_all(&self.dir).map_err(|e| io(e, &self.dir))?;
        let tmp = self.dir.join(format!(".{key}.{}.tmp", std::process::id()));
        fs::write(&tmp, &ptx).map_err(|e| io(e, &tmp))?;
        fs::rename(&tmp, &path).map_err(|e| io(e, &path))?;
        Ok(ptx)
    }
}
