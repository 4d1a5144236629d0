//! Run-time compilation with NVRTC (no GPU needed: PTX, and cubins for real architectures) and
//! the on-disk cache of compiled programs keyed by digest.

use std::ffi::{c_char, CString};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::nvrtc::{result, sys};

use super::ptxas::{parse_ptxas, PtxasReport};
use super::source::{describe_defines, program_of, KernelSource};
use super::CudaError;

/// Whether libnvrtc can be loaded (checked before any NVRTC call: cudarc panics otherwise).
pub fn nvrtc_available() -> bool {
    // SAFETY: only tries to dlopen the library under its known names; no NVRTC call is made.
    unsafe { sys::is_culib_present() }
}

/// The version of the loaded NVRTC, `(major, minor)`.
pub fn nvrtc_version() -> Result<(i32, i32), CudaError> {
    if !nvrtc_available() {
        return Err(CudaError::NoNvrtc);
    }
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present (checked above); both pointers are valid for writes.
    let status = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(CudaError::Driver {
            op: "nvrtcVersion",
            reason: format!("{status:?}"),
        });
    }
    Ok((major, minor))
}

/// A program compiled by NVRTC: its PTX and, for a real architecture (`sm_90a`, not
/// `compute_90a`), the machine code NVRTC's own ptxas made of it, which a device of that
/// architecture loads as it is, without the driver compiling the PTX a second time, and
/// NVRTC's log with that ptxas's `-v` report (registers, spills, serialised `wgmma`s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compiled {
    /// The PTX (what a device of a later architecture compiles forward).
    pub ptx: String,
    /// The cubin; `None` for a virtual architecture.
    pub cubin: Option<Vec<u8>>,
    /// NVRTC's log of the compile: the front end's warnings, and for a real architecture
    /// ptxas's report.
    pub log: String,
}

impl Compiled {
    /// ptxas's report of the program's last kernel (the product: a program's helper kernels
    /// come first); `None` for a virtual architecture.
    pub fn report(&self) -> Option<PtxasReport> {
        parse_ptxas(&self.log)
    }
}

/// Whether NVRTC makes machine code for `arch`: `sm_*` targets are real, `compute_*` virtual.
fn is_real_arch(arch: &str) -> bool {
    arch.starts_with("sm_")
}

