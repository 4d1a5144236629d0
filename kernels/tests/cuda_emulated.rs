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

mod emu_support;

use std::path::Path;

use emu_support::{
    build, build_dir, check_configurations, compiler, expected, push_i64s, run_binary, run_packed,
    Copies, CUDA_DIR,
};
use kernels::cuda::{
    csr_configs, csr_device_arrays, exact_values, pack_vnm, random_csr, random_vnm, vnm_configs,
    vnm_from_nm, CsrLaunch, VnmConfig, VnmLaunch, VNM_BLOCK_ROWS,
};
use kernels::{build_mask, spmm_reference, NmMatrix, Pattern, SparseMatrix, VnmMatrix};

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
    let launch = |ld| {
        let l = VnmLaunch::new(dims, n, ld, ld, cfg).unwrap();
        let shape = [l.grid.0, l.grid.1, l.threads].map(i64::from);
        (
            l.ints.map(i64::from).to_vec(),
            vec![shape[0], shape[1], shape[2], l.shared_bytes as i64],
        )
    };
    run_packed(exe, packed, b, n, launch, copies)
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
    check_configurations(
        &configs,
        |c| c.bn,
        |c| build(&cxx, &dir, Path::new(CUDA_DIR), "run_vnm", &c.defines()),
        matrices,
        try_run,
    );
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
