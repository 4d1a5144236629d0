//! What a product's rows get once computed, on the thread that computed them: a layer's bias
//! and its activation (ReLU, GELU), applied to each part of C right after the kernel wrote it
//! (while it is in that core's cache, on every thread of the product) instead of in separate
//! passes over the whole output on one thread afterwards.

use std::ops::Range;

use super::activation::{apply_at, Activation};
use super::host_isa::{with_isa, HostOp};
use crate::isa;

/// `C[r, ·] += bias[r]`, then the activation: per element the same operations in the same
/// order whether a kernel applies them as it stores C or they follow the product, so results
/// are bit-identical.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Epilogue<'a> {
    /// One value per row of C, added to that row.
    pub bias: Option<&'a [f32]>,
    /// Applied to every value after the bias.
    pub activation: Activation,
}

impl Epilogue<'_> {
    /// True when it changes nothing.
    pub fn is_none(&self) -> bool {
        self.bias.is_none() && self.activation == Activation::None
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
        let Epilogue { bias, activation } = self.epilogue;
        for r in 0..self.rows {
            // SAFETY: `Epilogue::apply_columns`'s contract: row r's columns `cols` are inside C
            // and no other thread accesses them.
            let row = unsafe {
                std::slice::from_raw_parts_mut(
                    self.c.add(r * self.n + self.cols.start),
                    self.cols.len(),
                )
            };
            finish_row(row, bias.map(|b| b[r]), activation);
            gelu_if(row, activation);
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
        let Epilogue { bias, activation } = self.epilogue;
        for (i, row) in self.c.chunks_mut(self.n).enumerate() {
            finish_row(row, bias.map(|b| b[self.first_row + i]), activation);
        }
        // Over the part's rows at once: they are contiguous, and a short row (17 columns, or 1
        // at batch 1) alone left GELU's long dependency chain without independent work.
        gelu_if(self.c, activation);
    }
}

/// One row: `+ bias`, then ReLU if it is the activation, in one pass (the row is read and
/// written once; ReLU is an unconditional store, a compare and blend per vector, not a
/// branch). GELU follows in [`gelu_if`].
#[inline(always)]
fn finish_row(row: &mut [f32], bias: Option<f32>, activation: Activation) {
    let relu_of = |x: f32| if x < 0.0 { 0.0 } else { x };
    match (bias, activation) {
        (Some(b), Activation::Relu) => row.iter_mut().for_each(|v| *v = relu_of(*v + b)),
        (None, Activation::Relu) => row.iter_mut().for_each(|v| *v = relu_of(*v)),
        (Some(b), _) => row.iter_mut().for_each(|v| *v += b),
        (None, _) => {}
    }
}

/// GELU over `v` at the kernels' ISA (vectors and a masked tail), if it is the activation.
#[inline(always)]
fn gelu_if(v: &mut [f32], activation: Activation) {
    if activation == Activation::Gelu {
        apply_at(isa(), v, activation);
    }
}
