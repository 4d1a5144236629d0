//! Evaluation on the CUDA backend: each layer's product runs on the device through
//! [`Gpu::spmm`] with its tuned point; bias and ReLU are applied on the host.
//!
//! - Numerics: the V:N:M, 2:4 and dense kernels round A, B and C to fp16 (fp32 accumulation),
//!   CSR is fp32. The logits must agree with the masked dense fp64 reference within
//!   [`CUDA_TOLERANCE`] of the reference's largest |logit| (fp16 keeps 11 significant bits,
//!   ~5e-4 relative per rounding, and each layer rounds its input, weights and output).
//! - Latency: per layer, the device-event time of the layer's product ([`Gpu::measure`],
//!   [`REPS`] samples of 10 back-to-back launches); end to end, the sample-wise sum over the
//!   layers. Host transfers are excluded, and so are bias and ReLU (no device kernel for them
//!   yet, so the layers cannot be chained on the device). The dense run is cuBLAS fp16 on the
//!   same shapes, timed the same way.
//! - Layers whose format no CUDA kernel implements run as CSR, as their tuning did
//!   ([`cuda_runnable`]).

use super::measured::{dense_model, layer_macs, point_label, weight_bytes, COST_MODEL_MARK};
use super::points::guiding_tuning;
use super::reference::{agreement, check_shapes};
use super::{speedup, BatchLatency, Evaluation, LayerRun};
use crate::kernel_tune::cuda::{cuda_runnable, message, ranked_space, REPS};
use crate::kernel_tune::summarise;
use crate::model::{Arch, Layer, LayerKind, Weights};
use crate::StageError;
use datasets::Dataset;
use kernels::cuda::{cuda_space, cuda_spaces, Gpu, GpuModel};
use kernels::{ParamPoint, SparseMatrix};

/// Largest |output − reference| allowed, relative to the reference's largest |logit|.
pub const CUDA_TOLERANCE: f64 = 1e-2;

/// What the latency columns of a CUDA evaluation measure.
pub const LATENCY_SCOPE: &str = "sum of the layers' device-timed products; host transfers, \
bias and ReLU excluded";

/// The point a layer runs at batch size `n`: the tuning nearest in batch tokens when it is
/// within 4× of `n` and a point of one of the layer's CUDA spaces on `gpu`, else the cost
/// model's best point of the first space (the `mma.sp` kernel for the tensor-core formats, whose
/// model is fitted), flagged `true`.
fn params_for(
    layer: &LayerRun,
    runnable: &SparseMatrix,
    n: usize,
    gpu: &GpuModel,
) -> (ParamPoint, bool) {
    let sig = runnable.signature();
    if let Some(t) = guiding_tuning(&layer.tunings, n) {
        if cuda_spaces(&sig, n, &gpu.arch)
            .iter()
            .any(|s| s.contains(&t.params).is_ok())
        {
            return (t.params.clone(), false);
        }
    }
    let space = cuda_space(&sig, n);
    let (ranked, _) = ranked_space(&space, &sig, n, gpu);
    (
        ranked
            .into_iter()
            .next()
            .map(|(p, _)| p)
            .unwrap_or_default(),
        true,
    )
}

/// The kernel that runs `p` on `m` at `n` columns: the first CUDA space of this device's
/// arch that holds the point (a tuned point), else the space the cost model ranked.
fn kernel_of(m: &SparseMatrix, n: usize, p: &ParamPoint, gpu: &GpuModel) -> &'static str {
    let sig = m.signature();
    cuda_spaces(&sig, n, &gpu.arch)
        .iter()
        .find(|s| s.contains(p).is_ok())
        .map_or_else(|| cuda_space(&sig, n).kernel, |s| s.kernel)
}

/// A layer as it runs: the matrix the device multiplies, its bias, its point.
type Step<'a> = (&'a SparseMatrix, &'a [f32], ParamPoint);

/// Runs the layers on `xt` (features × batch) on the device, returning the logits.
fn forward(
    dev: &impl Gpu,
    layers: &[Step],
    xt: &[f32],
    batch: usize,
) -> Result<Vec<f32>, StageError> {
    let mut cur = xt.to_vec();
    for (i, (m, bias, p)) in layers.iter().enumerate() {
        let mut out = dev
            .spmm(m, &cur, batch, p)
            .map_err(|e| StageError::Cuda(message(&e)))?;
        add_bias_relu(&mut out, bias, batch, i + 1 < layers.len());
        cur = out;
    }
    Ok(cur)
}

