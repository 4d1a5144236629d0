//! Evaluation on the CPU kernels.

use super::measured::{dense_model, layer_macs, point_label, weight_bytes};
use super::paired::Speedup;
use super::passes::{self, paired_passes, run_cpu, PairedPasses};
use super::points::{dense_where_slower, points_at};
use super::reference::{agreement, check_shapes, TOLERANCE};
use super::{alternate, graph, speedup, BatchLatency, Evaluation, LayerRun};
use crate::kernel_tune::{summarise, Timing};
use crate::model::Weights;
use crate::StageError;
use datasets::Dataset;
use kernels::{ParamPoint, SparseMatrix};

/// Evaluates `layers` (the packed GEMM layers of `model`, in its order) on `data`, measuring
/// latency at each batch size: the sparse and the dense pass in alternation for
/// `2 × seconds_per_batch`, then the layers alone for `seconds_per_batch`; with
/// `dense_where_faster`, where a layer lost alone, two more timings of the passes (`7 ×` in
/// all; see [`batch_latency`]). The caller holds the measurement lock.
pub fn evaluate(
    data: &Dataset,
    model: &Weights,
    layers: &[LayerRun],
    batch_sizes: &[usize],
    seconds_per_batch: f64,
    dense_where_faster: bool,
) -> Result<Evaluation, StageError> {
    check_shapes(data, model, layers)?;
    let n_test = data.test_y.len();
    let tokens = model.layer_tokens();
    let sparse: Vec<&SparseMatrix> = layers.iter().map(|l| &l.matrix).collect();
    // Accuracy and agreement with the reference, over the test set in batches of 256, through
    // every layer's sparse kernel (a layer run dense computes the same masked product).
    let mut buffers = passes::Buffers::default();
    let agree = agreement(data, model, layers, |xt, b| {
        let (points, _) = points_at(layers, &tokens, b, false);
        run_cpu(model, (&sparse, &points), xt, b, &mut buffers, &mut vec![])
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
            _ => dense_copy(&l.matrix).map(Some),
        })
        .collect::<Result<_, _>>()?;
    let dense: Vec<&SparseMatrix> = dense_packed
        .iter()
        .zip(layers)
        .map(|(d, l)| d.as_ref().unwrap_or(&l.matrix))
        .collect();
    let mut latencies = vec![];
    for &b in batch_sizes {
        let at = Batch {
            model,
            layers,
            matrices: (&sparse, &dense),
            tokens: &tokens,
            b,
            seconds: seconds_per_batch,
        };
        latencies.push(batch_latency(&at, dense_where_faster)?);
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
        layer_names: layers.iter().map(|l| l.name.clone()).collect(),
    })
}

/// `m`'s weights (zeros where pruned) packed dense: its dense baseline, and what a layer run
/// dense multiplies.
fn dense_copy(m: &SparseMatrix) -> Result<SparseMatrix, kernels::KernelError> {
    let full = kernels::Mask::full(m.rows(), m.cols());
    SparseMatrix::from_masked(&kernels::Pattern::Dense, &m.to_dense(), &full)
}

/// What one batch size's measurement runs.
struct Batch<'a> {
    model: &'a Weights,
    layers: &'a [LayerRun],
    /// Each layer's packed weights and its dense baseline.
    matrices: (&'a [&'a SparseMatrix], &'a [&'a SparseMatrix]),
    /// Each layer's columns per sample.
    tokens: &'a [usize],
    /// Batch size.
    b: usize,
    /// Seconds of measurement per pass pair and for all the layers alone.
    seconds: f64,
}

