//! The ways the passes of a pair may run: how their dense-format layers run
//! ([`dense_variants`]), and whole, cut into slices of samples, or cut so with each slice run
//! in chunks of samples ([`pass_ways`]).

use super::cut::{chunk_for, slice_count, Cut};
use super::slices::fits;
use crate::model::Weights;
use kernels::{ParamPoint, SparseMatrix};

/// The ways a pass may run its dense-format layers: as tuned, or all on one dense backend
/// (`faer`, `gemm`) with the tuned thread counts. Each dense backend is tuned on a layer alone,
/// but inside a pass, between host computations, the two do not cost what they cost alone (on
/// a 2-block ViT at batch 1 with an earlier, strided LayerNorm, the passes took 3× longer with
/// faer than with gemm, outside the GEMM calls themselves; which one wins depends on what runs
/// between the GEMMs), so the dense pass is timed in every way and the fastest kept.
fn dense_variants(
    matrices: &[&SparseMatrix],
    points: &[ParamPoint],
) -> Vec<(&'static str, Vec<ParamPoint>)> {
    let mut out = vec![("tuned", points.to_vec())];
    for (name, backend) in [("faer", 0), ("gemm", 1)] {
        let variant: Vec<ParamPoint> = matrices
            .iter()
            .zip(points)
            .map(|(m, p)| {
                let mut q = p.clone();
                if matches!(m, SparseMatrix::Dense(_)) {
                    q.0.insert("backend".into(), backend);
                }
                q
            })
            .collect();
        let valid = matrices.iter().zip(&variant).all(|(m, q)| {
            !matches!(m, SparseMatrix::Dense(_))
                || kernels::dense_space(m.rows(), m.cols(), 1)
                    .contains(q)
                    .is_ok()
        });
        if valid && !out.iter().any(|(_, v)| *v == variant) {
            out.push((name, variant));
        }
    }
    out
}

/// Every way [`super::passes::paired_passes`] runs the passes.
pub(super) struct Ways {
    /// Each way: its name ([`dense_variants`]), the dense pass's points and how both passes
    /// are cut.
    pub ways: Vec<(&'static str, Vec<ParamPoint>, Cut)>,
    /// The sparse passes: points and cut (one per way, or fewer: ways that differ only in
    /// dense-format layers the sparse model does not have share one).
    pub sparse_ways: Vec<(Vec<ParamPoint>, Cut)>,
    /// Per way, its sparse pass's index in `sparse_ways`.
    pub sparse_of: Vec<usize>,
}

/// The ways of running the passes: each of [`dense_variants`] whole and, where both passes'
/// points fit a slice ([`fits`]), cut into as many slices as the points use threads, and where
/// a slice's activations outgrow the L2 cache ([`chunk_for`]), cut so and each slice run in
/// chunks of samples; the sparse pass runs its dense-format layers at the dense pass's points
/// of the same way, and every sparse pass is cut as its dense pass is.
pub(super) fn pass_ways(
    model: &Weights,
    (sparse, points): (&[&SparseMatrix], &[ParamPoint]),
    (dense, dense_points): (&[&SparseMatrix], &[ParamPoint]),
    b: usize,
) -> Ways {
    let slices = slice_count(&[points, dense_points], b);
    let mut cuts = vec![Cut::whole(b)];
    if slices > 1 {
        cuts.push(Cut::sliced(b, slices));
    }
    if let Some(chunk) = chunk_for(model, b.div_ceil(slices.max(1))) {
        cuts.push(Cut { slices, chunk });
    }
    let mut out = Ways {
        ways: vec![],
        sparse_ways: vec![],
        sparse_of: vec![],
    };
    for (name, d) in dense_variants(dense, dense_points) {
        let pts: Vec<ParamPoint> = points
            .iter()
            .zip(&d)
            .zip(sparse)
            .map(|((p, d), m)| match m {
                SparseMatrix::Dense(_) => d.clone(),
                _ => p.clone(),
            })
            .collect();
        for &cut in &cuts {
            let fit = |m, p| fits(model, (m, p), b, cut);
            let fits_both = fit(dense, &d) && fit(sparse, &pts);
            if !(cut.is_whole(b) || fits_both) {
                continue;
            }
            let key = (pts.clone(), cut);
            let at = match out.sparse_ways.iter().position(|s| *s == key) {
                Some(at) => at,
                None => {
                    out.sparse_ways.push(key);
                    out.sparse_ways.len() - 1
                }
            };
            out.sparse_of.push(at);
            out.ways.push((name, d.clone(), cut));
        }
    }
    out
}
