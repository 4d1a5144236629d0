//! Sparse matrix formats, one type per pattern, and [`SparseMatrix`], the sum type kernels take.
//! Every type lists its invariants and checks them in its constructor; `from_masked` followed by
//! `to_dense` returns `values ⊙ mask` bit for bit.

mod csr;
mod dense;
mod nm;
mod panels;
mod row_pairs;
mod vector;
mod vnm;

pub use csr::CsrMatrix;
pub use dense::DenseMatrix;
pub(crate) use nm::pairs_fit as nm_pairs_fit;
pub use nm::NmMatrix;
pub(crate) use panels::{CsrPanels, RowPanels};
pub(crate) use row_pairs::RowPairs;
pub use vector::VectorMatrix;
pub use vnm::{meta_word_shift, vnm_k_sp, vnm_meta_words, VnmMatrix};

use crate::pattern::ppm;
use crate::{FormatSignature, KernelError, Mask, Pattern, PatternKind};

/// A weight matrix in the format of its pattern.
#[derive(Debug, Clone, PartialEq)]
pub enum SparseMatrix {
    /// Dense.
    Dense(DenseMatrix),
    /// Unstructured, as CSR.
    Csr(CsrMatrix),
    /// N:M.
    Nm(NmMatrix),
    /// V:2:M (Spatha layout).
    Vnm(VnmMatrix),
    /// Vector-wise V×1.
    Vector(VectorMatrix),
}

impl SparseMatrix {
    /// Packs `values ⊙ mask` (row-major, the mask's shape) into `pattern`'s format. Errors if the
    /// pattern does not fit the shape or the mask breaks the pattern's structure. The mask need
    /// not be the one [`crate::build_mask`] would build, only one the format can hold.
    pub fn from_masked(
        pattern: &Pattern,
        values: &[f32],
        mask: &Mask,
    ) -> Result<Self, KernelError> {
        pattern.validate_for(mask.rows(), mask.cols())?;
        Ok(match *pattern {
            Pattern::Dense => SparseMatrix::Dense(DenseMatrix::from_masked(values, mask)?),
            Pattern::Unstructured { .. } => {
                SparseMatrix::Csr(CsrMatrix::from_masked(values, mask)?)
            }
            Pattern::Nm { n, m } => SparseMatrix::Nm(NmMatrix::from_masked(values, mask, n, m)?),
            Pattern::Vnm { v, m } => SparseMatrix::Vnm(VnmMatrix::from_masked(values, mask, v, m)?),
            Pattern::Vector { v, .. } => {
                SparseMatrix::Vector(VectorMatrix::from_masked(values, mask, v)?)
            }
        })
    }

    /// The dense row-major matrix; equals `values ⊙ mask` of the packing, bit for bit.
    pub fn to_dense(&self) -> Vec<f32> {
        match self {
            SparseMatrix::Dense(a) => a.values().to_vec(),
            SparseMatrix::Csr(a) => a.to_dense(),
            SparseMatrix::Nm(a) => a.to_dense(),
            SparseMatrix::Vnm(a) => a.to_dense(),
            SparseMatrix::Vector(a) => a.to_dense(),
        }
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        match self {
            SparseMatrix::Dense(a) => a.rows(),
            SparseMatrix::Csr(a) => a.rows(),
            SparseMatrix::Nm(a) => a.rows(),
            SparseMatrix::Vnm(a) => a.rows(),
            SparseMatrix::Vector(a) => a.rows(),
        }
    }

    /// Columns (K).
    pub fn cols(&self) -> usize {
        match self {
            SparseMatrix::Dense(a) => a.cols(),
            SparseMatrix::Csr(a) => a.cols(),
            SparseMatrix::Nm(a) => a.cols(),
            SparseMatrix::Vnm(a) => a.cols(),
            SparseMatrix::Vector(a) => a.cols(),
        }
    }

    /// Stored entries at real columns, i.e. the multiply-adds per column of B (stored zeros
    /// included, padding excluded); `rows · cols` for dense.
    pub fn nnz(&self) -> usize {
        match self {
            SparseMatrix::Dense(a) => a.values().len(),
            SparseMatrix::Csr(a) => a.nnz(),
            SparseMatrix::Nm(a) => a.nnz(),
            SparseMatrix::Vnm(a) => a.nnz(),
            SparseMatrix::Vector(a) => a.nnz(),
        }
    }

    /// Bytes of packed storage, metadata included.
    pub fn bytes(&self) -> usize {
        match self {
            SparseMatrix::Dense(a) => 4 * a.values().len(),
            SparseMatrix::Csr(a) => a.bytes(),
            SparseMatrix::Nm(a) => a.bytes(),
            SparseMatrix::Vnm(a) => a.bytes(),
            SparseMatrix::Vector(a) => a.bytes(),
        }
    }

    /// The format signature. N:M and V:N:M carry their nominal density N/M; CSR and vector-wise
    /// carry the actual one (kept / (rows · cols)), which is what their speed depends on.
    pub fn signature(&self) -> FormatSignature {
        let (rows, cols) = (self.rows(), self.cols());
        let actual = if rows * cols == 0 {
            1.0
        } else {
            self.nnz() as f64 / (rows * cols) as f64
        };
        let (kind, n, m, v, density) = match self {
            SparseMatrix::Dense(_) => (PatternKind::Dense, 0, 0, 0, 1.0),
            SparseMatrix::Csr(_) => (PatternKind::Unstructured, 0, 0, 0, actual),
            SparseMatrix::Nm(a) => (
                PatternKind::Nm,
                a.n(),
                a.m(),
                0,
                a.n() as f64 / a.m() as f64,
            ),
            SparseMatrix::Vnm(a) => (PatternKind::Vnm, 2, a.m(), a.v(), 2.0 / a.m() as f64),
            SparseMatrix::Vector(a) => (PatternKind::Vector, 0, 0, a.v(), actual),
        };
        FormatSignature {
            kind,
            n,
            m,
            v,
            rows,
            cols,
            density_ppm: ppm(density),
        }
    }
}