/// One batch size's latencies: the sparse and the dense pass in alternation, then each layer
/// alone on its input, its sparse kernel in alternation with its dense one.
///
/// With `dense_where_faster`, where some layers' sparse kernels lost alone (paired median below
/// 1; [`dense_where_slower`]), the model with those layers run dense (as the dense pass runs
/// them) is timed against the dense pass too, and kept if its paired speedup is the higher:
/// a layer's time alone does not carry over to the pass (alone, without its fused bias and
/// ReLU, the quickstart's 2:4 layers lost narrowly at batch 256 where the model won by 1.2×).
/// The two passes are then timed once more for the figures, so that they are not the noise the
/// choice picked. The per-layer figures stay each layer's own kernels', at the points of the
/// first (all-sparse) timing, whose dense way the last timing may not have kept.
fn batch_latency(at: &Batch, dense_where_faster: bool) -> Result<BatchLatency, StageError> {
    let (model, layers, tokens, b) = (at.model, at.layers, at.tokens, at.b);
    let (sparse, dense) = at.matrices;
    let x = kernels::random_values(model.n_features() * b, b as u64);
    let (points, fell_back) = points_at(layers, tokens, b, false);
    let (dense_points, dense_fell_back) = points_at(layers, tokens, b, true);
    let passes = |run: &[&SparseMatrix], points: &[ParamPoint]| {
        paired_passes(
            model,
            (run, points),
            (dense, &dense_points),
            &x,
            b,
            2.0 * at.seconds,
        )
    };
    let mut timed = passes(sparse, &points)?;
    let alone = layers_alone(at, &x, &timed)?;
    let lost = dense_where_slower(sparse, &alone.speedup, dense_where_faster);
    let mut ran_dense = vec![false; layers.len()];
    if lost.contains(&true) {
        let (run, run_points) = mixed((sparse, dense), (&points, &dense_points), &lost);
        let mixed = passes(&run, &run_points)?;
        let gain = |t: &PairedPasses| speedup(&t.e2e, &t.dense_e2e).median;
        timed = if gain(&mixed) > gain(&timed) {
            ran_dense = lost;
            passes(&run, &run_points)?
        } else {
            passes(sparse, &points)?
        };
    }
    let PairedPasses {
        way,
        cut,
        points: ran_points,
        e2e,
        dense_e2e,
        outside,
        layer_us,
        dense_layer_us,
        ..
    } = timed;
    // What ran each layer: its sparse matrix at its point, or (kept dense, or run dense) its
    // dense copy at its dense point, as the passes ran them (`paired_passes`, `mixed`).
    let ran: Vec<(&SparseMatrix, bool)> = (0..layers.len())
        .map(|i| {
            if ran_dense[i] || matches!(sparse[i], SparseMatrix::Dense(_)) {
                (dense[i], dense_fell_back[i])
            } else {
                (sparse[i], fell_back[i])
            }
        })
        .collect();
    let layer_kernels = ran
        .iter()
        .zip(&ran_points)
        .zip(tokens)
        .map(|((&(m, fell), p), &t)| {
            point_label(kernels::cpu_space(&m.signature(), b * t).kernel, p, fell)
        })
        .collect();
    Ok(BatchLatency {
        batch: b,
        speedup: speedup(&e2e, &dense_e2e),
        sparse: summarise(e2e),
        dense: summarise(dense_e2e),
        non_gemm: summarise(outside),
        per_layer: alone.sparse,
        per_layer_dense: alone.dense,
        per_layer_speedup: alone.speedup,
        per_layer_in_pass: layer_us.into_iter().map(summarise).collect(),
        per_layer_dense_in_pass: dense_layer_us.into_iter().map(summarise).collect(),
        // A layer run dense, or kept dense, ran its dense point.
        fallbacks: ran.iter().filter(|(_, fell)| *fell).count(),
        dense_kernels: [way, way],
        pass_slices: cut.slices,
        pass_chunk: cut.samples_at_once(b),
        ran_dense,
        layer_kernels,
    })
}

