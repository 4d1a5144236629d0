//! Compressed sparse rows, the storage of unstructured sparsity.

use super::panels::{CsrPanels, PanelCache};
use crate::{KernelError, Mask};

/// A CSR matrix.
///
/// Invariants (checked by [`CsrMatrix::new`]): `row_ptr` has `rows + 1` entries, starts at 0, never
/// decreases and ends at `nnz`; `col_idx` and `values` have `nnz` entries; within a row the
/// column indices strictly increase and are `< cols`; `cols` and `nnz` fit in `u32`.
#[derive(Debug, Clone, PartialEq)]
pub struct CsrMatrix {
    rows: usize,
    cols: usize,
    row_ptr: Vec<u32>,
    col_idx: Vec<u32>,
    values: Vec<f32>,
    /// Derived for the batch-1 kernels, on first use.
    panels: PanelCache<CsrPanels>,
}

impl CsrMatrix {
    /// Checked constructor.
    pub fn new(
        rows: usize,
        cols: usize,
        row_ptr: Vec<u32>,
        col_idx: Vec<u32>,
        values: Vec<f32>,
    ) -> Result<Self, KernelError> {
        let bad = |reason: String| Err(KernelError::format("CSR", reason));
        if u32::try_from(cols).is_err() {
            return bad(format!("{cols} columns do not fit u32 indices"));
        }
        KernelError::check_len("CSR row_ptr", rows + 1, row_ptr.len())?;
        KernelError::check_len("CSR values", col_idx.len(), values.len())?;
        if row_ptr[0] != 0 || row_ptr[rows] as usize != col_idx.len() {
            return bad(format!(
                "row_ptr must run from 0 to nnz = {}, got {}..{}",
                col_idx.len(),
                row_ptr[0],
                row_ptr[rows]
            ));
        }
        for r in 0..rows {
            let (lo, hi) = (row_ptr[r] as usize, row_ptr[r + 1] as usize);
            if lo > hi {
                return bad(format!("row_ptr decreases at row {r}"));
            }
            let row = &col_idx[lo..hi];
            if row.iter().any(|&c| c as usize >= cols) {
                return bad(format!("row {r} has a column index >= {cols}"));
            }
            if row.windows(2).any(|w| w[0] >= w[1]) {
                return bad(format!("row {r}: column indices must strictly increase"));
            }
        }
        Ok(CsrMatrix {
            rows,
            cols,
            row_ptr,
            col_idx,
            values,
            panels: PanelCache::default(),
        })
    }

    /// The kept entries of `values` under `mask`, in CSR.
    pub fn from_masked(values: &[f32], mask: &Mask) -> Result<Self, KernelError> {
        let (rows, cols) = (mask.rows(), mask.cols());
        KernelError::check_len("values", rows * cols, values.len())?;
        let nnz = mask.count();
        if u32::try_from(nnz).is_err() {
            return Err(KernelError::format(
                "CSR",
                format!("{nnz} nonzeros do not fit u32"),
            ));
        }
        let mut row_ptr = Vec::with_capacity(rows + 1);
        let mut col_idx = Vec::with_capacity(nnz);
        let mut vals = Vec::with_capacity(nnz);
        row_ptr.push(0u32);
        for r in 0..rows {
            for c in 0..cols {
                if mask.as_slice()[r * cols + c] {
                    col_idx.push(c as u32);
                    vals.push(values[r * cols + c]);
                }
            }
            row_ptr.push(col_idx.len() as u32);
        }
        CsrMatrix::new(rows, cols, row_ptr, col_idx, vals)
    }

    /// The dense row-major matrix (zeros where nothing is stored).
    pub fn to_dense(&self) -> Vec<f32> {
        let mut d = vec![0.0; self.rows * self.cols];
        for r in 0..self.rows {
            for i in self.row_range(r) {
                d[r * self.cols + self.col_idx[i] as usize] = self.values[i];
            }
        }
        d
    }

    /// Index range of row `r` in `col_idx` / `values`.
    pub fn row_range(&self, r: usize) -> std::ops::Range<usize> {
        self.row_ptr[r] as usize..self.row_ptr[r + 1] as usize
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Stored entries.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// Row pointers (`rows + 1`).
    pub fn row_ptr(&self) -> &[u32] {
        &self.row_ptr
    }

    /// Column index of each stored entry.
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }

    /// Value of each stored entry.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// The entries in panels of `lanes` rows for the batch-1 kernels (built on the first call).
    pub(crate) fn csr_panels(&self, lanes: usize) -> Option<&CsrPanels> {
        self.panels.get(lanes, || {
            CsrPanels::build(self.rows, &self.row_ptr, &self.col_idx, &self.values, lanes)
        })
    }

    /// Bytes of storage: values, column indices and row pointers.
    pub fn bytes(&self) -> usize {
        4 * (self.values.len() + self.col_idx.len() + self.row_ptr.len())
    }
}
