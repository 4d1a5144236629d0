//! The CUDA kernels against the CPU reference on awkward shapes. They need a GPU, so they are
//! `#[ignore]`d: `scripts/device-check.sh` runs them (`--ignored`) on a machine with one. Inputs are multiples of 1/8 (exact in fp16,
//! their products and sums exact in f32), so fp16 results must equal the reference up to the
//! final fp16 rounding, and fp32 CSR results must equal it exactly.
#![cfg(feature = "cuda")]

use kernels::cuda::{
    csr_configs, exact_values, random_csr, random_vnm, vnm_configs, vnm_from_nm, CudaDevice,
    CudaError, Gpu, VnmConfig,
};
use kernels::{spmm_reference, NmMatrix, SparseMatrix, VnmMatrix};

fn device(test: &str) -> CudaDevice {
    CudaDevice::new(0)
        .map(CudaDevice::with_env_ptx_cache)
        .unwrap_or_else(|e| panic!("{test} needs a CUDA device: {e}"))
}

fn reference(a: &SparseMatrix, b: &[f32], n: usize) -> Vec<f32> {
    let mut c = vec![0.0; a.rows() * n];
    spmm_reference(a, b, n, &mut c).unwrap();
    c
}

/// Every element within the fp16 rounding of the exact result (half an ulp, 2^-11 relative).
fn assert_fp16_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let tol = w.abs() * (1.0 / 2048.0) + 1e-6;
        assert!(
            (g - w).abs() <= tol,
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

/// Compiles `configs` on all cores at once (NVRTC is the slow part), then checks each.
fn prepare_all(dev: &CudaDevice, configs: &[VnmConfig]) {
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(16);
    let chunk = configs.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for part in configs.chunks(chunk) {
            s.spawn(move || {
                for c in part {
                    dev.prepare_vnm(c).unwrap_or_else(|e| panic!("{c}: {e}"));
                }
            });
        }
    });
}