/// The sparse model with the layers `dense_here` marks run through their dense copies at their
/// dense points (`paired_passes` runs a dense-format layer as the dense pass does).
fn mixed<'a>(
    (sparse, dense): (&[&'a SparseMatrix], &[&'a SparseMatrix]),
    (points, dense_points): (&[ParamPoint], &[ParamPoint]),
    dense_here: &[bool],
) -> (Vec<&'a SparseMatrix>, Vec<ParamPoint>) {
    (0..sparse.len())
        .map(|i| {
            if dense_here[i] {
                (dense[i], dense_points[i].clone())
            } else {
                (sparse[i], points[i].clone())
            }
        })
        .unzip()
}

/// Each layer timed alone (see [`layers_alone`]).
struct Alone {
    /// Through its sparse kernel.
    sparse: Vec<Timing>,
    /// Through its dense baseline, in alternation.
    dense: Vec<Timing>,
    /// `dense / sparse` from the pairs.
    speedup: Vec<Speedup>,
}

/// Each layer alone on its own input at this batch, through its sparse kernel at the point the
/// passes ran and in alternation its dense baseline: their timings and paired speedups.
fn layers_alone(at: &Batch, x: &[f32], timed: &PairedPasses) -> Result<Alone, StageError> {
    let (model, b) = (at.model, at.b);
    let (sparse, dense) = at.matrices;
    let (points, dense_points) = (&timed.points, &timed.dense_points);
    let mut inputs: Vec<Vec<f32>> = vec![vec![]; sparse.len()];
    let mut capture = |i: usize, x: &[f32], n: usize, act| -> Result<Vec<f32>, StageError> {
        inputs[i] = x.to_vec();
        let mut out = vec![0f32; sparse[i].rows() * n];
        let epilogue = passes::epilogue(model, i, act);
        kernels::spmm_with(sparse[i], x, n, &mut out, &points[i], epilogue)?;
        Ok(out)
    };
    graph::forward(model, x, b, &mut capture)?;
    let mut alone = Alone {
        sparse: vec![],
        dense: vec![],
        speedup: vec![],
    };
    let share = at.seconds / sparse.len() as f64;
    for (i, input) in inputs.iter().enumerate() {
        let n = b * at.tokens[i];
        let mut out = vec![0f32; sparse[i].rows() * n];
        let mut dense_out = vec![0f32; sparse[i].rows() * n];
        let (s, d) = alternate(
            || kernels::spmm(sparse[i], input, n, &mut out, &points[i]),
            || kernels::spmm(dense[i], input, n, &mut dense_out, &dense_points[i]),
            3,
            200,
            share,
        )?;
        alone.speedup.push(speedup(&s, &d));
        alone.sparse.push(summarise(s));
        alone.dense.push(summarise(d));
    }
    Ok(alone)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures;
    use super::super::measured::COST_MODEL_MARK as COST_MODEL;
    use super::*;
    use kernels::Pattern;

    /// The mixed model runs the marked layers through the dense pass's own matrices at the
    /// dense pass's points, and the others as they were.
    #[test]
    fn a_layer_run_dense_runs_as_the_dense_pass_runs_it() {
        let spec = crate::ModelSpec::Mlp { hidden: vec![32] };
        let w = Weights::init(&spec, 16, None, 4, 3).unwrap();
        let nm = Pattern::Nm { n: 2, m: 4 };
        let sparse = [fixtures::pack(&w, 0, &nm), fixtures::pack(&w, 1, &nm)];
        let dense: Vec<SparseMatrix> = sparse.iter().map(|m| dense_copy(m).unwrap()).collect();
        let runs = fixtures::runs(&w, &sparse);
        let tokens = w.layer_tokens();
        let (points, _) = points_at(&runs, &tokens, 8, false);
        let (dense_points, _) = points_at(&runs, &tokens, 8, true);
        let s: Vec<&SparseMatrix> = sparse.iter().collect();
        let d: Vec<&SparseMatrix> = dense.iter().collect();
        let (run, run_points) = mixed((&s, &d), (&points, &dense_points), &[false, true]);
        assert!(std::ptr::eq(run[0], s[0]) && std::ptr::eq(run[1], d[1]));
        assert_eq!(run_points, [points[0].clone(), dense_points[1].clone()]);
        let x = kernels::random_values(16 * 8, 5);
        let timed =
            paired_passes(&w, (&run, &run_points), (&d, &dense_points), &x, 8, 0.0).unwrap();
        assert_eq!(timed.points[0], points[0]);
        assert_eq!(timed.points[1], timed.dense_points[1]);
        // Each layer's time inside a pass: one per layer and sample, together within the pass.
        for (layers, e2e) in [
            (&timed.layer_us, &timed.e2e),
            (&timed.dense_layer_us, &timed.dense_e2e),
        ] {
            assert_eq!(layers.len(), 2);
            assert!(layers.iter().all(|l| l.len() == e2e.len()));
            for (r, &pass) in e2e.iter().enumerate() {
                let gemms: f64 = layers.iter().map(|l| l[r]).sum();
                assert!(
                    layers.iter().all(|l| l[r] > 0.0) && gemms <= pass,
                    "{gemms} > {pass}"
                );
            }
        }
        // The mixed pass computes what the all-sparse one does, within rounding.
        let mut buffers = passes::Buffers::default();
        let mut t = vec![];
        let out = run_cpu(&w, (&run, &timed.points), &x, 8, &mut buffers, &mut t).unwrap();
        let mut b2 = passes::Buffers::default();
        let all = run_cpu(&w, (&s, &points), &x, 8, &mut b2, &mut t).unwrap();
        assert_eq!(out.len(), all.len());
        for (a, b) in out.iter().zip(&all) {
            assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{a} {b}");
        }
    }

    /// Each layer's row entry names the kernel and point that ran it: the tuning's where one
    /// guides the batch, the cost model's (marked) where none does, and a dense-format layer's
    /// dense kernel.
    #[test]
    fn the_evaluation_names_each_layers_kernel_and_point() {
        let spec = crate::ModelSpec::Mlp { hidden: vec![32] };
        let w = Weights::init(&spec, 16, None, 4, 3).unwrap();
        let nm = Pattern::Nm { n: 2, m: 4 };
        let ms = [
            fixtures::pack(&w, 0, &nm),
            fixtures::pack(&w, 1, &Pattern::Dense),
        ];
        let mut runs = fixtures::runs(&w, &ms);
        let sig = ms[0].signature();
        let tuned = kernels::cpu_space(&sig, 8).points().pop().unwrap();
        runs[0].tunings.push(super::super::LayerTuning {
            batch_tokens: 8,
            params: tuned.clone(),
            dense_params: kernels::dense_space(32, 16, 8).points().remove(0),
        });
        let data = Dataset {
            name: "fixture".into(),
            n_features: 16,
            n_classes: 4,
            train_x: vec![],
            train_y: vec![],
            test_x: (0..12 * 16)
                .map(|i| ((i * 7) % 11) as f32 / 5.0 - 1.0)
                .collect(),
            test_y: (0..12).map(|i| i % 4).collect(),
            image_shape: None,
        };
        let e = evaluate(&data, &w, &runs, &[8, 100], 0.0, false).unwrap();
        let at = |b: usize| {
            &e.latencies
                .iter()
                .find(|l| l.batch == b)
                .unwrap()
                .layer_kernels
        };
        let kernel = kernels::cpu_space(&sig, 8).kernel;
        assert_eq!(at(8)[0], point_label(kernel, &tuned, false));
        assert!(at(100)[0].starts_with(kernel) && at(100)[0].ends_with(COST_MODEL));
        let dense = kernels::cpu_space(&ms[1].signature(), 8).kernel;
        for b in [8, 100] {
            assert_eq!(at(b).len(), 2);
            assert!(at(b)[1].starts_with(dense), "{:?}", at(b));
        }
    }
}
