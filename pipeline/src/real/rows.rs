//! Result rows of the real stages: metric columns, typed and named as in DESIGN.md.

use results::{Row, Value};
use stages::evaluate::Evaluation;
use stages::kernel_tune::calibrate::{Calibrated, CalibrationPoint};
use stages::kernel_tune::{format_params, Measured, Tuned};

fn row<const N: usize>(pairs: [(&str, Value); N]) -> Row {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

fn f(x: f64) -> Value {
    Value::F64(x)
}

/// Training metrics.
pub fn train(t: &stages::Trained) -> Row {
    let m = &t.metrics;
    row([
        ("accuracy", f(m.test_accuracy)),
        ("loss", f(m.final_train_loss as f64)),
        (
            "loss_curve",
            Value::ListF64(m.loss_curve.iter().map(|&x| x as f64).collect()),
        ),
        ("samples_per_s", f(m.samples_per_s)),
        ("weights_digest", Value::Str(t.weights.digest().to_string())),
    ])
}

/// Pruning metrics, per model and per layer (list columns in layer order; a layer's output
/// errors are NaN where it was kept dense).
pub fn prune(p: &stages::Pruned) -> Row {
    let status = |l: &stages::LayerReport| match &l.status {
        stages::LayerStatus::Pruned => "pruned".to_owned(),
        stages::LayerStatus::KeptDense { reason } => format!("kept dense: {reason}"),
    };
    row([
        ("accuracy", f(p.accuracy_after_finetune)),
        ("accuracy_before", f(p.accuracy_before)),
        ("accuracy_after_prune", f(p.accuracy_after_prune)),
        ("sparsity", f(p.sparsity)),
        ("retained_l1", f(p.retained_l1)),
        (
            "layer_names",
            Value::ListStr(p.layers.iter().map(|l| l.name.clone()).collect()),
        ),
        (
            "layer_sparsity",
            Value::ListF64(p.layers.iter().map(|l| l.sparsity).collect()),
        ),
        (
            "layer_retained_l1",
            Value::ListF64(p.layers.iter().map(|l| l.retained_l1).collect()),
        ),
        (
            "layer_status",
            Value::ListStr(p.layers.iter().map(status).collect()),
        ),
        (
            "layer_output_error_before",
            Value::ListF64(
                p.layers
                    .iter()
                    .map(|l| l.output_error_before.unwrap_or(f64::NAN))
                    .collect(),
            ),
        ),
        (
            "layer_output_error_after",
            Value::ListF64(
                p.layers
                    .iter()
                    .map(|l| l.output_error_after.unwrap_or(f64::NAN))
                    .collect(),
            ),
        ),
        ("weights_digest", Value::Str(p.weights.digest().to_string())),
    ])
}

fn point(m: &Measured, flops: f64, dense_us: f64, baseline: bool, best: bool, isa: &str) -> Row {
    let mut r = row([
        ("kernel", Value::Str(m.kernel.clone())),
        ("params", Value::Str(format_params(&m.params))),
        ("baseline", Value::Bool(baseline)),
        ("is_best", Value::Bool(best)),
        ("predicted_cost_s", f(m.predicted_s)),
        ("analytical_cost_s", f(m.analytical_s)),
        ("predicted_rank", Value::I64(m.predicted_rank as i64)),
        ("latency_us_median", f(m.timing.median_us)),
        ("latency_us_min", f(m.timing.min_us)),
        ("latency_spread", f(m.timing.spread)),
        ("repeats", Value::I64(m.timing.repeats as i64)),
        ("gflops", f(flops / (m.timing.median_us * 1e3))),
        ("speedup_vs_dense", f(dense_us / m.timing.median_us)),
        ("isa", Value::Str(isa.to_owned())),
    ]);
    if let Some(e) = &m.error {
        r.insert("point_error".into(), Value::Str(e.clone()));
    }
    for (k, v) in &m.params.0 {
        r.insert(format!("param.{k}"), Value::I64(*v));
    }
    r
}

/// The notes a tuning without a cost model or with a kernel fallback carries on every row.
fn tune_notes(t: &Tuned, r: &mut Row) {
    if let Some(how) = &t.ranking {
        r.insert("ranking".into(), Value::Str(how.clone()));
    }
    if let Some(why) = &t.fallback {
        r.insert("kernel_fallback".into(), Value::Str(why.clone()));
    }
}

/// A tuning's summary (the best point) and one row per measured point, dense baseline included
/// (`baseline = true`). GFLOP/s count the kept weights only (2 · nnz · n). A point that failed
/// has NaN timings and its error in `point_error`; `isa` is the CPU's SIMD level (`library`
/// for the dense library GEMM, which picks its own) or the CUDA target.
pub fn tune(
    t: &Tuned,
    sig: &kernels::FormatSignature,
    n: usize,
    (isa, cpu): (&str, bool),
) -> (Row, Vec<Row>) {
    let flops = 2.0 * sig.rows as f64 * sig.cols as f64 * sig.density() * n as f64;
    let dense_flops = 2.0 * (sig.rows * sig.cols * n) as f64;
    let dense_us = t.dense_best().timing.median_us;
    // The CPU baseline is a library GEMM that picks its own SIMD (`COTUNE_ISA` does not narrow
    // it); a dense format's own points run the same library.
    let baseline_isa = if cpu { "library" } else { isa };
    let isa = if cpu && sig.kind == kernels::PatternKind::Dense {
        "library"
    } else {
        isa
    };
    let mut rows: Vec<Row> = t
        .points
        .iter()
        .enumerate()
        .map(|(i, m)| point(m, flops, dense_us, false, i == t.best, isa))
        .collect();
    rows.extend(t.dense_points.iter().enumerate().map(|(i, m)| {
        point(
            m,
            dense_flops,
            dense_us,
            true,
            i == t.dense_best,
            baseline_isa,
        )
    }));
    for r in &mut rows {
        tune_notes(t, r);
    }
    // A sparse format's CPU baseline is ranked by the analytical dense model, whatever ranked
    // the sparse points.
    if cpu && sig.kind != kernels::PatternKind::Dense {
        for r in &mut rows[t.points.len()..] {
            r.insert("ranking".into(), Value::Str("analytical".into()));
        }
    }
    let best = t.best();
    let regret_rank = t
        .points
        .iter()
        .filter(|m| m.timing.median_us < best.timing.median_us)
        .count();
    let mut metrics = row([
        ("best_params", Value::Str(format_params(&best.params))),
        (
            "dense_params",
            Value::Str(format_params(&t.dense_best().params)),
        ),
        ("kernel", Value::Str(best.kernel.clone())),
        ("latency_us_median", f(best.timing.median_us)),
        ("dense_latency_us", f(dense_us)),
        ("speedup_vs_dense", f(dense_us / best.timing.median_us)),
        ("gflops", f(flops / (best.timing.median_us * 1e3))),
        ("space_size", Value::I64(t.space_size as i64)),
        ("measured", Value::I64(t.points.len() as i64)),
        ("spearman", f(t.spearman)),
        (
            "best_predicted_rank",
            Value::I64(best.predicted_rank as i64),
        ),
        ("faster_points", Value::I64(regret_rank as i64)),
        (
            "failed_points",
            Value::I64(t.points.iter().filter(|m| m.error.is_some()).count() as i64),
        ),
        ("isa", Value::Str(isa.to_owned())),
    ]);
    tune_notes(t, &mut metrics);
    (metrics, rows)
}

/// Evaluation metrics: `latency_us_median` is end to end at the largest batch size, the
/// `layer_*` lists are per GEMM layer in forward order (as `layer_names`), and
/// `non_gemm_us` is the part of a sparse pass outside the GEMMs (activations other than ReLU,
/// im2col, pooling, norms, attention; each layer's bias and ReLU are fused into its GEMM); `isa` is the CPU's SIMD level or the CUDA target. The speedups
/// are medians of pairs timed in alternation with the dense model (`speedup_ci_*` their 95 %
/// interval), so they compare times taken at the same moments; `dense_model` names the dense
/// model they are measured against. `layers_speedup_b{B}` is what the layers' own speedups
/// predict for the pass (their harmonic mean weighted by each layer's dense multiply-adds, see
/// [`Evaluation::layers_speedup`]; each layer
/// timed alone, without its bias and ReLU) and `speedup_of_layers_b{B}` the model's speedup
/// divided by it: how much of its kernels' speedup the model keeps end to end.
/// `layer_pass_us` and `layer_dense_pass_us` are each layer's time inside the sparse and the
/// dense passes (median over the rounds, bias and activation included), beside
/// `layer_latency_us` and `layer_dense_latency_us`, its time alone (empty lists on CUDA;
/// earlier rows lack them).
/// `layer_names` names the entries of the `layer_*` lists; `dense_layers_b{B}` the layers that
/// ran dense at batch B (`[evaluate] dense_where_faster`; empty without it). Rows stored before
/// 2026-12-06 lack both (the evaluate version did not change: nothing else did).
/// `layer_kernels_b{B}` names, per layer, the kernel and point the sparse pass ran it with at
/// batch B (`cpu-nm k_chunk=0,…`: a kernel_tune row's `kernel` and `params`; ` (cost model)`
/// where no tuning guided that batch); rows stored before 2026-12-07 lack it.
/// `pass_slices_b{B}` is how many slices of samples both passes were cut into at batch B
/// (`evaluate::slices`; 1: one, always on CUDA and at one thread), and `pass_chunk_b{B}` the
/// most samples a slice ran through the model at a time (fewer than its samples where it ran
/// in chunks, one after the other, to keep its activations in L2; B with one slice run whole,
/// every product shared by the threads): in a cut pass every layer ran the point
/// `layer_kernels_b{B}` names on one thread per slice, and `layer_pass_us`,
/// `layer_dense_pass_us` and `non_gemm_us` are those of the slice with the most time in its
/// GEMMs, each layer's summed over the slice's chunks (its share of the pass: its layers'
/// times add up to no more than the pass, whose end-to-end time includes waiting for the
/// other slices). Rows stored before evaluate version 13 lack `pass_slices_b{B}`, before
/// version 15 `pass_chunk_b{B}`.
pub fn evaluate(ev: &Evaluation, isa: &str) -> Row {
    let mut r = row([
        ("accuracy", f(ev.accuracy)),
        ("max_rel_error", f(ev.max_rel_error)),
        ("weight_bytes", f(ev.weight_bytes as f64)),
        ("dense_weight_bytes", f(ev.dense_weight_bytes as f64)),
        ("dense_model", Value::Str(ev.dense_model.clone())),
        ("layer_names", Value::ListStr(ev.layer_names.clone())),
        ("isa", Value::Str(isa.to_owned())),
    ]);
    if let Some(big) = ev.latencies.iter().max_by_key(|l| l.batch) {
        r.insert("latency_us_median".into(), f(big.sparse.median_us));
        r.insert("latency_spread".into(), f(big.sparse.spread));
        r.insert("dense_latency_us".into(), f(big.dense.median_us));
        r.insert("speedup_vs_dense".into(), f(big.speedup.median));
        r.insert("speedup_ci_lo".into(), f(big.speedup.lo));
        r.insert("speedup_ci_hi".into(), f(big.speedup.hi));
        r.insert("speedup_pairs".into(), Value::I64(big.speedup.pairs as i64));
        r.insert(
            "layer_latency_us".into(),
            Value::ListF64(big.per_layer.iter().map(|t| t.median_us).collect()),
        );
        r.insert(
            "layer_dense_latency_us".into(),
            Value::ListF64(big.per_layer_dense.iter().map(|t| t.median_us).collect()),
        );
        r.insert(
            "layer_pass_us".into(),
            Value::ListF64(big.per_layer_in_pass.iter().map(|t| t.median_us).collect()),
        );
        r.insert(
            "layer_dense_pass_us".into(),
            Value::ListF64(
                big.per_layer_dense_in_pass
                    .iter()
                    .map(|t| t.median_us)
                    .collect(),
            ),
        );
        r.insert("non_gemm_us".into(), f(big.non_gemm.median_us));
    }
    for l in &ev.latencies {
        r.insert(format!("latency_us_b{}", l.batch), f(l.sparse.median_us));
        r.insert(
            format!("dense_latency_us_b{}", l.batch),
            f(l.dense.median_us),
        );
        r.insert(
            format!("speedup_vs_dense_b{}", l.batch),
            f(l.speedup.median),
        );
        r.insert(format!("speedup_ci_lo_b{}", l.batch), f(l.speedup.lo));
        r.insert(format!("speedup_ci_hi_b{}", l.batch), f(l.speedup.hi));
        r.insert(
            format!("param_fallbacks_b{}", l.batch),
            Value::I64(l.fallbacks as i64),
        );
        r.insert(format!("non_gemm_us_b{}", l.batch), f(l.non_gemm.median_us));
        r.insert(
            format!("dense_kernels_b{}", l.batch),
            Value::Str(format!(
                "sparse pass: {}, dense pass: {}",
                l.dense_kernels[0], l.dense_kernels[1]
            )),
        );
        r.insert(
            format!("pass_slices_b{}", l.batch),
            Value::I64(l.pass_slices as i64),
        );
        r.insert(
            format!("pass_chunk_b{}", l.batch),
            Value::I64(l.pass_chunk as i64),
        );
        r.insert(
            format!("dense_layers_b{}", l.batch),
            Value::ListStr(
                l.ran_dense
                    .iter()
                    .zip(&ev.layer_names)
                    .filter(|(d, _)| **d)
                    .map(|(_, n)| n.clone())
                    .collect(),
            ),
        );
        r.insert(
            format!("layer_kernels_b{}", l.batch),
            Value::ListStr(l.layer_kernels.clone()),
        );
        r.insert(
            format!("layer_speedup_vs_dense_b{}", l.batch),
            Value::ListF64(l.per_layer_speedup.iter().map(|s| s.median).collect()),
        );
        let layers = ev.layers_speedup(l);
        r.insert(format!("layers_speedup_b{}", l.batch), f(layers));
        r.insert(
            format!("speedup_of_layers_b{}", l.batch),
            f(l.speedup.median / layers),
        );
    }
    r
}

/// What a CUDA evaluation's numbers mean: its tolerance (relative to the largest |logit|; fp16)
/// and what its latencies cover.
pub fn cuda_evaluate_notes(r: &mut Row) {
    r.insert(
        "tolerance".into(),
        f(stages::evaluate::cuda::CUDA_TOLERANCE),
    );
    r.insert(
        "latency_scope".into(),
        Value::Str(stages::evaluate::cuda::LATENCY_SCOPE.to_owned()),
    );
}

/// A checkpoint's studied tensors: names and shapes.
pub fn checkpoint(tensors: &[stages::model::CheckpointTensor]) -> Row {
    row([
        (
            "layer_names",
            Value::ListStr(tensors.iter().map(|t| t.name.clone()).collect()),
        ),
        (
            "layer_shapes",
            Value::ListStr(
                tensors
                    .iter()
                    .map(|t| format!("{}x{}", t.rows, t.cols))
                    .collect(),
            ),
        ),
        ("tensors", Value::I64(tensors.len() as i64)),
    ])
}

/// A layer study: the metrics row over all tensors (sparsity and retained L1 weighted by the
/// tensors' sizes and L1 norms as the prune rows are, then per tensor in lists), and one row per
/// tensor, which also carries the point's two summaries (`point_sparsity`,
/// `point_retained_l1`): the metrics row stays in the store, and the retained L1 over tensors
/// needs each tensor's L1, which no row has.
pub fn layer_study(studies: &[super::layer_study::TensorStudy]) -> crate::stage::Outcome {
    let list = |f: &dyn Fn(&super::layer_study::TensorStudy) -> f64| {
        Value::ListF64(studies.iter().map(f).collect())
    };
    let weights: f64 = studies.iter().map(|s| (s.shape.0 * s.shape.1) as f64).sum();
    let sparsity = studies
        .iter()
        .map(|s| s.sparsity * (s.shape.0 * s.shape.1) as f64)
        .sum::<f64>()
        / weights.max(1.0);
    let l1: f64 = studies.iter().map(|s| s.l1).sum();
    let retained = if l1 > 0.0 {
        studies.iter().map(|s| s.retained_l1 * s.l1).sum::<f64>() / l1
    } else {
        1.0
    };
    let metrics = row([
        ("sparsity", f(sparsity)),
        ("retained_l1", f(retained)),
        (
            "layer_names",
            Value::ListStr(studies.iter().map(|s| s.name.clone()).collect()),
        ),
        ("layer_sparsity", list(&|s| s.sparsity)),
        ("layer_retained_l1", list(&|s| s.retained_l1)),
        ("layer_output_error_before", list(&|s| s.output_error.0)),
        ("layer_output_error_after", list(&|s| s.output_error.1)),
        (
            "layer_status",
            Value::ListStr(studies.iter().map(|s| s.status.clone()).collect()),
        ),
    ]);
    let rows = studies
        .iter()
        .map(|s| {
            row([
                ("layer", Value::Str(s.name.clone())),
                ("rows", Value::I64(s.shape.0 as i64)),
                ("cols", Value::I64(s.shape.1 as i64)),
                ("layer_status", Value::Str(s.status.clone())),
                ("layer_sparsity", f(s.sparsity)),
                ("retained_l1", f(s.retained_l1)),
                ("output_error_before", f(s.output_error.0)),
                ("output_error_after", f(s.output_error.1)),
                ("calibration", Value::Str(s.calibration.0.to_string())),
                ("calibration_tokens", Value::I64(s.calibration.1 as i64)),
                ("point_sparsity", f(sparsity)),
                ("point_retained_l1", f(retained)),
            ])
        })
        .collect();
    crate::stage::Outcome { metrics, rows }
}

/// A calibration's summary (one row per calibration: its cost is reported once). The
/// `spearman_*` columns are the mean rank correlations of each model with the measurements
/// within each sampled (pattern, shape), on the sample itself.
pub fn calibrate(c: &Calibrated, isa: &str) -> Row {
    let mut groups: std::collections::BTreeMap<String, Vec<&CalibrationPoint>> = Default::default();
    for p in &c.points {
        let s = &p.sample;
        let group = format!("{:?} {}x{}x{}", p.pattern, s.sig.rows, s.sig.cols, s.n);
        groups.entry(group).or_default().push(p);
    }
    let mean_rho = |model: fn(&CalibrationPoint) -> f64| {
        let rhos: Vec<f64> = groups
            .values()
            .map(|g| {
                let pred: Vec<f64> = g.iter().map(|p| model(p)).collect();
                let meas: Vec<f64> = g.iter().map(|p| p.sample.seconds).collect();
                kernels::spearman(&pred, &meas)
            })
            .filter(|r| r.is_finite())
            .collect();
        rhos.iter().sum::<f64>() / rhos.len() as f64
    };
    row([
        ("samples", Value::I64(c.calibration.samples as i64)),
        ("terms", Value::I64(c.calibration.terms.len() as i64)),
        ("kernel_s", f(c.kernel_seconds)),
        ("spearman_analytical", f(mean_rho(|p| p.analytical_s))),
        ("spearman_calibrated", f(mean_rho(|p| p.calibrated_s))),
        ("isa", Value::Str(isa.to_owned())),
    ])
}

/// A calibration's measured points as CSV: shape, pattern, parameters, measured time (as
/// `calibrate_cpu` takes it) and both models' predictions.
pub fn calibration_sample_csv(c: &Calibrated) -> String {
    let mut out = String::from("pattern,rows,cols,n,params,measured_s,analytical_s,calibrated_s\n");
    for p in &c.points {
        let s = &p.sample;
        out.push_str(&format!(
            "{},{},{},{},{},{:?},{:?},{:?}\n",
            crate::kinds::pattern_label(&p.pattern).replace(',', ";"),
            s.sig.rows,
            s.sig.cols,
            s.n,
            format_params(&s.point).replace(',', ";"),
            s.seconds,
            p.analytical_s,
            p.calibrated_s
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stages::evaluate::{BatchLatency, Evaluation, Speedup};
    use stages::kernel_tune::summarise;

    /// The layers an evaluation ran dense are named per batch size, in `layer_names`' terms.
    #[test]
    fn the_layers_run_dense_are_named_per_batch() {
        let t = || summarise(vec![1.0, 2.0]);
        let at = |batch: usize, ran_dense: Vec<bool>| BatchLatency {
            batch,
            sparse: t(),
            dense: t(),
            speedup: Speedup::UNMEASURED,
            non_gemm: t(),
            per_layer: vec![t(), t()],
            per_layer_dense: vec![t(), t()],
            per_layer_speedup: vec![Speedup::UNMEASURED; 2],
            per_layer_in_pass: vec![t(), t()],
            per_layer_dense_in_pass: vec![t(), t()],
            fallbacks: 0,
            dense_kernels: ["tuned", "tuned"],
            pass_slices: batch.min(2),
            pass_chunk: batch.div_ceil(2),
            layer_kernels: vec![format!("cpu-nm rows={batch}"), "dense threads=1".into()],
            ran_dense,
        };
        let ev = Evaluation {
            accuracy: 1.0,
            max_rel_error: 0.0,
            latencies: vec![at(1, vec![false, false]), at(4, vec![false, true])],
            weight_bytes: 1,
            dense_weight_bytes: 2,
            dense_model: "chain".into(),
            layer_macs: vec![1.0, 1.0],
            layer_names: vec!["fc0".into(), "fc1".into()],
        };
        let r = evaluate(&ev, "avx512");
        let names = |c: &str| r.get(c).cloned();
        for c in ["layer_pass_us", "layer_dense_pass_us"] {
            assert_eq!(names(c), Some(Value::ListF64(vec![1.5, 1.5])), "{c}");
        }
        assert_eq!(
            names("layer_names"),
            Some(Value::ListStr(vec!["fc0".into(), "fc1".into()]))
        );
        assert_eq!(names("dense_layers_b1"), Some(Value::ListStr(vec![])));
        assert_eq!(names("pass_slices_b1"), Some(Value::I64(1)));
        assert_eq!(names("pass_slices_b4"), Some(Value::I64(2)));
        assert_eq!(names("pass_chunk_b4"), Some(Value::I64(2)));
        assert_eq!(
            names("dense_layers_b4"),
            Some(Value::ListStr(vec!["fc1".into()]))
        );
        assert_eq!(
            names("layer_kernels_b4"),
            Some(Value::ListStr(vec![
                "cpu-nm rows=4".into(),
                "dense threads=1".into()
            ]))
        );
    }
}
