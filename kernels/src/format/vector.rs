//! Vector-wise V×1 sparsity (CLASP): per block of V rows, a list of kept columns, each holding a
//! contiguous column-vector of V values.

use crate::{KernelError, Mask};

/// A vector-wise matrix.
///
/// Layout: block `b` (rows `b·v .. b·v + v`) keeps columns `col_idx[block_ptr[b]..block_ptr[b+1]]`;
/// kept vector `j` stores its V values at `values[j·v .. j·v + v]` (row order).
///
/// Invariants (checked by [`VectorMatrix::new`]): `v ≥ 1` divides `rows`; `block_ptr` has
/// `rows/v + 1` entries from 0 to the vector count, never decreasing; columns strictly increase
/// within a block and are `< cols`; `values.len() = vectors · v`.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorMatrix {
    rows: usize,
    cols: usize,
    v: usize,
    block_ptr: Vec<u32>,
    col_idx: Vec<u32>,
    values: Vec<f32>,
}

impl VectorMatrix {
    /// Checked constructor.
    pub fn new(
        rows: usize,
        cols: usize,
        v: usize,
        block_ptr: Vec<u32>,
        col_idx: Vec<u32>,
        values: Vec<f32>,
    ) -> Result<Self, KernelError> {
        let bad = |reason: String| Err(KernelError::format("vector", reason));
        if v == 0 || !rows.is_multiple_of(v) {
            return bad(format!("V = {v} must be >= 1 and divide the {rows} rows"));
        }
        if u32::try_from(cols).is_err() {
            return bad(format!("{cols} columns do not fit u32 indices"));
        }
        let blocks = rows / v;
        KernelError::check_len("vector block_ptr", blocks + 1, block_ptr.len())?;
        KernelError::check_len("vector values", col_idx.len() * v, values.len())?;
        if block_ptr[0] != 0 || block_ptr[blocks] as usize != col_idx.len() {
            return bad("block_ptr must run from 0 to the vector count".to_string());
        }
        for b in 0..blocks {
            let (lo, hi) = (block_ptr[b] as usize, block_ptr[b + 1] as usize);
            if lo > hi {
                return bad(format!("block_ptr decreases at block {b}"));
            }
            let cs = &col_idx[lo..hi];
            if cs.iter().any(|&c| c as usize >= cols) || cs.windows(2).any(|w| w[0] >= w[1]) {
                return bad(format!(
                    "block {b}: columns must strictly increase below {cols}"
                ));
            }
        }
        Ok(VectorMatrix {
            rows,
            cols,
            v,
            block_ptr,
            col_idx,
            values,
        })
    }

    /// Packs `values ⊙ mask`; errors if a column-vector is partly kept.
    pub fn from_masked(values: &[f32], mask: &Mask, v: usize) -> Result<Self, KernelError> {
        let (rows, cols) = (mask.rows(), mask.cols());
        KernelError::check_len("values", rows * cols, values.len())?;
        if v == 0 || !rows.is_multiple_of(v) {
            return Err(KernelError::format(
                "vector",
                format!("V = {v} must be >= 1 and divide the {rows} rows"),
            ));
        }
        let mut block_ptr = vec![0u32];
        let (mut col_idx, mut vals) = (Vec::new(), Vec::new());
        for b in 0..rows / v {
            for c in 0..cols {
                let kept = (0..v).filter(|&i| mask.keep(b * v + i, c)).count();
                if kept == v {
                    col_idx.push(c as u32);
                    vals.extend((0..v).map(|i| values[(b * v + i) * cols + c]));
                } else if kept != 0 {
                    return Err(KernelError::format(
                        "vector",
                        format!("block {b} column {c} keeps {kept} of its {v} rows"),
                    ));
                }
            }
            block_ptr.push(col_idx.len() as u32);
        }
        VectorMatrix::new(rows, cols, v, block_ptr, col_idx, vals)
    }

    /// The dense row-major matrix.
    pub fn to_dense(&self) -> Vec<f32> {
        let mut d = vec![0.0; self.rows * self.cols];
        for b in 0..self.blocks() {
            for j in self.block_range(b) {
                let c = self.col_idx[j] as usize;
                for i in 0..self.v {
                    d[(b * self.v + i) * self.cols + c] = self.values[j * self.v + i];
                }
            }
        }
        d
    }

    /// Index range of block `b`'s kept vectors.
    pub fn block_range(&self, b: usize) -> std::ops::Range<usize> {
        self.block_ptr[b] as usize..self.block_ptr[b + 1] as usize
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// V.
    pub fn v(&self) -> usize {
        self.v
    }

    /// Row blocks, `rows / v`.
    pub fn blocks(&self) -> usize {
        self.rows / self.v
    }

    /// Block pointers.
    pub fn block_ptr(&self) -> &[u32] {
        &self.block_ptr
    }

    /// Column of each kept vector.
    pub fn col_idx(&self) -> &[u32] {
        &self.col_idx
    }

    /// Values, V per kept vector.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// Stored weights.
    pub fn nnz(&self) -> usize {
        self.values.len()
    }

    /// Bytes of storage: values, column indices and block pointers.
    pub fn bytes(&self) -> usize {
        4 * (self.values.len() + self.col_idx.len() + self.block_ptr.len())
    }
}
