//! What the device benchmarks (`cuda_bench.rs`, `cuda_bench_wgmma.rs`) share: timing
//! constants, the CSV of every measurement, the error against cuBLAS, the environment's point
//! lists, the run's setup, and each point's operands, cuBLAS baseline and reference product.
#![allow(dead_code)] // each benchmark uses its part

pub mod wgmma;

use std::fmt::Write as _;
use std::time::Instant;

use kernels::cuda::{exact_values, CudaDevice, CudaError, DeviceMatrixF16, Gpu, Timing, VnmConfig};
use kernels::VnmMatrix;

pub const WARMUP: usize = 5;
/// Samples per measurement; each sample times BATCH back-to-back launches.
pub const REPS: usize = 7;
pub const BATCH: usize = 10;
/// Operand sets rotated between repetitions, so that B and C do not stay in the 60 MB L2.
pub const SETS: usize = 2;

/// A screening pass times every configuration briefly (one warm-up launch, one sample of
/// SCREEN_BATCH launches); the FINALISTS fastest are then timed in full (WARMUP, REPS samples
/// of BATCH). A device session is short: this keeps a whole space per point affordable.
pub const SCREEN_BATCH: usize = 3;
pub const FINALISTS: usize = 8;

/// Every configuration `0..count` screened, the finalists timed in full: per configuration its
/// timing (the full one for finalists) and whether it was a finalist. `launch(config, j)` runs
/// configuration `config` on operand set `j % SETS`. A configuration whose launch fails is
/// reported once per distinct error and timed as NaN (never a finalist), so that one launch the
/// device refuses does not cost the point; an error that poisons the context makes every later
/// one fail the same way, and the caller's correctness check finds no winner.
pub fn screen_and_time(
    dev: &CudaDevice,
    count: usize,
    launch: impl FnMut(usize, usize) -> Result<(), CudaError>,
) -> Result<Vec<(Timing, bool)>, CudaError> {
    screen_and_time_until(dev, count, None, launch)
}

/// As [`screen_and_time`], but the screening stops once `until` has passed (after at least
/// [`FINALISTS`] configurations): configurations are screened in index order, so the caller
/// puts first what matters most, and the result covers the screened ones, `0..len`.
pub fn screen_and_time_until(
    dev: &CudaDevice,
    count: usize,
    until: Option<Instant>,
    mut launch: impl FnMut(usize, usize) -> Result<(), CudaError>,
) -> Result<Vec<(Timing, bool)>, CudaError> {
    let mut seen = std::collections::BTreeSet::new();
    let mut failed = |i: usize, e: CudaError| {
        let text = e.to_string();
        if seen.insert(text.clone()) {
            eprintln!("LAUNCH FAILED (configuration {i} of {count}, first of its kind): {text}");
        }
        (Timing::from_samples(vec![]), false)
    };
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        if i >= FINALISTS && until.is_some_and(|u| Instant::now() > u) {
            break;
        }
        out.push(match dev.time(1, 1, SCREEN_BATCH, |j| launch(i, j)) {
            Ok(t) => (t, false),
            Err(e) => failed(i, e),
        });
    }
    let mut order: Vec<usize> = (0..out.len())
        .filter(|&i| out[i].0.median_us.is_finite())
        .collect();
    order.sort_by(|&x, &y| out[x].0.median_us.total_cmp(&out[y].0.median_us));
    for &i in order.iter().take(FINALISTS) {
        out[i] = match dev.time(WARMUP, REPS, BATCH, |j| launch(i, j)) {
            Ok(t) => (t, true),
            Err(e) => failed(i, e),
        };
    }
    Ok(out)
}

pub struct Row {
    pub kind: &'static str,
    pub rows: usize,
    pub cols: usize,
    pub n: usize,
    pub v: usize,
    pub m: usize,
    pub config: String,
    pub t: Timing,
    pub rel_err: Option<f64>,
}

pub fn csv(rows: &[Row], cublas_us: impl Fn(usize, usize, usize) -> f64) -> String {
    let mut s = String::from(
        "kind,rows,cols,n,v,m,config,median_us,min_us,max_us,dense_tflops,speedup_vs_cublas,rel_err\n",
    );
    for r in rows {
        let flops = 2.0 * (r.rows * r.cols * r.n) as f64;
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},\"{}\",{:.3},{:.3},{:.3},{:.2},{:.3},{}",
            r.kind,
            r.rows,
            r.cols,
            r.n,
            r.v,
            r.m,
            r.config,
            r.t.median_us,
            r.t.min_us,
            r.t.max_us,
            flops / r.t.median_us * 1e-6,
            cublas_us(r.rows, r.cols, r.n) / r.t.median_us,
            r.rel_err.map_or(String::new(), |e| format!("{e:.2e}"))
        );
    }
    s
}

