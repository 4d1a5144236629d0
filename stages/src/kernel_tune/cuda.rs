//! Kernel tuning on the CUDA backend ([`kernels::cuda`]): the same strategies over the CUDA
//! kernels' spaces ([`kernels::cuda::cuda_spaces`]: one per kernel that runs the format on
//! this device), measured with device events on synthetic weights of the exact structure,
//! against cuBLAS fp16 as the dense baseline.
//!
//! What differs from the CPU tuning:
//! - The cost model is [`kernels::cuda::cuda_predicted_cost`] (occupancy from the shipped
//!   `ptxas` register table, throughput and latency per k-tile; fitted to the H200's
//!   measurements), on this device's SM count and shared memory and registers per SM. The
//!   `ranking` column says where the registers came from.
//! - On sm_90, V:N:M with V = 64 / 128 and 2:4 have two kernels: the `mma.sp` kernel and the
//!   Hopper `wgmma` kernel (`cuda-vnm-wgmma`, ranked by an unfitted prior). Each space is ranked
//!   by its own model and the tuner takes the rankings in turn ([`ranked_spaces`]), so a budget
//!   measures the top of both and the fastest measured point of either wins. A point's
//!   `predicted_rank` is its position in that merged order, and the tuning's Spearman
//!   correlation is the winning kernel's model's alone.
//! - The fastest point's product is checked against the CPU reference before it wins
//!   (`cuda_check.rs`); one that disagrees becomes a failed point saying so, and the next
//!   fastest is checked.
//! - A point that fails to compile or launch is kept as a failed point with its error, and the
//!   tuning goes on; the tuning fails only when no point could be measured or the dense
//!   baseline failed (both usually mean the machine, not the point, is at fault, so nothing is
//!   cached).
//! - A format no CUDA kernel implements (vector-wise; N:M other than 2:4 / 1:4; 2:4 with rows
//!   not a multiple of 16; V:N:M with V outside 16/32/64/128) runs as CSR on the row-split
//!   kernel ([`cuda_runnable`]); the tuning says so in [`Tuned::fallback`].
//! - The V:N:M, 2:4 and dense kernels are fp16 (fp32 accumulation); CSR is fp32.
//!
//! One [`CudaDevice`] serves the whole process ([`shared_device`]): contexts are expensive and
//! its kernel cache is per device.

use super::cuda_check::check_fastest;
pub use super::cuda_check::CHECK_COLUMNS;
pub use super::cuda_ranking::{ranked_space, ranked_spaces, Ranked};
use super::search::search;
use super::{summarise, Measured, TuneSpec, Tuned};
use crate::StageError;
use kernels::cuda::{cuda_space, cuda_spaces, CudaDevice, CudaError, Gpu, GpuModel, PtxCache};
use kernels::{KernelFamily, Mask, ParamPoint, Pattern, PatternKind, SparseMatrix};
use std::path::PathBuf;
use std::sync::OnceLock;

/// Device-timed samples per measured point (each sample times 10 back-to-back launches after 3
/// warm-ups, see [`CudaDevice::measure`]).
pub const REPS: usize = 7;

/// The kernel name of the dense baseline's rows.
pub const DENSE_KERNEL: &str = "cublas-f16";

static DEVICE: OnceLock<Result<CudaDevice, CudaError>> = OnceLock::new();
static PTX_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Caches compiled PTX in `dir` (the engine passes `<store>/ptx`). Only the first call counts,
/// and only before the device is first opened (the device is opened at planning time, so the
/// engine calls this before planning).
pub fn use_ptx_cache_in(dir: PathBuf) {
    let _ = PTX_DIR.set(dir);
}

/// Where compiled PTX is cached: `$COTUNE_PTX_CACHE`, else the folder given to
/// [`use_ptx_cache_in`], else `cotune-ptx-<user>` in the system's temporary folder.
pub fn ptx_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(kernels::cuda::PTX_CACHE_ENV) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = PTX_DIR.get() {
        return dir.clone();
    }
    let user = std::env::var("USER").unwrap_or_else(|_| "user".into());
    std::env::temp_dir().join(format!("cotune-ptx-{user}"))
}

