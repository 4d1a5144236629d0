//! Test fixtures shared by the evaluation's unit tests: a small model's layers packed in a
//! pattern, and ready to run.

use super::LayerRun;
use crate::model::Weights;
use kernels::{Pattern, SparseMatrix};

/// Layer `i` of `w` pruned to `p` by magnitude and packed.
pub(super) fn pack(w: &Weights, i: usize, p: &Pattern) -> SparseMatrix {
    let l = &w.layers[i];
    let mask = match p {
        Pattern::Dense => kernels::Mask::full(l.rows(), l.cols()),
        _ => kernels::build_mask(p, &l.weight, l.rows(), l.cols()).unwrap(),
    };
    SparseMatrix::from_masked(p, &l.weight, &mask).unwrap()
}

/// `ms` as the layers of `w` (names and biases from `w`), untuned.
pub(super) fn runs(w: &Weights, ms: &[SparseMatrix]) -> Vec<LayerRun> {
    ms.iter()
        .zip(&w.layers)
        .map(|(m, l)| LayerRun {
            name: l.name.clone(),
            matrix: m.clone(),
            bias: l.bias.clone(),
            tunings: vec![],
        })
        .collect()
}

/// A 16→32→4 MLP, its layers packed dense, and packed with the first layer 2:4 and the 4-row
/// head dense.
pub(super) fn small_mlp() -> (Weights, Vec<SparseMatrix>, Vec<SparseMatrix>) {
    let spec = crate::ModelSpec::Mlp { hidden: vec![32] };
    let w = Weights::init(&spec, 16, None, 4, 3).unwrap();
    let dense: Vec<SparseMatrix> = (0..2).map(|i| pack(&w, i, &Pattern::Dense)).collect();
    let mixed = vec![
        pack(&w, 0, &Pattern::Nm { n: 2, m: 4 }),
        pack(&w, 1, &Pattern::Dense),
    ];
    (w, dense, mixed)
}