/// Sample-wise sum of per-layer samples (each layer has [`REPS`] of them).
fn summed(per_layer: &[Vec<f64>]) -> Vec<f64> {
    let n = per_layer.iter().map(Vec::len).min().unwrap_or(0);
    (0..n)
        .map(|i| per_layer.iter().map(|s| s[i]).sum())
        .collect()
}

/// Evaluates `layers` (linear layers in forward order, ReLU between: an MLP) on `data` through
/// the CUDA kernels of `dev`, measuring latency at each batch size (see the module's notes).
/// The caller holds the measurement lock.
pub fn evaluate_cuda(
    data: &Dataset,
    layers: &[LayerRun],
    batch_sizes: &[usize],
    dev: &impl Gpu,
) -> Result<Evaluation, StageError> {
    let model = chain_of(layers);
    check_shapes(data, &model, layers)?;
    let runnable: Vec<SparseMatrix> = layers
        .iter()
        .map(|l| cuda_runnable(&l.matrix).map(|(m, _)| m))
        .collect::<Result<_, _>>()?;
    let gpu = GpuModel::for_device(dev.info());
    let run_at = |b: usize| -> (Vec<Step>, Vec<String>) {
        let mut labels = vec![];
        let run = layers
            .iter()
            .zip(&runnable)
            .map(|(l, m)| {
                let (p, fb) = params_for(l, m, b, &gpu);
                labels.push(point_label(kernel_of(m, b, &p, &gpu), &p, fb));
                (m, l.bias.as_slice(), p)
            })
            .collect();
        (run, labels)
    };
    let agree = agreement(data, &model, layers, |xt, b| {
        forward(dev, &run_at(b).0, xt, b)
    })?;
    let max_rel_error = if agree.max_ref > 0.0 {
        agree.max_err / agree.max_ref
    } else {
        agree.max_err
    };
    if max_rel_error.is_nan() || max_rel_error > CUDA_TOLERANCE {
        return Err(StageError::InvalidConfig(format!(
            "CUDA inference disagrees with the masked dense reference: max error {max_rel_error:e} of the largest |logit| > {CUDA_TOLERANCE:e}"
        )));
    }
    let mut latencies = vec![];
    for &b in batch_sizes {
        let (run, layer_kernels) = run_at(b);
        let fallbacks = layer_kernels
            .iter()
            .filter(|k| k.ends_with(COST_MODEL_MARK))
            .count();
        let (mut sparse, mut dense, mut per_layer) = (vec![], vec![], vec![]);
        let mut per_layer_speedup = vec![];
        for (m, _, p) in &run {
            let t = dev
                .measure(m, b, p, REPS)
                .map_err(|e| StageError::Cuda(message(&e)))?;
            per_layer.push(summarise(t.samples_us.clone()));
            let d = dev
                .measure_dense(m.rows(), m.cols(), b, REPS)
                .map_err(|e| StageError::Cuda(e.to_string()))?;
            // Device times drift little: the i-th repeats of the two blocks are paired.
            per_layer_speedup.push(speedup(&t.samples_us, &d.samples_us));
            sparse.push(t.samples_us);
            dense.push(d.samples_us);
        }
        let (sparse_sum, dense_sum) = (summed(&sparse), summed(&dense));
        latencies.push(BatchLatency {
            batch: b,
            speedup: speedup(&sparse_sum, &dense_sum),
            sparse: summarise(sparse_sum),
            dense: summarise(dense_sum),
            // Bias and ReLU run on the host and are not timed (see the module's notes).
            non_gemm: summarise(vec![]),
            per_layer,
            per_layer_dense: dense.into_iter().map(summarise).collect(),
            per_layer_speedup,
            per_layer_in_pass: vec![],
            per_layer_dense_in_pass: vec![],
            fallbacks,
            dense_kernels: ["tuned", "cublas"],
            pass_slices: 1,
            pass_chunk: b,
            ran_dense: vec![false; run.len()],
            layer_kernels,
        });
    }
    let (weight_bytes, dense_weight_bytes) = weight_bytes(layers);
    Ok(Evaluation {
        accuracy: agree.correct as f64 / data.test_y.len().max(1) as f64,
        max_rel_error,
        latencies,
        weight_bytes,
        dense_weight_bytes,
        dense_model: dense_model(&model),
        layer_macs: layer_macs(&model),
        layer_names: layers.iter().map(|l| l.name.clone()).collect(),
    })
}