/// The element type the CUDA backend computes `pattern` at `rows × cols` in: `f16` (fp32
/// accumulation) on the tensor-core kernels (V:N:M and 2:4 / 1:4) and cuBLAS (dense), `f32` on
/// the CSR kernel, which also runs every format those kernels do not implement
/// ([`cuda_runnable`]).
pub fn dtype(pattern: &Pattern, rows: usize, cols: usize) -> &'static str {
    let Ok(sig) = kernels::FormatSignature::for_pattern(pattern, rows, cols) else {
        return "f32";
    };
    let fp16_kernel = matches!(
        sig.kind,
        PatternKind::Vnm | PatternKind::Nm | PatternKind::Dense
    );
    if fp16_kernel && !cuda_space(&sig, 1).points().is_empty() {
        "f16"
    } else {
        "f32"
    }
}

/// The kernel family that runs `pattern` at `rows × cols` on the CUDA backend: the
/// tensor-core kernel for the formats it implements, cuBLAS for dense, CSR for the rest.
pub fn family(pattern: &Pattern, rows: usize, cols: usize) -> KernelFamily {
    let sig = kernels::FormatSignature::for_pattern(pattern, rows, cols);
    match sig {
        Ok(sig) if sig.kind == PatternKind::Dense => KernelFamily::CudaDense,
        Ok(sig)
            if matches!(sig.kind, PatternKind::Vnm | PatternKind::Nm)
                && !cuda_space(&sig, 1).points().is_empty() =>
        {
            KernelFamily::CudaVnm
        }
        _ => KernelFamily::CudaCsr,
    }
}

