//! Keep-masks and the builders that derive them from a score matrix, one per pattern.
//!
//! Scores are row-major `rows × cols`, higher = more important (`|w|` for magnitude pruning;
//! the prune stage passes other saliencies). NaN scores rank below every number. Ties are broken
//! towards the lower index, so every builder is deterministic.
//!
//! Choices made where the pattern leaves room:
//! - N:M, K not a multiple of M: the last group of `len < M` columns keeps `⌈N·len/M⌉` (never
//!   more than N or `len`), so its density is at least N/M.
//! - V:2:M: per V×M block the 4 columns are the quadruple (over all C(M,4)) that maximises the
//!   score the block actually keeps, i.e. the sum over its V rows of each row's best 2 of the 4;
//!   then each row keeps its best 2 of the 4. A last group narrower than 4 columns offers all of
//!   them; a row keeps `min(2, len)`.
//! - The steps towards V:2:M ([`build_vnm_nested`]): per V×M block `k` columns, the `k` of the
//!   largest score summed over the block's rows (at `k = 4` with `per_row` < 4 the quadruple as
//!   V:2:M chooses it, each row counting its best `per_row`), each row keeping its best
//!   `per_row` of them.
//! - Vector V×1: a column-vector's score is the L2 norm of its V scores; the best
//!   `round(density · vectors)` vectors are kept over the whole matrix.
//! - Unstructured: the best `round(density · rows · cols)` scores over the whole matrix.

mod select;
mod vnm;

use crate::{KernelError, Pattern};

/// A row-major keep-mask: `keep(r, c)` is true where the weight stays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mask {
    rows: usize,
    cols: usize,
    keep: Vec<bool>,
}

impl Mask {
    /// A mask from row-major keep flags; errors if the length is not `rows * cols`.
    pub fn new(rows: usize, cols: usize, keep: Vec<bool>) -> Result<Self, KernelError> {
        KernelError::check_len("mask", rows * cols, keep.len())?;
        Ok(Mask { rows, cols, keep })
    }

    /// A mask that keeps everything.
    pub fn full(rows: usize, cols: usize) -> Self {
        Mask {
            rows,
            cols,
            keep: vec![true; rows * cols],
        }
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Whether the weight at (`r`, `c`) is kept. Panics if out of range, like slice indexing.
    pub fn keep(&self, r: usize, c: usize) -> bool {
        assert!(r < self.rows && c < self.cols, "mask index out of range");
        self.keep[r * self.cols + c]
    }

    /// The row-major keep flags.
    pub fn as_slice(&self) -> &[bool] {
        &self.keep
    }

    /// Number of kept weights.
    pub fn count(&self) -> usize {
        self.keep.iter().filter(|&&k| k).count()
    }

    /// Fraction of kept weights (1 for an empty mask).
    pub fn density(&self) -> f64 {
        if self.keep.is_empty() {
            1.0
        } else {
            self.count() as f64 / self.keep.len() as f64
        }
    }

    /// `values ⊙ mask`: masked-out positions become exactly `+0.0`, kept ones are copied bit for bit.
    pub fn apply(&self, values: &[f32]) -> Result<Vec<f32>, KernelError> {
        KernelError::check_len("values", self.keep.len(), values.len())?;
        Ok(values
            .iter()
            .zip(&self.keep)
            .map(|(&v, &k)| if k { v } else { 0.0 })
            .collect())
    }
}

/// Builds the keep-mask of `pattern` for a `rows`×`cols` score matrix (row-major, higher = more
/// important). See the module documentation for the exact rule of each pattern.
pub fn build_mask(
    pattern: &Pattern,
    scores: &[f32],
    rows: usize,
    cols: usize,
) -> Result<Mask, KernelError> {
    pattern.validate_for(rows, cols)?;
    KernelError::check_len("scores", rows * cols, scores.len())?;
    let keep = match *pattern {
        Pattern::Dense => vec![true; rows * cols],
        Pattern::Unstructured { sparsity } => select::unstructured(scores, 1.0 - sparsity),
        Pattern::Nm { n, m } => select::nm(scores, rows, cols, n, m),
        Pattern::Vnm { v, m } => vnm::vnm(scores, rows, cols, v, m),
        Pattern::Vector { v, sparsity } => select::vector(scores, rows, cols, v, 1.0 - sparsity),
    };
    Mask::new(rows, cols, keep)
}

/// The keep-mask of a step of the nested structure towards V:2:M: per `v` × `m` block, `k` columns kept, each row keeping its best `per_row` of
/// them; `k = 4, per_row = 2` is V:2:M's own mask. Pruning along steps of fewer columns, then
/// fewer per row, keeps a subset of each earlier step's weights.
pub fn build_vnm_nested(
    scores: &[f32],
    rows: usize,
    cols: usize,
    (v, m): (usize, usize),
    (k, per_row): (usize, usize),
) -> Result<Mask, KernelError> {
    Pattern::Vnm { v, m }.validate_for(rows, cols)?;
    if !(4..=m).contains(&k) || !(2..=k).contains(&per_row) {
        return Err(KernelError::InvalidPattern {
            pattern: format!("{v}:{k}:{m} keeping {per_row} a row"),
            reason: "a nested V:2:M step keeps 4 ≤ k ≤ M columns a block and 2 ≤ n ≤ k a row"
                .into(),
        });
    }
    KernelError::check_len("scores", rows * cols, scores.len())?;
    Mask::new(
        rows,
        cols,
        vnm::vnm_nested(scores, rows, cols, v, m, k, per_row),
    )
}

#[cfg(test)]
mod tests;
