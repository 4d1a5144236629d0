//! Evaluation on the CPU kernels.

use super::measured::{dense_model, layer_macs, weight_bytes};
use super::passes::{self, paired_passes, run_cpu, PairedPasses};
use super::points::points_at;
use super::reference::{agreement, check_shapes, TOLERANCE};
use super::{alternate, graph, speedup, BatchLatency, Evaluation, LayerRun};
use crate::kernel_tune::summarise;
use crate::model::Weights;
use crate::StageError;
use datasets::Dataset;
use kernels::SparseMatrix;

/// Evaluates `layers` (the packed GEMM layers of `model`, in its order) on `data`, measuring
/// latency at each batch size for about `seconds_per_batch` each. The caller holds the
/// measurement lock.
pub fn evaluate(
    data: &Dataset,
    model: &Weights,
    layers: &[LayerRun],
    batch_sizes: &[usize],
    seconds_per_batch: f64,
) -> Result<Evaluation, StageError> {
    check_shapes(data, model, layers)?;
    let (n_test, f) = (data.test_y.len(), data.n_features);
    let tokens = model.layer_tokens();
    let sparse: Vec<&SparseMatrix> = layers.iter().map(|l| &l.matrix).collect();
    // Accuracy and agreement with the reference, over the test set in batches of 256.
    let mut buffers = passes::Buffers::default();
    let agree = agreement(data, model, layers, |xt, b| {
        let (points, _) = points_at(layers, &tokens, b, false);
        run_cpu(model, (&sparse, &points), xt, b, &mut buffers, &mut 0.0)
    })?;
    let correct = agree.correct;
    let max_rel_error = agree.max_err / agree.max_ref.max(1.0);
    if max_rel_error.is_nan() || max_rel_error > TOLERANCE {
        return Err(StageError::InvalidConfig(format!(
            "sparse inference disagrees with the masked dense reference: max relative error {max_rel_error:e} > {TOLERANCE:e}"
        )));
    }
    // The dense baseline of each layer; a dense-format layer is its own baseline, the same
    // buffer: two copies of one matrix ran 0.75-1.23x of each other at batch 1 (a memory-bound
    // product, whose speed depends on where the allocator put the values).
    let dense_packed: Vec<Option<SparseMatrix>> = layers
        .iter()
        .map(|l| match l.matrix {
            SparseMatrix::Dense(_) => Ok(None),
            _ => SparseMatrix::from_masked(
                &kernels::Pattern::Dense,
                &l.matrix.to_dense(),
                &kernels::Mask::full(l.matrix.rows(), l.matrix.cols()),
            )
            .map(Some),
        })
        .collect::<Result<_, _>>()?;
    let dense: Vec<&SparseMatrix> = dense_packed
        .iter()
        .zip(layers)
        .map(|(d, l)| d.as_ref().unwrap_or(&l.matrix))
        .collect();
    let mut latencies = vec![];
    for &b in batch_sizes {
        let x = kernels::random_values(f * b, b as u64);
        let (points, fallbacks) = points_at(layers, &tokens, b, false);
        let (dense_points, _) = points_at(layers, &tokens, b, true);
        let PairedPasses {
            way,
            points,
            dense_points,
            e2e,
            dense_e2e,
            outside,
        } = paired_passes(
            model,
            (&sparse, &points),
            (&dense, &dense_points),
            &x,
            b,
            2.0 * seconds_per_batch,
        )?;
        let non_gemm = summarise(outside);
        let e2e_speedup = speedup(&e2e, &dense_e2e);
        let dense_t = summarise(dense_e2e);
        // Each layer on its own input of this batch.
        let mut inputs: Vec<Vec<f32>> = vec![vec![]; layers.len()];
        let mut capture = |i: usize, x: &[f32], n: usize, act| -> Result<Vec<f32>, StageError> {
            inputs[i] = x.to_vec();
            let mut out = vec![0f32; sparse[i].rows() * n];
            let epilogue = passes::epilogue(model, i, act);
            kernels::spmm_with(sparse[i], x, n, &mut out, &points[i], epilogue)?;
            Ok(out)
        };
        graph::forward(model, &x, b, &mut capture)?;
        let (mut per_layer, mut per_layer_dense, mut per_layer_speedup) = (vec![], vec![], vec![]);
        let share = seconds_per_batch / layers.len() as f64;
        for (i, input) in inputs.iter().enumerate() {
            let n = b * tokens[i];
            let mut out = vec![0f32; sparse[i].rows() * n];
            let mut dense_out = vec![0f32; sparse[i].rows() * n];
            let (s, d) = alternate(
                || kernels::spmm(sparse[i], input, n, &mut out, &points[i]),
                || kernels::spmm(dense[i], input, n, &mut dense_out, &dense_points[i]),
                3,
                200,
                share,
            )?;
            per_layer_speedup.push(speedup(&s, &d));
            per_layer.push(summarise(s));
            per_layer_dense.push(summarise(d));
        }
        latencies.push(BatchLatency {
            batch: b,
            sparse: summarise(e2e),
            dense: dense_t,
            speedup: e2e_speedup,
            non_gemm,
            per_layer,
            per_layer_dense,
            per_layer_speedup,
            fallbacks,
            dense_kernels: [way, way],
        });
    }
    let (weight_bytes, dense_weight_bytes) = weight_bytes(layers);
    Ok(Evaluation {
        accuracy: correct as f64 / n_test.max(1) as f64,
        max_rel_error,
        latencies,
        weight_bytes,
        dense_weight_bytes,
        dense_model: dense_model(model),
        layer_macs: layer_macs(model),
    })
}