/// The process's CUDA device (ordinal 0, PTX cached in [`ptx_cache_dir`]), opened on first
/// use; the error says why there is none ("built without CUDA support", "no NVIDIA driver
/// found", …) and is the same for every caller.
pub fn shared_device() -> Result<&'static CudaDevice, CudaError> {
    DEVICE
        .get_or_init(|| {
            CudaDevice::new(0).map(|d| d.with_ptx_cache(PtxCache::new(ptx_cache_dir())))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The matrix the CUDA backend runs for `a`: `a` itself when a CUDA kernel implements its
/// format, else its CSR form with the reason (the row-split kernel runs any structure).
pub fn cuda_runnable(a: &SparseMatrix) -> Result<(SparseMatrix, Option<String>), StageError> {
    let sig = a.signature();
    if !cuda_space(&sig, 1).points().is_empty() {
        return Ok((a.clone(), None));
    }
    let (rows, cols) = (a.rows(), a.cols());
    let dense = a.to_dense();
    let keep = dense.iter().map(|&x| x != 0.0).collect();
    let mask = Mask::new(rows, cols, keep)?;
    // The CSR packing follows the mask; the pattern's nominal sparsity is not used by it.
    let csr = SparseMatrix::from_masked(&Pattern::Unstructured { sparsity: 0.0 }, &dense, &mask)?;
    let why = format!(
        "no CUDA kernel for {} at {rows}x{cols} (mma.sp runs V:N:M with V in 16/32/64/128 and \
         2:4 or 1:4 with rows a multiple of 16): ran as CSR on cuda-csr",
        sig.pattern()
    );
    Ok((csr, Some(why)))
}

/// A kernels error as a message: `CudaDevice`'s errors arrive as `KernelError::Backend`, whose
/// message is shown without the generic "kernel backend error" prefix.
pub fn message(e: &kernels::KernelError) -> String {
    match e {
        kernels::KernelError::Backend(m) => m.clone(),
        other => other.to_string(),
    }
}

/// Tunes one signature on `dev` (see the module's notes). The caller holds the per-host
/// measurement lock around this call.
pub fn tune_cuda(spec: &TuneSpec, dev: &impl Gpu) -> Result<Tuned, StageError> {
    let (sig, n) = (&spec.sig, spec.n);
    let (a, fallback) = cuda_runnable(&kernels::synthetic(sig, 0x5eed)?)?;
    let runnable_sig = a.signature();
    let gpu = GpuModel::for_device(dev.info());
    let spaces = cuda_spaces(&runnable_sig, n, &gpu.arch);
    let (ranked, ranking) = ranked_spaces(&spaces, &runnable_sig, n, &gpu);
    let space_size = ranked.len();
    if space_size == 0 {
        return Err(StageError::InvalidConfig(format!(
            "empty CUDA kernel space for {sig:?} at n = {n}"
        )));
    }
    // The search sees the points in the order taken (their position as the "prediction"), so
    // every strategy follows the merged ranking.
    let order: Vec<(ParamPoint, f64)> = ranked
        .iter()
        .enumerate()
        .map(|(i, r)| (r.point.clone(), i as f64))
        .collect();
    // Device-timed samples do not drift with the host's phases: each point is measured on its
    // own, and a failed point scores infinity (the `guided` search does not expand it).
    let mut points = vec![];
    search(&order, &spec.strategy, |batch| {
        Ok::<_, StageError>(
            batch
                .points
                .iter()
                .map(|&i| {
                    let r = &ranked[i];
                    let (timing, error) = match dev.measure(&a, n, &r.point, REPS) {
                        Ok(t) => (summarise(t.samples_us), None),
                        Err(e) => (summarise(vec![]), Some(message(&e))),
                    };
                    let score = timing.median_us;
                    points.push(Measured {
                        kernel: r.kernel.to_owned(),
                        params: r.point.clone(),
                        predicted_s: r.predicted_s,
                        analytical_s: f64::NAN,
                        predicted_rank: i,
                        timing,
                        error,
                    });
                    score
                })
                .collect(),
        )
    })?;
    let checked = check_fastest(&a, n, dev, &mut points)?;
    let Some(best) = checked else {
        let first = points
            .iter()
            .find_map(|m| m.error.clone())
            .unwrap_or_else(|| "no point was measured".into());
        let kernels: Vec<&str> = spaces.iter().map(|s| s.kernel).collect();
        return Err(StageError::Cuda(format!(
            "every measured {} point failed; the first: {first}",
            kernels.join(" / ")
        )));
    };
    // The rank correlation of the winning kernel's model: the kernels' models are not on one
    // scale, so a correlation over both would mix them.
    let measured: Vec<&Measured> = points
        .iter()
        .filter(|m| m.error.is_none() && m.kernel == points[best].kernel)
        .collect();
    let spearman = kernels::spearman(
        &measured.iter().map(|m| m.predicted_s).collect::<Vec<_>>(),
        &measured
            .iter()
            .map(|m| m.timing.median_us)
            .collect::<Vec<_>>(),
    );
    let dense = dev
        .measure_dense(sig.rows, sig.cols, n, REPS)
        .map_err(|e| StageError::Cuda(format!("dense baseline ({DENSE_KERNEL}) failed: {e}")))?;
    let dense_params = cuda_space(
        &kernels::FormatSignature::for_pattern(&Pattern::Dense, sig.rows, sig.cols)?,
        n,
    )
    .points()
    .into_iter()
    .next()
    .unwrap_or_default();
    let dense_points = vec![Measured {
        kernel: DENSE_KERNEL.into(),
        params: dense_params,
        predicted_s: f64::NAN,
        analytical_s: f64::NAN,
        predicted_rank: 0,
        timing: summarise(dense.samples_us),
        error: None,
    }];
    Ok(Tuned {
        space_size,
        points,
        dense_points,
        best,
        dense_best: 0,
        spearman,
        ranking: Some(ranking),
        fallback,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel_tune::cuda_stand_in::StandIn;
    use crate::kernel_tune::Strategy;
    use kernels::cuda::WGMMA_KERNEL;
    use kernels::FormatSignature;

    fn sig(p: Pattern, rows: usize, cols: usize) -> FormatSignature {
        FormatSignature::for_pattern(&p, rows, cols).unwrap()
    }

    #[test]
    fn the_ranking_orders_every_point_by_the_cost_model() {
        let gpu = GpuModel::h200();
        let vnm = sig(Pattern::Vnm { v: 128, m: 8 }, 3072, 768);
        let space = cuda_space(&vnm, 4096);
        let (ranked, how) = ranked_space(&space, &vnm, 4096, &gpu);
        assert_eq!(ranked.len(), space.points().len());
        assert!(ranked.windows(2).all(|w| w[0].1 <= w[1].1));
        assert!(ranked.iter().all(|(_, c)| c.is_finite() && *c > 0.0));
        assert!(how.contains("sm_90") && how.contains("ptxas"), "{how}");
        // On the H200 the most frequent winner at V = 128 is among the first 10 %.
        let winner = ranked
            .iter()
            .position(|(p, _)| {
                [
                    ("bn", 64),
                    ("bk", 64),
                    ("wm", 64),
                    ("wn", 32),
                    ("mma_k", 32),
                ]
                .iter()
                .all(|&(k, v)| p.get(k) == Ok(v))
            })
            .unwrap();
        assert!(winner < ranked.len() / 10, "at {winner}");
        // An arch without a register table says its registers are estimated.
        let (_, how) = ranked_space(&space, &vnm, 4096, &GpuModel::for_arch("sm_89"));
        assert!(how.contains("estimated"), "{how}");
        let csr_sig = sig(Pattern::Unstructured { sparsity: 0.9 }, 64, 64);
        let csr = cuda_space(&csr_sig, 256);
        let (ranked, _) = ranked_space(&csr, &csr_sig, 256, &gpu);
        assert_eq!(ranked[0].0.get("cols_per_lane"), Ok(4));
    }

    #[test]
    fn the_dtype_is_f16_on_the_tensor_core_kernels_and_cublas_and_f32_on_csr() {
        assert_eq!(dtype(&Pattern::Vnm { v: 64, m: 8 }, 128, 64), "f16");
        assert_eq!(dtype(&Pattern::Nm { n: 2, m: 4 }, 32, 64), "f16");
        assert_eq!(dtype(&Pattern::Dense, 10, 64), "f16");
        // 2:4 on 10 rows and 2:8 N:M have no tensor-core kernel: CSR, fp32.
        assert_eq!(dtype(&Pattern::Nm { n: 2, m: 4 }, 10, 64), "f32");
        assert_eq!(dtype(&Pattern::Nm { n: 2, m: 8 }, 32, 64), "f32");
        assert_eq!(
            dtype(&Pattern::Unstructured { sparsity: 0.9 }, 32, 64),
            "f32"
        );
        assert_eq!(
            dtype(
                &Pattern::Vector {
                    v: 16,
                    sparsity: 0.5
                },
                32,
                64
            ),
            "f32"
        );
    }

    #[test]
    fn formats_without_a_cuda_kernel_run_as_csr_with_the_same_product() {
        // 2:4 with 10 rows: the mma.sp kernel needs rows in multiples of 16.
        let nm = kernels::synthetic(&sig(Pattern::Nm { n: 2, m: 4 }, 10, 32), 3).unwrap();
        let (csr, why) = cuda_runnable(&nm).unwrap();
        assert!(matches!(csr, SparseMatrix::Csr(_)));
        assert_eq!(csr.to_dense(), nm.to_dense());
        assert!(why.unwrap().contains("ran as CSR"));
        let vnm = kernels::synthetic(&sig(Pattern::Vnm { v: 16, m: 8 }, 32, 32), 3).unwrap();
        let (same, why) = cuda_runnable(&vnm).unwrap();
        assert_eq!(same, vnm);
        assert!(why.is_none());
    }

    fn spec(sig: FormatSignature, n: usize, strategy: Strategy) -> TuneSpec {
        TuneSpec {
            sig,
            n,
            strategy,
            seconds_per_point: 0.0,
            backend: super::super::Backend::Cuda,
            calibration: None,
        }
    }

    #[test]
    fn the_model_strategy_measures_the_best_ranked_points() {
        let dev = StandIn::a100();
        let vnm = sig(Pattern::Vnm { v: 64, m: 8 }, 128, 200);
        let t = tune_cuda(&spec(vnm, 96, Strategy::Model { budget: 6 }), &dev).unwrap();
        assert_eq!(t.space_size, cuda_space(&vnm, 96).points().len());
        let ranks: Vec<usize> = t.points.iter().map(|m| m.predicted_rank).collect();
        assert_eq!(ranks, vec![0, 1, 2, 3, 4, 5]);
        assert!(t
            .points
            .iter()
            .all(|m| m.kernel == "cuda-vnm" && m.error.is_none()));
        assert!(t.points.iter().all(|m| m.timing.repeats == REPS));
        // The stand-in's times are the predictions times a factor in [1, 1.5).
        let best = t.best();
        assert!(t
            .points
            .iter()
            .all(|m| best.timing.median_us <= m.timing.median_us));
        assert!(t.spearman.is_finite());
        assert_eq!(
            t.ranking.as_deref(),
            Some("CUDA cost model on sm_80 (108 SMs), ptxas register table")
        );
        assert_eq!(t.dense_points.len(), 1);
        assert_eq!(t.dense_best().kernel, DENSE_KERNEL);
        assert!(t.fallback.is_none());
    }

    #[test]
    fn on_sm90_the_tuner_takes_both_kernels_rankings_in_turn() {
        let dev = StandIn::h200();
        let vnm = sig(Pattern::Vnm { v: 128, m: 8 }, 256, 200);
        let spaces = cuda_spaces(&vnm, 96, "sm_90");
        let t = tune_cuda(&spec(vnm, 96, Strategy::Model { budget: 6 }), &dev).unwrap();
        assert_eq!(
            t.space_size,
            spaces.iter().map(|s| s.points().len()).sum::<usize>()
        );
        let kernels: Vec<&str> = t.points.iter().map(|m| m.kernel.as_str()).collect();
        assert_eq!(kernels, ["cuda-vnm", WGMMA_KERNEL].repeat(3));
        // Each kernel's points in its own model's order, and each a point of its space.
        for (space, first) in spaces.iter().zip([0, 1]) {
            let (own, _) = ranked_space(space, &vnm, 96, &GpuModel::h200());
            let measured: Vec<&ParamPoint> = t
                .points
                .iter()
                .skip(first)
                .step_by(2)
                .map(|m| &m.params)
                .collect();
            let want: Vec<&ParamPoint> = own.iter().take(3).map(|(p, _)| p).collect();
            assert_eq!(measured, want, "{}", space.kernel);
        }
        let how = t.ranking.as_deref().unwrap();
        assert!(
            how.contains("ptxas register table") && how.contains("unfitted prior"),
            "{how}"
        );
        assert!(t.points.iter().all(|m| m.error.is_none()));
        // The stand-in times the Hopper kernel by its model, which predicts it faster.
        assert_eq!(t.best().kernel, WGMMA_KERNEL);
        // 2:4 too, with its block heights dividing the rows.
        let nm = sig(Pattern::Nm { n: 2, m: 4 }, 192, 64);
        let t = tune_cuda(&spec(nm, 32, Strategy::Exhaustive), &dev).unwrap();
        let hopper: Vec<&Measured> = t
            .points
            .iter()
            .filter(|m| m.kernel == WGMMA_KERNEL)
            .collect();
        assert!(!hopper.is_empty());
        assert!(hopper
            .iter()
            .all(|m| m.params.get("bm") == Ok(64) && m.error.is_none()));
    }

    #[test]
    fn a_kernel_whose_products_are_wrong_does_not_win() {
        let mut dev = StandIn::h200();
        dev.error = 1.0;
        dev.wrong_kernel = Some(WGMMA_KERNEL);
        let vnm = sig(Pattern::Vnm { v: 64, m: 8 }, 128, 200);
        let t = tune_cuda(&spec(vnm, 96, Strategy::Model { budget: 6 }), &dev).unwrap();
        assert_eq!(t.best().kernel, "cuda-vnm");
        // Every Hopper point was faster, so each was checked, found wrong, and set aside.
        for m in t.points.iter().filter(|m| m.kernel == WGMMA_KERNEL) {
            let err = m.error.as_deref().unwrap();
            assert!(
                err.starts_with("wrong result: off the CPU reference"),
                "{err}"
            );
            assert!(err.contains(" us)") && m.timing.median_us.is_nan(), "{err}");
        }
        assert!(t
            .points
            .iter()
            .filter(|m| m.kernel == "cuda-vnm")
            .all(|m| m.error.is_none()));
        // When every kernel is wrong, the tuning fails and says why.
        dev.wrong_kernel = None;
        let err = tune_cuda(&spec(vnm, 96, Strategy::Model { budget: 2 }), &dev).unwrap_err();
        let err = err.to_string();
        assert!(
            err.contains("cuda-vnm / cuda-vnm-wgmma") && err.contains("wrong result"),
            "{err}"
        );
    }

    #[test]
    fn the_guided_strategy_expands_around_measured_points_and_skips_failed_ones() {
        let vnm = sig(Pattern::Vnm { v: 64, m: 8 }, 128, 200);
        let (dev, first) = failing_first(&vnm, 96);
        let t = tune_cuda(&spec(vnm, 96, Strategy::Guided { budget: 8 }), &dev).unwrap();
        assert_eq!(t.points.len(), 8);
        let ranks: Vec<usize> = t.points.iter().map(|m| m.predicted_rank).collect();
        assert_eq!(ranks[..4], [0, 1, 2, 3]);
        assert_eq!(t.points[0].params, first);
        assert!(t.points[0].error.is_some() && t.points[1..].iter().all(|m| m.error.is_none()));
        // The later points step from a measured point that did not fail.
        let differ = |a: &ParamPoint, b: &ParamPoint| {
            a.0.iter().filter(|(k, v)| b.0.get(*k) != Some(*v)).count()
        };
        for i in 4..8 {
            assert!(t.points[1..i]
                .iter()
                .any(|m| differ(&m.params, &t.points[i].params) == 1));
        }
        assert_ne!(t.best, 0);
    }

    /// A stand-in whose launches fail at the model's first choice for `sig` at `n`, and that
    /// point.
    fn failing_first(sig: &FormatSignature, n: usize) -> (StandIn, ParamPoint) {
        let first = ranked_space(&cuda_space(sig, n), sig, n, &GpuModel::h200())
            .0
            .remove(0)
            .0;
        let mut dev = StandIn::h200();
        dev.failing = Some(first.clone());
        (dev, first)
    }

    #[test]
    fn a_failing_point_is_a_row_and_the_tuning_goes_on() {
        let vnm = sig(Pattern::Vnm { v: 32, m: 10 }, 64, 90);
        let (dev, first) = failing_first(&vnm, 40);
        let t = tune_cuda(&spec(vnm, 40, Strategy::Model { budget: 3 }), &dev).unwrap();
        assert_eq!(t.points[0].params, first);
        let err = t.points[0].error.as_deref().unwrap();
        assert!(err.contains("launch failed"), "{err}");
        assert!(t.points[0].timing.median_us.is_nan());
        assert_ne!(t.best, 0);
        assert!(t.points[1..].iter().all(|m| m.error.is_none()));
    }

    #[test]
    fn the_tuning_fails_when_every_point_or_the_baseline_fails() {
        let vnm = sig(Pattern::Vnm { v: 16, m: 8 }, 32, 32);
        let (dev, _) = failing_first(&vnm, 8);
        let err = tune_cuda(&spec(vnm, 8, Strategy::Model { budget: 1 }), &dev).unwrap_err();
        assert!(
            err.to_string()
                .contains("every measured cuda-vnm point failed"),
            "{err}"
        );
        let mut dev = StandIn::h200();
        dev.dense_fails = true;
        let err = tune_cuda(&spec(vnm, 8, Strategy::Model { budget: 2 }), &dev).unwrap_err();
        assert!(
            err.to_string()
                .contains("dense baseline (cublas-f16) failed"),
            "{err}"
        );
    }

    #[test]
    fn two_four_tunes_its_block_height_and_odd_rows_fall_back_to_csr() {
        let dev = StandIn::a100();
        let nm = sig(Pattern::Nm { n: 2, m: 4 }, 128, 64);
        let t = tune_cuda(
            &spec(
                nm,
                16,
                Strategy::Random {
                    budget: 40,
                    seed: 3,
                },
            ),
            &dev,
        )
        .unwrap();
        assert_eq!(t.points[0].kernel, "cuda-nm24");
        let heights: std::collections::BTreeSet<i64> = t
            .points
            .iter()
            .map(|m| m.params.get("bm").unwrap())
            .collect();
        assert!(heights.len() >= 3, "{heights:?}");
        assert!(t.points.iter().all(|m| m.error.is_none()));
        // 10 rows: no 16-row mma tile; the tuning runs CSR and says so.
        let odd = sig(Pattern::Nm { n: 2, m: 4 }, 10, 64);
        let t = tune_cuda(&spec(odd, 16, Strategy::Exhaustive), &dev).unwrap();
        assert_eq!(t.points[0].kernel, "cuda-csr");
        assert_eq!(t.points.len(), 12);
        assert!(t.fallback.unwrap().contains("ran as CSR"));
    }

    #[test]
    #[cfg_attr(
        feature = "cuda",
        ignore = "with feature cuda a device may be present; the no-device path is checked without it"
    )]
    fn without_a_device_the_tuning_fails_with_the_reason() {
        let reason = match shared_device() {
            Err(reason) => reason,
            Ok(_) => panic!("this test checks a build without a CUDA device"),
        };
        let spec = TuneSpec {
            sig: sig(Pattern::Vnm { v: 16, m: 8 }, 32, 32),
            n: 8,
            strategy: Strategy::Random { budget: 3, seed: 1 },
            seconds_per_point: 0.0,
            backend: super::super::Backend::Cuda,
            calibration: None,
        };
        let err = super::super::tune(&spec).unwrap_err().to_string();
        assert!(err.contains(&reason.to_string()), "{err}");
    }
}
