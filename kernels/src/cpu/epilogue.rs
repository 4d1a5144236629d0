//! What a product's rows get once computed, on the thread that computed them: a layer's bias
//! and its ReLU, applied to each part of C right after the kernel wrote it (while it is in that
//! core's cache, on every thread of the product) instead of in separate passes over the whole
//! output on one thread afterwards.

use std::ops::Range;

use super::host_isa::{with_isa, HostOp};

/// `C[r, ·] += bias[r]`, then `max(·, 0)` when `relu`: per element the same operations in the
/// same order as applying them after the product, so results are bit-identical.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Epilogue<'a> {
    /// One value per row of C, added to that row.
    pub bias: Option<&'a [f32]>,
    /// Negative values (after the bias) become 0; NaN stays NaN.
    pub relu: bool,
}

impl Epilogue<'_> {
    /// True when it changes nothing.
    pub fn is_none(&self) -> bool {
        self.bias.is_none() && !self.relu
    }

    /// Applies it to `c`: the rows from `first_row` on, `n` floats each, at the kernels' ISA.
    pub(crate) fn apply(&self, first_row: usize, c: &mut [f32], n: usize) {
        if self.is_none() || n == 0 {
            return;
        }
        with_isa(Apply {
            epilogue: *self,
            first_row,
            c,
            n,
        });
    }
}

impl Epilogue<'_> {
    /// Applies it to columns `cols` of every one of C's `rows` rows (`n` floats each, from `c`),
    /// at the kernels' ISA: the part of C one thread of a tile split computed.
    ///
    /// # Safety
    /// `c` is valid for `rows · n` floats, `cols` lies in `0..n`, and no other thread accesses
    /// those columns meanwhile.
    pub(crate) unsafe fn apply_columns(
        &self,
        c: *mut f32,
        rows: usize,
        n: usize,
        cols: Range<usize>,
    ) {
        if self.is_none() || cols.is_empty() {
            return;
        }
        with_isa(ApplyColumns {
            epilogue: *self,
            c,
            rows,
            n,
            cols,
        });
    }
}

/// [`Epilogue::apply_columns`] as a [`HostOp`]; built only there, under its contract.
struct ApplyColumns<'e> {
    epilogue: Epilogue<'e>,
    c: *mut f32,
    rows: usize,
    n: usize,
    cols: Range<usize>,
}

impl HostOp for ApplyColumns<'_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let Epilogue { bias, relu } = self.epilogue;
        for r in 0..self.rows {
            // SAFETY: `Epilogue::apply_columns`'s contract: row r's columns `cols` are inside C
            // and no other thread accesses them.
            let row = unsafe {
                std::slice::from_raw_parts_mut(
                    self.c.add(r * self.n + self.cols.start),
                    self.cols.len(),
                )
            };
            finish_row(row, bias.map(|b| b[r]), relu);
        }
    }
}

struct Apply<'e, 'c> {
    epilogue: Epilogue<'e>,
    first_row: usize,
    c: &'c mut [f32],
    n: usize,
}

impl HostOp for Apply<'_, '_> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let Epilogue { bias, relu } = self.epilogue;
        for (i, row) in self.c.chunks_mut(self.n).enumerate() {
            finish_row(row, bias.map(|b| b[self.first_row + i]), relu);
        }
    }
}

/// One row: `+ bias`, then ReLU, in one pass (the row is read and written once). ReLU is an
/// unconditional store, a compare and blend per vector, not a branch.
#[inline(always)]
fn finish_row(row: &mut [f32], bias: Option<f32>, relu: bool) {
    let relu_of = |x: f32| if x < 0.0 { 0.0 } else { x };
    match (bias, relu) {
        (Some(b), true) => row.iter_mut().for_each(|v| *v = relu_of(*v + b)),
        (Some(b), false) => row.iter_mut().for_each(|v| *v += b),
        (None, true) => row.iter_mut().for_each(|v| *v = relu_of(*v)),
        (None, false) => {}
    }
}
