//! The dense format: a row-major `rows × cols` matrix.

use crate::{KernelError, Mask};

/// A dense row-major matrix. Invariant: `values.len() == rows * cols`.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseMatrix {
    rows: usize,
    cols: usize,
    values: Vec<f32>,
}

impl DenseMatrix {
    /// Checked constructor.
    pub fn new(rows: usize, cols: usize, values: Vec<f32>) -> Result<Self, KernelError> {
        KernelError::check_len("dense values", rows * cols, values.len())?;
        Ok(DenseMatrix { rows, cols, values })
    }

    /// `values ⊙ mask`.
    pub fn from_masked(values: &[f32], mask: &Mask) -> Result<Self, KernelError> {
        DenseMatrix::new(mask.rows(), mask.cols(), mask.apply(values)?)
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The row-major values.
    pub fn values(&self) -> &[f32] {
        &self.values
    }
}
