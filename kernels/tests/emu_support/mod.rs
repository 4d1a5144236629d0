//! What the emulator tests share: the C++ compiler, the build of an emulator binary per
//! configuration, and the run of a V:N:M kernel's launch on packed arrays.
#![allow(dead_code)] // each test binary uses its part

pub mod wgmma_configs;

use std::fmt::Display;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kernels::cuda::{exact_values, f16_device_layout, from_f16_bits, VnmPacked};
use kernels::{spmm_reference, SparseMatrix, VnmMatrix};

pub const CUDA_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/cuda");

/// The C++ compiler (`$CXX`, else `c++`).
pub fn compiler(test: &str) -> String {
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let works = Command::new(&cxx)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        works,
        "{test}: the emulator needs a C++20 compiler: no `{cxx}` (install g++, or set CXX)"
    );
    cxx
}

/// A folder per version of the kernel and emulator sources, so that an edit rebuilds; the
/// folders of other versions are removed.
pub fn build_dir() -> PathBuf {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for f in [
        "spmm_vnm_f16.cu",
        "spmm_csr_f32.cu",
        "spmm_vnm_wgmma_f16.cu",
        "emu/emu.h",
        "emu/sm90.h",
        "emu/run_vnm.cpp",
        "emu/run_csr.cpp",
        "emu/run_wgmma.cpp",
    ] {
        std::fs::read(format!("{CUDA_DIR}/{f}"))
            .unwrap()
            .hash(&mut h);
    }
    let name = format!("cuda-emu-{:016x}", h.finish());
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
    for old in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let other = old.file_name().to_string_lossy().into_owned();
        if other.starts_with("cuda-emu-") && other != name {
            let _ = std::fs::remove_dir_all(old.path());
        }
    }
    root.join(name)
}

/// Whether binaries built with AddressSanitizer run here (some kernels' address-space layouts
/// defeat older sanitizer runtimes); without it the emulator still checks everything else.
fn sanitizer_works(cxx: &str, dir: &Path) -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        std::fs::create_dir_all(dir).unwrap();
        let (src, exe) = (dir.join("asan_probe.cpp"), dir.join("asan_probe"));
        std::fs::write(&src, "int main() { return 0; }\n").unwrap();
        let built = Command::new(cxx)
            .args(["-fsanitize=address", "-o"])
            .arg(&exe)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        let runs = built && Command::new(&exe).status().is_ok_and(|s| s.success());
        if !runs {
            eprintln!("AddressSanitizer does not run here: the emulator is built without it");
        }
        runs
    })
}