pub fn rel_err(got: &[f32], want: &[f32]) -> f64 {
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (g, w) in got.iter().zip(want) {
        num += (f64::from(*g) - f64::from(*w)).powi(2);
        den += f64::from(*w).powi(2);
    }
    if got.iter().any(|x| x.is_nan()) {
        return f64::INFINITY;
    }
    (num / den.max(1e-30)).sqrt()
}

pub fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name)
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

pub fn prepare_all(dev: &CudaDevice, configs: &[VnmConfig]) -> Result<(), CudaError> {
    let threads = std::thread::available_parallelism()
        .map_or(4, |n| n.get())
        .min(16);
    let chunk = configs.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = configs
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().try_for_each(|c| dev.prepare_vnm(c))))
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("compile thread panicked"))
    })
}

/// What both benchmarks start from: the device, whether this is the quick (smoke) run, the
/// output folder, the batch-token counts and the BERT shapes (`quick_shape` alone when quick).
pub struct Setup {
    pub dev: CudaDevice,
    pub quick: bool,
    pub out: std::path::PathBuf,
    pub ns: Vec<usize>,
    pub shapes: Vec<(usize, usize)>,
}

pub fn setup(test: &str, quick_shape: (usize, usize)) -> Setup {
    let dev = CudaDevice::new(0)
        .map(CudaDevice::with_env_ptx_cache)
        .unwrap_or_else(|e| panic!("{test} needs a CUDA device: {e}"));
    let quick = std::env::var("COTUNE_BENCH_QUICK").is_ok_and(|v| v == "1");
    let out = std::path::PathBuf::from(
        std::env::var("COTUNE_BENCH_OUT").unwrap_or_else(|_| "target/cuda-bench".into()),
    );
    std::fs::create_dir_all(&out).unwrap();
    let ns = if quick {
        vec![4096]
    } else {
        env_list("COTUNE_BENCH_N", &[4096, 16384])
    };
    let shapes = if quick {
        vec![quick_shape]
    } else {
        vec![(768, 768), (3072, 768), (768, 3072)]
    };
    eprintln!("device: {}", dev.info().fingerprint());
    Setup {
        dev,
        quick,
        out,
        ns,
        shapes,
    }
}

/// One (shape, n) point's B and C operands (SETS of each, rotated between repetitions) and
/// cuBLAS's row on a dense random A of the shape (no zeros) with them.
pub fn cublas_point(
    dev: &CudaDevice,
    (r, k, n): (usize, usize, usize),
) -> (Vec<DeviceMatrixF16>, Vec<DeviceMatrixF16>, Row) {
    let a_dense = dev.upload_f16(&exact_values(r * k, 1), r, k).unwrap();
    let bs: Vec<DeviceMatrixF16> = (0..SETS)
        .map(|s| {
            dev.upload_f16(&exact_values(k * n, 10 + s as u64), k, n)
                .unwrap()
        })
        .collect();
    let mut cs: Vec<DeviceMatrixF16> = (0..SETS).map(|_| dev.zeros_f16(r, n).unwrap()).collect();
    let t = dev
        .time(WARMUP, REPS, BATCH, |i| {
            let s = i % SETS;
            dev.launch_gemm_f16(&a_dense, &bs[s], &mut cs[s])
        })
        .unwrap();
    let row = Row {
        kind: "cublas",
        rows: r,
        cols: k,
        n,
        v: 0,
        m: 0,
        config: "default".into(),
        t,
        rel_err: None,
    };
    (bs, cs, row)
}

/// The V:N:M matrix `a` times `b` through cuBLAS as a dense matrix: what every sparse result
/// must equal.
pub fn reference(dev: &CudaDevice, a: &VnmMatrix, b: &DeviceMatrixF16) -> Vec<f32> {
    let a_as_dense = dev.upload_f16(&a.to_dense(), a.rows(), a.cols()).unwrap();
    let mut c_ref = dev.zeros_f16(a.rows(), b.cols).unwrap();
    dev.launch_gemm_f16(&a_as_dense, b, &mut c_ref).unwrap();
    dev.download_f16(&c_ref).unwrap()
}