/// Compiles one configuration of a kernel to PTX for `arch` (e.g. `"sm_90"`).
pub fn compile_ptx(
    kernel: KernelSource,
    defines: &[(&'static str, usize)],
    arch: &'static str,
) -> Result<String, CudaError> {
    compile_program(kernel, defines, arch).map(|c| c.ptx)
}

/// [`compile_ptx`] of another version `text` of the kernel's source (e.g. the file at an older
/// commit): what `cuda_ptx_digest` uses to show that an edit leaves every PTX unchanged.
pub fn compile_ptx_from(
    kernel: KernelSource,
    text: &str,
    defines: &[(&'static str, usize)],
    arch: &'static str,
) -> Result<String, CudaError> {
    compile_program_from(kernel, text, defines, arch).map(|c| c.ptx)
}

/// Compiles one configuration of a kernel for `arch`: its PTX, and its cubin where `arch` is
/// real.
pub fn compile_program(
    kernel: KernelSource,
    defines: &[(&'static str, usize)],
    arch: &'static str,
) -> Result<Compiled, CudaError> {
    compile_program_from(kernel, kernel.text(), defines, arch)
}

/// [`compile_program`] of another version `text` of the kernel's source.
fn compile_program_from(
    kernel: KernelSource,
    text: &str,
    defines: &[(&'static str, usize)],
    arch: &'static str,
) -> Result<Compiled, CudaError> {
    if !nvrtc_available() {
        return Err(CudaError::NoNvrtc);
    }
    nvrtc_compile(
        &format!("{}.cu", kernel.name()),
        &program_of(text, defines),
        arch,
    )
    .map_err(|log| CudaError::Compile {
        kernel: kernel.name(),
        defines: describe_defines(defines),
        arch: arch.to_string(),
        log,
    })
}

/// An NVRTC program, destroyed on drop.
struct Program(sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by `create_program` and is destroyed only here.
        let _ = unsafe { result::destroy_program(self.0) };
    }
}

/// Compiles `src` (named `name` in messages) with the options cotune always uses; the error is
/// NVRTC's log, or what failed.
fn nvrtc_compile(name: &str, src: &str, arch: &str) -> Result<Compiled, String> {
    let src = CString::new(src).map_err(|_| "the source contains a NUL byte".to_string())?;
    let name = CString::new(name).map_err(|_| "the name contains a NUL byte".to_string())?;
    let program = Program(
        result::create_program(&src, Some(&name))
            .map_err(|e| format!("nvrtcCreateProgram: {e:?}"))?,
    );
    let mut options = vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
    ];
    if is_real_arch(arch) {
        // For the report only: the cubin is the same byte for byte with it or without.
        options.push("--ptxas-options=-v".to_string());
    }
    // SAFETY (this and the calls below): `program` is alive until the end of this function.
    if let Err(e) = unsafe { result::compile_program(program.0, &options) } {
        let log = unsafe { result::get_program_log(program.0) }
            .map(|l| c_text(&l))
            .unwrap_or_default();
        return Err(if log.trim().is_empty() {
            format!("{e:?}")
        } else {
            log
        });
    }
    let ptx = unsafe { result::get_ptx(program.0) }.map_err(|e| format!("nvrtcGetPTX: {e:?}"))?;
    let log = unsafe { result::get_program_log(program.0) }
        .map(|l| c_text(&l))
        .map_err(|e| format!("nvrtcGetProgramLog: {e:?}"))?;
    let cubin = if !is_real_arch(arch) {
        None
    } else {
        let mut size = 0usize;
        unsafe { sys::nvrtcGetCUBINSize(program.0, &mut size) }
            .result()
            .map_err(|e| format!("nvrtcGetCUBINSize: {e:?}"))?;
        let mut cubin = vec![0u8; size];
        unsafe { sys::nvrtcGetCUBIN(program.0, cubin.as_mut_ptr().cast()) }
            .result()
            .map_err(|e| format!("nvrtcGetCUBIN: {e:?}"))?;
        (size > 0).then_some(cubin)
    };
    Ok(Compiled {
        ptx: c_text(&ptx),
        cubin,
        log,
    })
}

/// The text of a NUL-terminated buffer NVRTC filled.
fn c_text(buffer: &[c_char]) -> String {
    let bytes: Vec<u8> = buffer
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Compiled programs in a folder (the engine passes `<store>/ptx/`), one per digest of
/// (program text, arch, NVRTC version): `<digest>.ptx`, NVRTC's log `<digest>.log` and, for
/// a real architecture, `<digest>.cubin`. Files are written to a temporary name and renamed
/// into place, the PTX last, so a reader never sees half a file and a PTX file means its
/// entry is whole. An entry for a real architecture without its cubin or log (written before
/// they were kept) is compiled again.
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

    /// The compiled program of this configuration: read from the cache, or compiled and stored.
    pub fn get_or_compile(
        &self,
        kernel: KernelSource,
        defines: &[(&'static str, usize)],
        arch: &'static str,
    ) -> Result<Compiled, CudaError> {
        let key = Self::key(kernel, defines, arch, nvrtc_version()?);
        let path = |ext: &str| self.dir.join(format!("{key}.{ext}"));
        if let Ok(ptx) = fs::read_to_string(path("ptx")) {
            let log = fs::read_to_string(path("log"));
            if !is_real_arch(arch) {
                return Ok(Compiled {
                    ptx,
                    cubin: None,
                    log: log.unwrap_or_default(),
                });
            }
            if let (Ok(cubin), Ok(log)) = (fs::read(path("cubin")), log) {
                return Ok(Compiled {
                    ptx,
                    cubin: Some(cubin),
                    log,
                });
            }
        }
        let compiled = compile_program(kernel, defines, arch)?;
        fs::create_dir_all(&self.dir).map_err(|e| cache_error(e, &self.dir))?;
        if let Some(cubin) = &compiled.cubin {
            self.write(&key, &path("cubin"), cubin)?;
        }
        self.write(&key, &path("log"), compiled.log.as_bytes())?;
        self.write(&key, &path("ptx"), compiled.ptx.as_bytes())?;
        Ok(compiled)
    }

    /// Writes `bytes` to `path` through a temporary file of this call (threads and processes
    /// may compile the same program at once: each renames its own file into place).
    fn write(&self, key: &str, path: &Path, bytes: &[u8]) -> Result<(), CudaError> {
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let n = WRITES.fetch_add(1, Ordering::Relaxed);
        let tmp = self
            .dir
            .join(format!(".{key}.{}.{n}.tmp", std::process::id()));
        fs::write(&tmp, bytes).map_err(|e| cache_error(e, &tmp))?;
        fs::rename(&tmp, path).map_err(|e| cache_error(e, path))
    }
}

fn cache_error(e: std::io::Error, path: &Path) -> CudaError {
    CudaError::Cache {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}