/// The emulator binary of `harness` (`run_vnm`, `run_wgmma` or `run_csr`) with `defines`, built on first use
/// from the sources under `root` (`kernels/cuda`, or a mutant's copy).
pub fn build(
    cxx: &str,
    dir: &Path,
    root: &Path,
    harness: &str,
    defines: &[(&'static str, usize)],
) -> PathBuf {
    let name: String = std::iter::once(harness.to_string())
        .chain(defines.iter().map(|(k, v)| format!("{k}{v}")))
        .collect::<Vec<_>>()
        .join("_");
    let exe = dir.join(&name);
    if exe.exists() {
        return exe;
    }
    std::fs::create_dir_all(dir).unwrap();
    let tmp = dir.join(format!("{name}.tmp{}", std::process::id()));
    let mut cmd = Command::new(cxx);
    cmd.args(["-std=c++20", "-O1", "-g", "-pthread"]);
    if sanitizer_works(cxx, dir) {
        cmd.args(["-fsanitize=address", "-fno-omit-frame-pointer"]);
    }
    for (k, v) in defines {
        cmd.arg(format!("-D{k}={v}"));
    }
    let out = cmd
        .arg(root.join(format!("emu/{harness}.cpp")))
        .arg("-o")
        .arg(&tmp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name}: the emulator does not build:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&tmp, &exe).unwrap();
    exe
}

/// Runs `exe` on `input`, returning its output file, or what it printed when it failed.
pub fn try_run_binary(exe: &Path, input: &[u8]) -> Result<Vec<u8>, String> {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let id = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = |ext: &str| exe.with_extension(format!("{}-{id}.{ext}", std::process::id()));
    let (inp, outp) = (file("in"), file("out"));
    std::fs::write(&inp, input).unwrap();
    let out = Command::new(exe).arg(&inp).arg(&outp).output().unwrap();
    let raw = std::fs::read(&outp);
    let _ = (std::fs::remove_file(&inp), std::fs::remove_file(&outp));
    match raw {
        Ok(raw) if out.status.success() => Ok(raw),
        _ => Err(String::from_utf8_lossy(&out.stderr).into_owned()),
    }
}

/// [`try_run_binary`], failing the test with `what` and the emulator's message.
pub fn run_binary(exe: &Path, input: &[u8], what: &str) -> Vec<u8> {
    try_run_binary(exe, input)
        .unwrap_or_else(|e| panic!("{what}: the emulated kernel failed:\n{e}"))
}

/// When cp.async copies land.
#[derive(Debug, Clone, Copy)]
pub enum Copies {
    /// At the latest `cp.async.wait_group` that covers them.
    Lazy = 0,
    /// At issue.
    Eager = 1,
}

pub fn push_i64s(out: &mut Vec<u8>, xs: impl IntoIterator<Item = i64>) {
    for x in xs {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

/// The reference product rounded to fp16, as the kernel stores it.
pub fn expected(a: &VnmMatrix, b: &[f32], n: usize) -> Vec<f32> {
    let mut c = vec![0.0; a.rows() * n];
    spmm_reference(&SparseMatrix::Vnm(a.clone()), b, n, &mut c).unwrap();
    from_f16_bits(&kernels::cuda::to_f16_bits(&c))
}

/// C = A·B through an emulated V:N:M kernel binary (`b` is `a.cols() × n` row-major), as f32,
/// or what the emulator reported. `launch` gives, for the row stride of B and C, the kernel's
/// integer arguments and the launch's shape (grid, threads, shared bytes, …: what the harness
/// reads before the copy timing); the arrays follow as uploaded (see run_vnm.cpp).
pub fn run_packed(
    exe: &Path,
    packed: VnmPacked,
    b: &[f32],
    n: usize,
    launch: impl FnOnce(usize) -> (Vec<i64>, Vec<i64>),
    copies: Copies,
) -> Result<Vec<f32>, String> {
    let (rows, cols) = (packed.dims.rows, packed.dims.cols);
    let (ld, b16) = f16_device_layout(b, cols, n);
    let (ints, shape) = launch(ld);
    let (values, meta, col_loc) = packed.device_arrays();
    let c = vec![0u16; (rows * ld).max(1)];
    let mut input = vec![];
    push_i64s(&mut input, ints);
    push_i64s(&mut input, shape.into_iter().chain([copies as i64]));
    let counts = [values.len(), meta.len(), col_loc.len(), b16.len(), c.len()];
    push_i64s(&mut input, counts.map(|x| x as i64));
    input.extend(values.iter().flat_map(|x| x.to_le_bytes()));
    input.extend(meta.iter().flat_map(|x| x.to_le_bytes()));
    input.extend(&col_loc);
    input.extend(b16.iter().flat_map(|x| x.to_le_bytes()));
    input.extend(c.iter().flat_map(|x| x.to_le_bytes()));
    let raw = try_run_binary(exe, &input)?;
    let bits: Vec<u16> = raw
        .chunks_exact(2)
        .map(|p| u16::from_le_bytes([p[0], p[1]]))
        .collect();
    Ok((0..rows)
        .flat_map(|r| from_f16_bits(&bits[r * ld..][..n]))
        .collect())
}

/// Checks every configuration, spread over the machine's cores: the `i`-th runs on
/// `matrices(cfg, i)` times a B of `bn(cfg) + 12` columns (a partial column tile whose width is
/// not a multiple of 8), with both copy timings, through `run` on the binary `exe_of(cfg)`;
/// every result must equal the reference rounded to fp16 bit for bit.
pub fn check_configurations<C: Sync + Display>(
    configs: &[C],
    bn: impl Fn(&C) -> usize + Sync,
    exe_of: impl Fn(&C) -> PathBuf + Sync,
    matrices: impl Fn(&C, usize) -> Vec<VnmMatrix> + Sync,
    run: impl Fn(&Path, &VnmMatrix, &[f32], usize, &C, Copies) -> Result<Vec<f32>, String> + Sync,
) {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let chunk = configs.len().div_ceil(workers).max(1);
    std::thread::scope(|s| {
        for (w, part) in configs.chunks(chunk).enumerate() {
            let (bn, exe_of, matrices, run) = (&bn, &exe_of, &matrices, &run);
            s.spawn(move || {
                for (j, cfg) in part.iter().enumerate() {
                    let i = w * chunk + j;
                    let exe = exe_of(cfg);
                    for a in matrices(cfg, i) {
                        let n = bn(cfg) + 12;
                        let b = exact_values(a.cols() * n, 100 + i as u64);
                        let want = expected(&a, &b, n);
                        for copies in [Copies::Lazy, Copies::Eager] {
                            let what = format!(
                                "{cfg} ({copies:?} copies) on {}x{} V={} M={}, n={n}",
                                a.rows(),
                                a.cols(),
                                a.v(),
                                a.m()
                            );
                            let got = run(&exe, &a, &b, n, cfg, copies).unwrap_or_else(|e| {
                                panic!("{what}: the emulated kernel failed:\n{e}")
                            });
                            if let Some(k) = got.iter().zip(&want).position(|(g, w)| g != w) {
                                panic!("{what}: element {k}: got {}, want {}", got[k], want[k]);
                            }
                        }
                    }
                }
            });
        }
    });
}