/// Adds each row's bias to a layer's output (`rows × batch`, row-major) and applies ReLU unless
/// it is the last layer.
fn add_bias_relu(out: &mut [f32], bias: &[f32], batch: usize, relu: bool) {
    for (row, b) in out.chunks_mut(batch.max(1)).zip(bias) {
        for v in row.iter_mut() {
            let x = *v + b;
            // An unconditional store (see `graph::relu`); NaN stays NaN.
            *v = if relu && x < 0.0 { 0.0 } else { x };
        }
    }
}

/// A chain of the layers' linear products (ReLU between), for the backends that run MLPs
/// only: the structure [`agreement`]'s reference follows.
fn chain_of(layers: &[LayerRun]) -> Weights {
    Weights {
        layers: layers
            .iter()
            .map(|l| Layer {
                name: l.name.clone(),
                kind: LayerKind::Linear,
                shape: vec![l.matrix.rows(), l.matrix.cols()],
                weight: vec![],
                bias: l.bias.clone(),
            })
            .collect(),
        image_shape: None,
        arch: Arch::Chain,
        params: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluate::LayerTuning;
    use crate::kernel_tune::cuda_stand_in::StandIn;
    use kernels::{synthetic, FormatSignature, Pattern};

    /// 24 features → 32 (V:N:M 16:2:8, on mma.sp) → 10 classes (2:4, which on 10 rows runs as
    /// CSR), and 40 test samples.
    fn model() -> (Dataset, Vec<LayerRun>) {
        let layer = |name: &str, p: Pattern, rows, cols, seed| LayerRun {
            name: name.into(),
            matrix: synthetic(&FormatSignature::for_pattern(&p, rows, cols).unwrap(), seed)
                .unwrap(),
            bias: (0..rows).map(|i| i as f32 / 64.0).collect(),
            tunings: vec![],
        };
        let layers = vec![
            layer("fc1", Pattern::Vnm { v: 16, m: 8 }, 32, 24, 1),
            layer("fc2", Pattern::Nm { n: 2, m: 4 }, 10, 32, 2),
        ];
        let test_x: Vec<f32> = (0..40 * 24)
            .map(|i| ((i * 37) % 17) as f32 / 8.0 - 1.0)
            .collect();
        let data = Dataset {
            name: "stand-in".into(),
            n_features: 24,
            n_classes: 10,
            train_x: vec![],
            train_y: vec![],
            test_y: (0..40).map(|i| i % 10).collect(),
            test_x,
            image_shape: None,
        };
        (data, layers)
    }

    #[test]
    fn the_layers_run_through_the_device_path_and_their_times_add_up() {
        let (data, layers) = model();
        let e = evaluate_cuda(&data, &layers, &[8, 64], &StandIn::h200()).unwrap();
        // fp16 operands and results: close to the fp64 reference, not equal to it.
        assert!(e.max_rel_error < CUDA_TOLERANCE, "{}", e.max_rel_error);
        assert!((0.0..=1.0).contains(&e.accuracy));
        assert_eq!(e.latencies.len(), 2);
        for l in &e.latencies {
            assert_eq!(l.per_layer.len(), 2);
            let sum: f64 = l.per_layer.iter().map(|t| t.median_us).sum();
            assert!((l.sparse.median_us - sum).abs() < 1e-9 * sum, "{l:?}");
            assert!(l.dense.median_us > 0.0);
            // No tunings: both layers run the cost model's best point.
            assert_eq!(l.fallbacks, 2);
        }
    }

    #[test]
    fn a_tuning_within_4x_of_the_batch_is_used() {
        let (data, mut layers) = model();
        let sig = layers[0].matrix.signature();
        let tuned = cuda_space(&sig, 64).points().pop().unwrap();
        layers[0].tunings.push(LayerTuning {
            batch_tokens: 64,
            params: tuned.clone(),
            dense_params: ParamPoint::default(),
        });
        let gpu = GpuModel::h200();
        assert_eq!(
            params_for(&layers[0], &layers[0].matrix, 64, &gpu),
            (tuned.clone(), false)
        );
        assert!(params_for(&layers[0], &layers[0].matrix, 1000, &gpu).1);
        let e = evaluate_cuda(&data, &layers, &[64, 1000], &StandIn::h200()).unwrap();
        let fallbacks: Vec<usize> = e.latencies.iter().map(|l| l.fallbacks).collect();
        assert_eq!(fallbacks, vec![1, 2]);
        let kernel = cuda_space(&sig, 64).kernel;
        assert_eq!(
            e.latencies[0].layer_kernels[0],
            format!("{kernel} {}", crate::kernel_tune::format_params(&tuned))
        );
    }

    #[test]
    fn a_tuned_hopper_point_runs_on_sm90_only() {
        let (data, mut layers) = model();
        let two_four = FormatSignature::for_pattern(&Pattern::Nm { n: 2, m: 4 }, 64, 24).unwrap();
        layers[0] = LayerRun {
            name: "fc1".into(),
            matrix: synthetic(&two_four, 1).unwrap(),
            bias: vec![0.0; 64],
            tunings: vec![],
        };
        let dense = FormatSignature::for_pattern(&Pattern::Dense, 10, 64).unwrap();
        layers[1].matrix = synthetic(&dense, 2).unwrap();
        let hopper = kernels::cuda::wgmma_space(&[64], 4).points().pop().unwrap();
        layers[0].tunings.push(LayerTuning {
            batch_tokens: 40,
            params: hopper.clone(),
            dense_params: ParamPoint::default(),
        });
        let h200 = GpuModel::h200();
        assert_eq!(
            params_for(&layers[0], &layers[0].matrix, 40, &h200),
            (hopper.clone(), false)
        );
        let e = evaluate_cuda(&data, &layers, &[40], &StandIn::h200()).unwrap();
        assert_eq!(e.latencies[0].fallbacks, 1, "only the untuned dense layer");
        // The row names the Hopper kernel and its tuned point, and the dense layer's fallback.
        let kernels = &e.latencies[0].layer_kernels;
        let wgmma = kernels::cuda::wgmma_space(&[64], 4).kernel;
        assert_eq!(kernels[0], point_label(wgmma, &hopper, false));
        assert!(kernels[0].starts_with(wgmma) && !kernels[0].ends_with(COST_MODEL_MARK));
        assert!(kernels[1].ends_with(COST_MODEL_MARK), "{kernels:?}");
        // An A100 has no Hopper kernel: the layer runs the mma.sp model's point.
        let (p, fell_back) = params_for(
            &layers[0],
            &layers[0].matrix,
            40,
            &GpuModel::for_arch("sm_80"),
        );
        assert!(fell_back && !kernels::cuda::is_wgmma_point(&p));
        let a100 = StandIn::a100();
        let err = a100.measure(&layers[0].matrix, 40, &layers[0].tunings[0].params, 1);
        assert!(err
            .unwrap_err()
            .to_string()
            .contains("needs an sm_90 device"));
        let e = evaluate_cuda(&data, &layers, &[40], &StandIn::a100()).unwrap();
        assert_eq!(e.latencies[0].fallbacks, 2);
    }

    #[test]
    fn a_wrong_product_is_an_error_not_a_result() {
        let (data, layers) = model();
        let mut dev = StandIn::h200();
        dev.error = 0.5;
        let err = evaluate_cuda(&data, &layers, &[8], &dev).unwrap_err();
        assert!(
            err.to_string()
                .contains("disagrees with the masked dense reference"),
            "{err}"
        );
        let mut dev = StandIn::h200();
        dev.dense_fails = true;
        let err = evaluate_cuda(&data, &layers, &[8], &dev).unwrap_err();
        assert!(err.to_string().contains("cuBLAS failed"), "{err}");
    }

    #[test]
    fn end_to_end_samples_add_up_layer_by_layer() {
        let s = summed(&[vec![1.0, 2.0, 3.0], vec![10.0, 20.0, 30.0]]);
        assert_eq!(s, [11.0, 22.0, 33.0]);
        let t = summarise(s);
        assert_eq!((t.median_us, t.min_us, t.repeats), (22.0, 11.0, 3));
        assert!(summed(&[]).is_empty());
    }
}
