//! What a product's rows get once computed, on the thread that computed them: a layer's bias
//! and its ReLU, applied to each part of C right after the kernel wrote it (while it is in that
//! core's cache, on every thread of the product) instead of in separate passes over the whole
//! output on one thread afterwards.

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
            if let Some(bias) = bias {
                let b = bias[self.first_row + i];
                row.iter_mut().for_each(|v| *v += b);
            }
            if relu {
                // An unconditional store: a compare and blend per vector, not a branch.
                row.iter_mut()
                    .for_each(|v| *v = if *v < 0.0 { 0.0 } else { *v });
            }
        }
    }
}
