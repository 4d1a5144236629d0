//! The CSR micro-kernel.

use std::ops::Range;

use super::{axpy, load_row, store_row, BTile, CTile, Step};
use crate::cpu::simd::Simd;
use crate::CsrMatrix;

/// CSR, `R` rows together: per chunk, each row's entries below `step.k.end` are found first
/// (binary search from its cursor), the rows then advance in lock step over their common length
/// with no bounds test in the loop (`R × U` independent FMA chains), and each row finishes its
/// own tail alone. `cursors[i]` is the next entry of local row `i`.
///
/// # Safety
/// `b` holds `a.cols()` rows of the tile width; `c` holds `rows.len()` rows; `U · LANES ≤ MAX_TILE`;
/// `cursors` has `rows.len()` entries, each inside its row and at the first entry of column
/// `≥ step.k.start`.
#[inline(always)]
pub(crate) unsafe fn csr<S: Simd, const R: usize, const U: usize>(
    a: &CsrMatrix,
    rows: Range<usize>,
    step: &mut Step,
    b: BTile,
    c: CTile,
) {
    let mut r = rows.start;
    // SAFETY: forwarded contract; every block stays inside `rows`.
    unsafe {
        while r + R <= rows.end {
            csr_block::<S, R, U>(a, r, r - rows.start, step, b, c);
            r += R;
        }
        while r < rows.end {
            csr_block::<S, 1, U>(a, r, r - rows.start, step, b, c);
            r += 1;
        }
    }
}

#[inline(always)]
unsafe fn csr_block<S: Simd, const R: usize, const U: usize>(
    a: &CsrMatrix,
    r0: usize,
    local: usize,
    step: &mut Step,
    b: BTile,
    c: CTile,
) {
    let (ci, vals, ptr) = (a.col_idx(), a.values().as_ptr(), a.row_ptr());
    let kend = step.k.end as u32;
    // SAFETY: CSR invariants give entries j < row_ptr[r+1] ≤ nnz with col_idx[j] < cols, so B
    // row k exists; local rows local..local+R are inside C's tile and `cursors`.
    unsafe {
        let mut at = [0usize; R];
        let mut end = [0usize; R];
        for i in 0..R {
            let j = *step.cursors.get_unchecked(local + i) as usize;
            let row_end = *ptr.get_unchecked(r0 + i + 1) as usize;
            at[i] = j;
            end[i] = j + ci.get_unchecked(j..row_end).partition_point(|&k| k < kend);
            *step.cursors.get_unchecked_mut(local + i) = end[i] as u32;
        }
        let common = (0..R).map(|i| end[i] - at[i]).min().unwrap_or(0);
        let mut acc: [[S::V; U]; R] = std::array::from_fn(|i| {
            load_row::<S, U>(step.first, c.ptr.add((local + i) * c.stride), c.width)
        });
        let cip = ci.as_ptr();
        for t in 0..common {
            for (i, row_acc) in acc.iter_mut().enumerate() {
                let j = at[i] + t;
                let k = *cip.add(j) as usize;
                axpy::<S, U>(row_acc, *vals.add(j), b.ptr.add(k * b.stride));
            }
        }
        for (i, row_acc) in acc.iter_mut().enumerate() {
            for j in at[i] + common..end[i] {
                let k = *cip.add(j) as usize;
                axpy::<S, U>(row_acc, *vals.add(j), b.ptr.add(k * b.stride));
            }
            store_row::<S, U>(row_acc, c, local + i);
        }
    }
}
