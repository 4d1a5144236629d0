//! Evaluation on the CUDA backend: each layer's product runs on the device through
//! [`CudaDevice::spmm`] with its tuned point; bias and ReLU are applied on the host.
//!
//! - Numerics: the V:N:M, 2:4 and dense kernels round A, B and C to fp16 (fp32 accumulation),
//!   CSR is fp32. The logits must agree with the masked dense fp64 reference within
//!   [`CUDA_TOLERANCE`] of the reference's largest |logit| (fp16 keeps 11 significant bits,
//!   ~5e-4 relative per rounding, and each layer rounds its input, weights and output).
//! - Latency: per layer, the device-event time of the layer's product ([`CudaDevice::measure`],
//!   [`REPS`] samples of 10 back-to-back launches); end to end, the sample-wise sum over the
//!   layers. Host transfers are excluded, and so are bias and ReLU (no device kernel for them
//!   yet, so the layers cannot be chained on the device). The dense run is cuBLAS fp16 on the
//!   same shapes, timed the same way.
//! - Layers whose format no CUDA kernel implements run as CSR, as their tuning did
//!   ([`cuda_runnable`]).

use super::{
    add_bias_relu, agreement, check_shapes, guiding_tuning, weight_bytes, BatchLatency, Evaluation,
    LayerRun,
};
use crate::kernel_tune::cuda::{cuda_runnable, message, ranked_space, REPS};
use crate::kernel_tune::{summarise, Timing};
use crate::StageError;
use datasets::Dataset;
use kernels::cuda::{cuda_space, CudaDevice, GpuModel};
use kernels::{ParamPoint, SparseMatrix};

/// Largest |output − reference| allowed, relative to the reference's largest |logit|.
pub const CUDA_TOLERANCE: f64 = 1e-2;

/// What the latency columns of a CUDA evaluation measure.
pub const LATENCY_SCOPE: &str = "sum of the layers' device-timed products; host transfers, \
bias and ReLU excluded";

/// The point a layer runs at batch size `n`: the tuning nearest in batch tokens when it is
/// within 4× of `n` and a point of the layer's CUDA space, else the cost model's best point on
/// `gpu`, flagged `true`.
fn params_for(
    layer: &LayerRun,
    runnable: &SparseMatrix,
    n: usize,
    gpu: &GpuModel,
) -> (ParamPoint, bool) {
    let sig = runnable.signature();
    let space = cuda_space(&sig, n);
    if let Some(t) = guiding_tuning(&layer.tunings, n) {
        if space.contains(&t.params).is_ok() {
            return (t.params.clone(), false);
        }
    }
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

/// A layer as it runs: the matrix the device multiplies, its bias, its point.
type Step<'a> = (&'a SparseMatrix, &'a [f32], ParamPoint);

/// Runs the layers on `xt` (features × batch) on the device, returning the logits.
fn forward(
    dev: &CudaDevice,
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
fn sum_samples(per_layer: &[Vec<f64>]) -> Timing {
    let n = per_layer.iter().map(Vec::len).min().unwrap_or(0);
    summarise(
        (0..n)
            .map(|i| per_layer.iter().map(|s| s[i]).sum())
            .collect(),
    )
}

/// Evaluates `layers` (forward order, ReLU between) on `data` through the CUDA kernels of
/// `dev`, measuring latency at each batch size (see the module's notes). The caller holds the
/// measurement lock.
pub fn evaluate_cuda(
    data: &Dataset,
    layers: &[LayerRun],
    batch_sizes: &[usize],
    dev: &CudaDevice,
) -> Result<Evaluation, StageError> {
    check_shapes(data, layers)?;
    let runnable: Vec<SparseMatrix> = layers
        .iter()
        .map(|l| cuda_runnable(&l.matrix).map(|(m, _)| m))
        .collect::<Result<_, _>>()?;
    let gpu = GpuModel::for_device(dev.info());
    let run_at = |b: usize| -> (Vec<Step>, usize) {
        let mut fallbacks = 0;
        let run = layers
            .iter()
            .zip(&runnable)
            .map(|(l, m)| {
                let (p, fb) = params_for(l, m, b, &gpu);
                fallbacks += usize::from(fb);
                (m, l.bias.as_slice(), p)
            })
            .collect();
        (run, fallbacks)
    };
    let agree = agreement(data, layers, |xt, b| forward(dev, &run_at(b).0, xt, b))?;
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
        let (run, fallbacks) = run_at(b);
        let (mut sparse, mut dense, mut per_layer) = (vec![], vec![], vec![]);
        for (m, _, p) in &run {
            let t = dev
                .measure(m, b, p, REPS)
                .map_err(|e| StageError::Cuda(message(&e)))?;
            per_layer.push(summarise(t.samples_us.clone()));
            sparse.push(t.samples_us);
            let d = dev
                .measure_dense(m.rows(), m.cols(), b, REPS)
                .map_err(|e| StageError::Cuda(e.to_string()))?;
            dense.push(d.samples_us);
        }
        latencies.push(BatchLatency {
            batch: b,
            sparse: sum_samples(&sparse),
            dense: sum_samples(&dense),
            per_layer,
            fallbacks,
        });
    }
    let (weight_bytes, dense_weight_bytes) = weight_bytes(layers);
    Ok(Evaluation {
        accuracy: agree.correct as f64 / data.test_y.len().max(1) as f64,
        max_rel_error,
        latencies,
        weight_bytes,
        dense_weight_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_to_end_samples_add_up_layer_by_layer() {
        let t = sum_samples(&[vec![1.0, 2.0, 3.0], vec![10.0, 20.0, 30.0]]);
        assert_eq!(t.median_us, 22.0);
        assert_eq!(t.min_us, 11.0);
        assert_eq!(t.repeats, 3);
        assert!(sum_samples(&[]).median_us.is_nan());
    }
}
