//! Which point each layer runs at a batch size: its tuning nearest in batch tokens, or the cost
//! model's best point where no tuning is near enough.

use super::{LayerRun, LayerTuning};
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
/// columns), sparse or (`dense`) its dense baseline, and how many were fallbacks.
pub(super) fn points_at(
    layers: &[LayerRun],
    tokens: &[usize],
    b: usize,
    dense: bool,
) -> (Vec<ParamPoint>, usize) {
    let mut fallbacks = 0;
    let points = layers
        .iter()
        .zip(tokens)
        .map(|(l, &t)| {
            let (p, fb) = params_for(l, b * t, dense);
            fallbacks += usize::from(fb);
            p
        })
        .collect();
    (points, fallbacks)
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
}
