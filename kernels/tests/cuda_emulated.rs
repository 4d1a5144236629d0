//! The CUDA kernels' own sources (`kernels/cuda/*.cu`) run on the CPU by the host emulator in
//! `kernels/cuda/emu/`: no GPU needed, so CI checks what the kernels compute, not only that
//! they compile. Each configuration is built with a C++20 compiler (`$CXX`, else
//! `c++`) and AddressSanitizer (where it runs), launched as `CudaDevice::launch_vnm` launches it
//! ([`VnmLaunch`], the same packed arrays), with cp.async copies landing as late as the
//! pipeline's waits allow and again at issue, and compared bit for bit with the CPU
//! reference rounded to fp16 (inputs are multiples of 1/16, so every sum is exact). The CSR
//! kernel runs every configuration ([`CsrLaunch`]) and must equal the f32 reference exactly.
//!
//! A C++ compiler is a requirement of the test suite (`g++` or `clang++`; without one these
//! tests fail and say so). By default a covering set of configurations
//! runs (every parameter value at every V, every MMA_K × STAGES); `COTUNE_EMULATE_ALL=1` runs
//! all of them, for sessions that change the kernel without a GPU.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use kernels::cuda::{
    csr_configs, csr_device_arrays, exact_values, f16_device_layout, from_f16_bits, pack_vnm,
    random_csr, random_vnm, vnm_configs, vnm_from_nm, CsrLaunch, VnmConfig, VnmLaunch,
    VNM_BLOCK_ROWS,
};
use kernels::{build_mask, spmm_reference, NmMatrix, Pattern, SparseMatrix, VnmMatrix};

const CUDA_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/cuda");