fn check_vnm(dev: &CudaDevice, a: &VnmMatrix, n: usize, configs: &[VnmConfig], seed: u64) {
    let b = exact_values(a.cols() * n, seed);
    let want = reference(&SparseMatrix::Vnm(a.clone()), &b, n);
    for cfg in configs {
        let got = dev.spmm_vnm(a, &b, n, cfg).unwrap();
        let what = format!(
            "{}x{} V={} M={} n={n} [{cfg}]",
            a.rows(),
            a.cols(),
            a.v(),
            a.m()
        );
        assert_fp16_close(&got, &want, &what);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-check.sh runs it"]
fn vnm_every_configuration_matches_reference() {
    let dev = device("vnm_every_configuration_matches_reference");
    for (i, v) in [16, 32, 64, 128].into_iter().enumerate() {
        let configs = vnm_configs(v);
        prepare_all(&dev, &configs);
        // K not a multiple of M, n not a multiple of 8 nor of any BN.
        let a = random_vnm(2 * v, 150, v, 10, i as u64).unwrap();
        check_vnm(&dev, &a, 70, &configs, 10 + i as u64);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-check.sh runs it"]
fn vnm_matches_reference_on_awkward_shapes() {
    let dev = device("vnm_matches_reference_on_awkward_shapes");
    let shapes = [
        // rows, cols, v, m, n
        (16, 1, 16, 4, 1),
        (16, 7, 16, 5, 3),
        (32, 100, 16, 8, 9),
        (64, 257, 64, 16, 33),
        (128, 64, 32, 32, 130),
        (64, 770, 64, 40, 64),
        (128, 333, 128, 100, 17),
        (256, 768, 64, 8, 200),
    ];
    for (i, &(rows, cols, v, m, n)) in shapes.iter().enumerate() {
        let a = random_vnm(rows, cols, v, m, 100 + i as u64).unwrap();
        // Both MMA_K, both BK, shallow and deep pipelines, the first warp layout.
        let configs: Vec<VnmConfig> = vnm_configs(v)
            .into_iter()
            .filter(|c| c.stages != 3 && c.bn == 64 && c.wn == 32)
            .collect();
        assert!(!configs.is_empty());
        check_vnm(&dev, &a, n, &configs, 200 + i as u64);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-check.sh runs it"]
fn two_four_runs_as_vnm_with_m4() {
    let dev = device("two_four_runs_as_vnm_with_m4");
    use kernels::{build_mask, Pattern};
    let (rows, cols, n) = (96, 90, 40);
    let vals = exact_values(rows * cols, 7);
    let scores: Vec<f32> = vals.iter().map(|v| v.abs()).collect();
    let mask = build_mask(&Pattern::Nm { n: 2, m: 4 }, &scores, rows, cols).unwrap();
    let nm = NmMatrix::from_masked(&vals, &mask, 2, 4).unwrap();
    let a = vnm_from_nm(&nm, 32).unwrap();
    let b = exact_values(cols * n, 8);
    let want = reference(&SparseMatrix::Nm(nm), &b, n);
    for cfg in vnm_configs(32).iter().filter(|c| c.stages == 2) {
        let got = dev.spmm_vnm(&a, &b, n, cfg).unwrap();
        assert_fp16_close(&got, &want, &format!("2:4 [{cfg}]"));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-check.sh runs it"]
fn csr_every_configuration_matches_reference_exactly() {
    let dev = device("csr_every_configuration_matches_reference_exactly");
    let shapes = [
        (1, 1, 1, 1.0),
        (7, 13, 33, 0.3),
        (64, 100, 129, 0.1),
        (33, 5, 64, 0.0),
    ];
    for (i, &(rows, cols, n, density)) in shapes.iter().enumerate() {
        let a = random_csr(rows, cols, density, i as u64).unwrap();
        let b = exact_values(cols * n, 50 + i as u64);
        let want = reference(&SparseMatrix::Csr(a.clone()), &b, n);
        for cfg in csr_configs() {
            let got = dev.spmm_csr(&a, &b, n, &cfg).unwrap();
            assert_eq!(
                got, want,
                "CSR {rows}x{cols} n={n} density {density} [{cfg}]"
            );
        }
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-check.sh runs it"]
fn cublas_gemm_matches_reference() {
    let dev = device("cublas_gemm_matches_reference");
    for (i, &(rows, k, n)) in [(1, 1, 1), (17, 33, 9), (128, 96, 200)].iter().enumerate() {
        let a = exact_values(rows * k, i as u64);
        let b = exact_values(k * n, 9 + i as u64);
        let dense = kernels::DenseMatrix::new(rows, k, a.clone()).unwrap();
        let want = reference(&SparseMatrix::Dense(dense), &b, n);
        let got = dev.gemm_f16(&a, rows, k, &b, n).unwrap();
        assert_fp16_close(&got, &want, &format!("cuBLAS {rows}x{k}x{n}"));
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-check.sh runs it"]
fn mismatched_configuration_is_an_error_not_a_launch() {
    let dev = device("mismatched_configuration_is_an_error_not_a_launch");
    let a = random_vnm(64, 64, 64, 8, 1).unwrap();
    let b = exact_values(64 * 8, 2);
    let wrong_bm = vnm_configs(32)[0];
    assert!(matches!(
        dev.spmm_vnm(&a, &b, 8, &wrong_bm),
        Err(CudaError::Shape(_))
    ));
    assert!(matches!(
        dev.spmm_vnm(&a, &b[..10], 8, &vnm_configs(64)[0]),
        Err(CudaError::Shape(_))
    ));
    eprintln!("device: {}", dev.info().fingerprint());
}

/// Every pattern with a CUDA kernel runs and times through the middle point of its space, and
/// 2:4 through a point of every block height it tunes.
#[test]
#[ignore = "needs an NVIDIA GPU: scripts/device-check.sh runs it"]
fn spaces_points_run_and_time_through_dispatch() {
    let dev = device("spaces_points_run_and_time_through_dispatch");
    use kernels::cuda::cuda_space;
    use kernels::{build_mask, DenseMatrix, Pattern};
    // 128 rows: 2:4 tunes block heights 16, 32, 64 and 128.
    let (rows, cols, n) = (128, 72, 24);
    let vals = exact_values(rows * cols, 3);
    let scores: Vec<f32> = vals.iter().map(|v| v.abs()).collect();
    let nm_mask = build_mask(&Pattern::Nm { n: 2, m: 4 }, &scores, rows, cols).unwrap();
    let matrices = [
        SparseMatrix::Vnm(random_vnm(rows, cols, 32, 8, 4).unwrap()),
        SparseMatrix::Nm(NmMatrix::from_masked(&vals, &nm_mask, 2, 4).unwrap()),
        SparseMatrix::Csr(random_csr(rows, cols, 0.2, 5).unwrap()),
        SparseMatrix::Dense(DenseMatrix::new(rows, cols, vals.clone()).unwrap()),
    ];
    let b = exact_values(cols * n, 6);
    for a in &matrices {
        let space = cuda_space(&a.signature(), n);
        let points = space.points();
        assert!(!points.is_empty(), "{}: empty space", space.kernel);
        // The middle point, and for 2:4 the first point of every block height it tunes.
        let mut chosen = vec![&points[points.len() / 2]];
        let mut heights = std::collections::BTreeSet::new();
        for p in &points {
            if space.kernel == "cuda-nm24" && heights.insert(p.get("bm").unwrap()) {
                chosen.push(p);
            }
        }
        for point in chosen {
            let what = format!("{} {point:?}", space.kernel);
            let got = dev.spmm(a, &b, n, point).unwrap();
            assert_fp16_close(&got, &reference(a, &b, n), &what);
            let t = dev.measure(a, n, point, 3).unwrap();
            assert!(
                t.median_us > 0.0 && t.median_us.is_finite(),
                "{what}: {t:?}"
            );
        }
    }
}
