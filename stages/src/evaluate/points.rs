//! Which point each layer runs at a batch size: its tuning nearest in batch tokens, or the cost
//! model's best point where no tuning is near enough; and which layers run dense instead.

use super::{LayerRun, LayerTuning, Speedup};
use kernels::{FormatSignature, ParamPoint, SparseMatrix};

/// The point a layer (or, with `dense`, its dense baseline) runs at batch size `n`: the tuning
/// nearest in batch tokens when it is within 4× of `n` and valid there, else the cost model's
/// best point (the `bool` says a fallback was taken).
fn params_for(layer: &LayerRun, n: usize, dense: bool) -> (ParamPoint, bool) {
    let sig = if dense {
        dense_sig(&layer.matrix)
    } else {
        layer.matrix.signature()
    };
    let space = kernels::cpu_space(&sig, n);
    if let Some(t) = guiding_tuning(&layer.tunings, n) {
        let p = if dense { &t.dense_params } else { &t.params };
        if space.contains(p).is_ok() {
            return (p.clone(), false);
        }
    }
    let best = space
        .points()
        .into_iter()
        .min_by(|a, b| {
            kernels::predicted_cost(&sig, n, a).total_cmp(&kernels::predicted_cost(&sig, n, b))
        })
        .unwrap_or_default();
    (best, true)
}

/// Whether a tuning at `tuned` columns guides a product of `n` columns: it is at most 4× larger
/// or smaller. A point tuned for a batch further away is no guide (e.g. two threads tuned at 64
/// columns cost more in pool hand-off than a batch of 1 computes). The engine tunes every
/// evaluated batch size that no tuned one guides, so that evaluations need no fallback.
pub fn guides(tuned: usize, n: usize) -> bool {
    log_distance(tuned, n) <= 4f64.ln() + 1e-9
}

/// `|ln a − ln b|`, with 0 counted as 1.
fn log_distance(a: usize, b: usize) -> f64 {
    ((a.max(1) as f64).ln() - (b.max(1) as f64).ln()).abs()
}

/// Of the tuned batch sizes `batches`, the one that guides batch size `n` ([`guides`]): the
/// nearest in log batch size (the first of equals), if it is within 4×. An evaluation runs each
/// layer at its tuning at that batch; the unified search names it when it refuses an untuned
/// batch size.
pub fn guiding_batch(batches: impl IntoIterator<Item = usize>, n: usize) -> Option<usize> {
    batches
        .into_iter()
        .min_by(|&a, &b| log_distance(a, n).total_cmp(&log_distance(b, n)))
        .filter(|&t| guides(t, n))
}

/// The tuning that guides batch size `n` ([`guiding_batch`]); without one the cost model's
/// best point for this batch is used instead, counted as a fallback.
pub(super) fn guiding_tuning(tunings: &[LayerTuning], n: usize) -> Option<&LayerTuning> {
    let batch = guiding_batch(tunings.iter().map(|t| t.batch_tokens), n)?;
    tunings.iter().find(|t| t.batch_tokens == batch)
}

/// Each layer's point at batch size `b` (its GEMM has `b` times its tokens per sample as
/// columns), sparse or (`dense`) its dense baseline, and which were fallbacks.
pub(super) fn points_at(
    layers: &[LayerRun],
    tokens: &[usize],
    b: usize,
    dense: bool,
) -> (Vec<ParamPoint>, Vec<bool>) {
    layers
        .iter()
        .zip(tokens)
        .map(|(l, &t)| params_for(l, b * t, dense))
        .unzip()
}

/// Which layers the sparse pass may run through their dense copies with `dense_where_faster`
/// (the evaluation keeps them dense if that model is the faster): the sparse-format ones whose
/// kernel lost to the dense one when both were timed alone in alternation on the layer's input
/// at this batch (`speedups[i]`, the paired median below 1). None without the option.
pub(super) fn dense_where_slower(
    matrices: &[&SparseMatrix],
    speedups: &[Speedup],
    dense_where_faster: bool,
) -> Vec<bool> {
    matrices
        .iter()
        .zip(speedups)
        .map(|(m, s)| dense_where_faster && !matches!(m, SparseMatrix::Dense(_)) && s.median < 1.0)
        .collect()
}

fn dense_sig(m: &SparseMatrix) -> FormatSignature {
    FormatSignature::for_pattern(&kernels::Pattern::Dense, m.rows(), m.cols())
        .expect("dense fits every shape")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernels::{cpu_space, dense_space, synthetic, Pattern};

    #[test]
    fn a_tuning_far_from_the_batch_is_not_used() {
        let sig = FormatSignature::for_pattern(&Pattern::Nm { n: 2, m: 4 }, 32, 16).unwrap();
        // A point valid at every batch below (so only the distance rule can reject it).
        let tuned = cpu_space(&sig, 64)
            .points()
            .into_iter()
            .rfind(|p| {
                [1, 15, 257]
                    .iter()
                    .all(|&n| cpu_space(&sig, n).contains(p).is_ok())
            })
            .unwrap();
        let dense = dense_space(32, 16, 64).points().pop().unwrap();
        let layer = LayerRun {
            name: "l".into(),
            matrix: synthetic(&sig, 1).unwrap(),
            bias: vec![0.0; 32],
            tunings: vec![LayerTuning {
                batch_tokens: 64,
                params: tuned.clone(),
                dense_params: dense.clone(),
            }],
        };
        // Within 4x (16 and 256 are exactly 4x away): the tuned points.
        for n in [16, 64, 256] {
            assert_eq!(
                params_for(&layer, n, false),
                (tuned.clone(), false),
                "n = {n}"
            );
            assert_eq!(
                params_for(&layer, n, true),
                (dense.clone(), false),
                "n = {n}"
            );
        }
        // Further: the cost model's best point for that batch, counted as a fallback.
        for n in [1, 15, 257] {
            let (p, fallback) = params_for(&layer, n, false);
            assert!(fallback, "n = {n}");
            assert!(cpu_space(&sig, n).contains(&p).is_ok());
            assert!(params_for(&layer, n, true).1, "n = {n}");
        }
    }

    #[test]
    fn only_sparse_layers_that_lost_run_dense_and_only_on_request() {
        let nm = FormatSignature::for_pattern(&Pattern::Nm { n: 2, m: 4 }, 8, 8).unwrap();
        let d = FormatSignature::for_pattern(&Pattern::Dense, 8, 8).unwrap();
        let (a, b, c) = (
            synthetic(&nm, 1).unwrap(),
            synthetic(&nm, 2).unwrap(),
            synthetic(&d, 3).unwrap(),
        );
        let at = |median| Speedup {
            median,
            lo: median,
            hi: median,
            pairs: 3,
        };
        let speedups = [at(0.99), at(1.0), at(0.5)];
        let m = [&a, &b, &c];
        assert_eq!(
            dense_where_slower(&m, &speedups, true),
            [true, false, false]
        );
        assert_eq!(dense_where_slower(&m, &speedups, false), [false; 3]);
        // NaN (unmeasured) is not a loss.
        assert_eq!(dense_where_slower(&m[..1], &[at(f64::NAN)], true), [false]);
    }
}