/// The C++ compiler (`$CXX`, else `c++`).
fn compiler(test: &str) -> String {
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
fn build_dir() -> PathBuf {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for f in [
        "spmm_vnm_f16.cu",
        "spmm_csr_f32.cu",
        "emu/emu.h",
        "emu/run_vnm.cpp",
        "emu/run_csr.cpp",
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

/// The emulator binary of `harness` (`run_vnm` or `run_csr`) with `defines`, built on first use
/// from the sources under `root` (`kernels/cuda`, or a mutant's copy).
fn build(
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
fn try_run_binary(exe: &Path, input: &[u8]) -> Result<Vec<u8>, String> {
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
fn run_binary(exe: &Path, input: &[u8], what: &str) -> Vec<u8> {
    try_run_binary(exe, input)
        .unwrap_or_else(|e| panic!("{what}: the emulated kernel failed:\n{e}"))
}

/// When cp.async copies land.
#[derive(Debug, Clone, Copy)]
enum Copies {
    /// At the latest `cp.async.wait_group` that covers them.
    Lazy = 0,
    /// At issue.
    Eager = 1,
}

fn push_i64s(out: &mut Vec<u8>, xs: impl IntoIterator<Item = i64>) {
    for x in xs {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

/// C = A·B through the emulated kernel (`b` is `a.cols() × n` row-major), as f32, or what the
/// emulator reported.
fn try_run(
    exe: &Path,
    a: &VnmMatrix,
    b: &[f32],
    n: usize,
    cfg: &VnmConfig,
    copies: Copies,
) -> Result<Vec<f32>, String> {
    let packed = pack_vnm(a, cfg.bk).unwrap();
    let dims = packed.dims;
    let (ld, b16) = f16_device_layout(b, a.cols(), n);
    let launch = VnmLaunch::new(dims, n, ld, ld, cfg).unwrap();
    let (values, meta, col_loc) = packed.device_arrays();
    let c = vec![0u16; (a.rows() * ld).max(1)];
    let mut input = vec![];
    push_i64s(&mut input, launch.ints.map(i64::from));
    push_i64s(
        &mut input,
        [
            launch.grid.0 as i64,
            launch.grid.1 as i64,
            launch.threads as i64,
            launch.shared_bytes as i64,
            copies as i64,
        ],
    );
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
    Ok((0..a.rows())
        .flat_map(|r| from_f16_bits(&bits[r * ld..][..n]))
        .collect())
}

/// The reference product rounded to fp16, as the kernel stores it.
fn expected(a: &VnmMatrix, b: &[f32], n: usize) -> Vec<f32> {
    let mut c = vec![0.0; a.rows() * n];
    spmm_reference(&SparseMatrix::Vnm(a.clone()), b, n, &mut c).unwrap();
    from_f16_bits(&kernels::cuda::to_f16_bits(&c))
}

/// A few configurations per V covering every value of every parameter, and every MMA_K ×
/// STAGES pair, or all of them with `COTUNE_EMULATE_ALL=1`.
fn configurations() -> Vec<VnmConfig> {
    let all = std::env::var("COTUNE_EMULATE_ALL").is_ok_and(|v| v == "1");
    let mut out = vec![];
    for v in VNM_BLOCK_ROWS {
        let configs = vnm_configs(v);
        if all {
            out.extend(configs);
            continue;
        }
        let mut i = 0;
        for mma_k in [16, 32] {
            for stages in [2, 3, 4] {
                let same: Vec<&VnmConfig> = configs
                    .iter()
                    .filter(|c| c.mma_k == mma_k && c.stages == stages)
                    .collect();
                // Step through the tile shapes with a stride coprime to their count.
                out.push(*same[(i * 5 + v / 16) % same.len()]);
                i += 1;
            }
        }
    }
    out
}

/// The matrices a configuration is checked on: two row blocks, K not a multiple of M and
/// long enough for 3+ k-tiles, n leaving a partial column tile that is not a multiple of 8.
fn matrices(cfg: &VnmConfig, i: usize) -> Vec<VnmMatrix> {
    let v = cfg.bm;
    let m = [8, 10, 20][i % 3];
    let k = (3 * cfg.bk / 4 + 1) * m - 3;
    let mut out = vec![random_vnm(2 * v, k, v, m, i as u64).unwrap()];
    if i.is_multiple_of(4) {
        // 2:4 as V:N:M with M = 4, the way cuda-nm24 runs it.
        let cols = 3 * cfg.bk / 4 * 4 + 2;
        let vals = exact_values(2 * v * cols, i as u64 + 7);
        let scores: Vec<f32> = vals.iter().map(|x| x.abs()).collect();
        let mask = build_mask(&Pattern::Nm { n: 2, m: 4 }, &scores, 2 * v, cols).unwrap();
        let nm = NmMatrix::from_masked(&vals, &mask, 2, 4).unwrap();
        out.push(vnm_from_nm(&nm, v).unwrap());
    }
    out
}

#[test]
fn the_kernel_source_computes_the_reference_on_the_emulator() {
    let cxx = compiler("the_kernel_source_computes_the_reference_on_the_emulator");
    let dir = build_dir();
    let configs = configurations();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let chunk = configs.len().div_ceil(workers);
    std::thread::scope(|s| {
        for (w, part) in configs.chunks(chunk).enumerate() {
            let (cxx, dir) = (&cxx, &dir);
            s.spawn(move || {
                for (j, cfg) in part.iter().enumerate() {
                    let i = w * chunk + j;
                    let exe = build(cxx, dir, Path::new(CUDA_DIR), "run_vnm", &cfg.defines());
                    for a in matrices(cfg, i) {
                        let n = cfg.bn + 12;
                        let b = exact_values(a.cols() * n, 100 + i as u64);
                        let want = expected(&a, &b, n);
                        for copies in [Copies::Lazy, Copies::Eager] {
                            let got = try_run(&exe, &a, &b, n, cfg, copies).unwrap_or_else(|e| {
                                panic!(
                                    "{cfg} ({copies:?} copies) on {}x{} V={} M={}, n={n}: the \
                                     emulated kernel failed:\n{e}",
                                    a.rows(),
                                    a.cols(),
                                    a.v(),
                                    a.m()
                                )
                            });
                            let bad = got.iter().zip(&want).position(|(g, w)| g != w);
                            assert!(
                                bad.is_none(),
                                "{cfg} ({copies:?}) on {}x{} V={} M={}: element {:?}: got {}, want {}",
                                a.rows(),
                                a.cols(),
                                a.v(),
                                a.m(),
                                bad,
                                got[bad.unwrap()],
                                want[bad.unwrap()]
                            );
                        }
                    }
                }
            });
        }
    });
    eprintln!("{} configurations agree on the emulator", configs.len());
}

#[test]
fn the_covering_set_has_every_parameter_value_at_every_v() {
    if std::env::var("COTUNE_EMULATE_ALL").is_ok_and(|v| v == "1") {
        return;
    }
    let chosen = configurations();
    for v in VNM_BLOCK_ROWS {
        let mine: Vec<&VnmConfig> = chosen.iter().filter(|c| c.bm == v).collect();
        for c in vnm_configs(v) {
            for (name, value) in c.defines() {
                let covered = mine
                    .iter()
                    .any(|m| m.defines().iter().any(|&(k, x)| k == name && x == value));
                assert!(
                    covered,
                    "V={v}: no emulated configuration has {name}={value}"
                );
            }
        }
    }
}

#[test]
fn the_csr_kernel_source_matches_the_reference_exactly_on_the_emulator() {
    let cxx = compiler("the_csr_kernel_source_matches_the_reference_exactly_on_the_emulator");
    let dir = build_dir();
    // Rows not a multiple of the warps per block, n around 32 · cols per lane, an empty row
    // set (density 0) and a full one.
    let shapes = [
        (1, 1, 1, 1.0),
        (7, 13, 33, 0.3),
        (37, 100, 129, 0.1),
        (9, 5, 64, 0.0),
    ];
    for cfg in csr_configs() {
        let exe = build(&cxx, &dir, Path::new(CUDA_DIR), "run_csr", &cfg.defines());
        for (i, &(rows, cols, n, density)) in shapes.iter().enumerate() {
            let a = random_csr(rows, cols, density, i as u64).unwrap();
            let b = exact_values(cols * n, 50 + i as u64);
            let mut want = vec![0.0; rows * n];
            spmm_reference(&SparseMatrix::Csr(a.clone()), &b, n, &mut want).unwrap();
            let launch = CsrLaunch::new(rows, n, &cfg).unwrap();
            let (row_ptr, col_idx, values) = csr_device_arrays(&a).unwrap();
            // As uploaded: B and C with one trailing element.
            let b_dev: Vec<f32> = b.iter().copied().chain([0.0]).collect();
            let c_dev = vec![0.0f32; rows * n + 1];
            let mut input = vec![];
            push_i64s(&mut input, launch.ints.map(i64::from));
            push_i64s(
                &mut input,
                [launch.grid.0, launch.grid.1, launch.threads].map(i64::from),
            );
            let counts = [
                row_ptr.len(),
                col_idx.len(),
                values.len(),
                b_dev.len(),
                c_dev.len(),
            ];
            push_i64s(&mut input, counts.map(|x| x as i64));
            input.extend(row_ptr.iter().flat_map(|x| x.to_le_bytes()));
            input.extend(col_idx.iter().flat_map(|x| x.to_le_bytes()));
            input.extend(values.iter().flat_map(|x| x.to_le_bytes()));
            input.extend(b_dev.iter().flat_map(|x| x.to_le_bytes()));
            input.extend(c_dev.iter().flat_map(|x| x.to_le_bytes()));
            let what = format!("CSR {rows}x{cols} n={n} density {density} [{cfg}]");
            let raw = run_binary(&exe, &input, &what);
            let got: Vec<f32> = raw
                .chunks_exact(4)
                .map(|p| f32::from_le_bytes([p[0], p[1], p[2], p[3]]))
                .take(rows * n)
                .collect();
            assert_eq!(got, want, "{what}");
        }
    }
}

/// What makes the tests above able to fail: kernels one edit away from the real one, with a
/// pipeline race or the wrong metadata lane, must fail on the emulator.
#[test]
fn the_emulator_rejects_a_broken_kernel() {
    let cxx = compiler("the_emulator_rejects_a_broken_kernel");
    let dir = build_dir();
    // (name, text, replacement, copy timings that must expose it)
    let mutants = [
        // Reads a stage before the copies filling it have landed: only lazy copies are late.
        (
            "early-read",
            "cp_async_wait<STAGES - 2>();",
            "cp_async_wait<STAGES - 1>();",
            &[Copies::Lazy][..],
        ),
        // Every thread of a quad passes the metadata of the first 16 columns.
        (
            "one-metadata-lane",
            "kk * 2 + (quad & 1)",
            "kk * 2",
            &[Copies::Lazy, Copies::Eager][..],
        ),
    ];
    let cfg = *vnm_configs(64)
        .iter()
        .find(|c| c.mma_k == 32 && c.stages == 3)
        .unwrap();
    let a = random_vnm(128, 300, 64, 8, 9).unwrap();
    let n = cfg.bn + 12;
    let b = exact_values(a.cols() * n, 10);
    let want = expected(&a, &b, n);
    let kernel = std::fs::read_to_string(format!("{CUDA_DIR}/spmm_vnm_f16.cu")).unwrap();
    for (name, from, to, timings) in mutants {
        assert_eq!(
            kernel.matches(from).count(),
            1,
            "{name}: `{from}` is not in the kernel once"
        );
        let root = dir.join(format!("mutant-{name}"));
        std::fs::create_dir_all(root.join("emu")).unwrap();
        for f in ["emu/emu.h", "emu/run_vnm.cpp"] {
            std::fs::copy(format!("{CUDA_DIR}/{f}"), root.join(f)).unwrap();
        }
        std::fs::write(root.join("spmm_vnm_f16.cu"), kernel.replace(from, to)).unwrap();
        let exe = build(&cxx, &root, &root, "run_vnm", &cfg.defines());
        for &copies in timings {
            let noticed = try_run(&exe, &a, &b, n, &cfg, copies).map_or(true, |got| got != want);
            assert!(
                noticed,
                "{name} ({copies:?} copies): the emulator did not notice"
            );
        }
    }
}
