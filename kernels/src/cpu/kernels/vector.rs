//! The vector-wise V×1 micro-kernel.

use std::ops::Range;

use super::{load_row, store_row, BTile, CTile, Step};
use crate::cpu::simd::Simd;
use crate::VectorMatrix;

/// Vector-wise V×1, `R` rows of a V-block together (then single rows): each kept column's B row
/// is loaded once into registers and used by all `R` rows. `cursors[b]` is the next kept vector
/// of local block `b`.
///
/// # Safety
/// As `vnm`, with `cursors` holding one entry per V-block of `rows`.
#[inline(always)]
pub(crate) unsafe fn vector<S: Simd, const R: usize, const U: usize>(
    a: &VectorMatrix,
    rows: Range<usize>,
    step: &mut Step,
    b: BTile,
    c: CTile,
) {
    let v = a.v();
    let cols = a.col_idx().as_ptr();
    let kend = step.k.end as u32;
    let blk0 = rows.start / v;
    for blk in blk0..rows.end / v {
        let range = a.block_range(blk);
        // SAFETY: the cursor of a block of `rows` exists and lies inside the block's range.
        let start = unsafe { *step.cursors.get_unchecked(blk - blk0) } as usize;
        let mut end = start;
        // SAFETY: vector invariants: `end` indexes kept vectors of the block.
        while end < range.end && unsafe { *cols.add(end) } < kend {
            end += 1;
        }
        let mut i0 = 0;
        // SAFETY: forwarded contract; the row chunks stay inside the block.
        unsafe {
            while i0 + R <= v {
                vector_rows::<S, R, U>(
                    a,
                    blk,
                    i0,
                    start..end,
                    blk * v + i0 - rows.start,
                    step.first,
                    b,
                    c,
                );
                i0 += R;
            }
            while i0 < v {
                vector_rows::<S, 1, U>(
                    a,
                    blk,
                    i0,
                    start..end,
                    blk * v + i0 - rows.start,
                    step.first,
                    b,
                    c,
                );
                i0 += 1;
            }
        }
        // SAFETY: as above, the block's cursor exists.
        unsafe { *step.cursors.get_unchecked_mut(blk - blk0) = end as u32 };
    }
}

/// Rows `i0..i0 + R` of V-block `blk` over its kept vectors `vecs`.
#[allow(clippy::too_many_arguments)] // one call site; bundling would only rename the arguments
#[inline(always)]
unsafe fn vector_rows<S: Simd, const R: usize, const U: usize>(
    a: &VectorMatrix,
    blk: usize,
    i0: usize,
    vecs: Range<usize>,
    local: usize,
    first: bool,
    b: BTile,
    c: CTile,
) {
    let v = a.v();
    let (cols, vals) = (a.col_idx().as_ptr(), a.values().as_ptr());
    debug_assert!(blk * v + i0 + R <= a.rows());
    // SAFETY: j < nnz vectors, col_idx[j] < cols, values has v per vector and i0 + i < v; the C
    // rows are inside the caller's `rows`.
    unsafe {
        let mut acc: [[S::V; U]; R] = std::array::from_fn(|i| {
            load_row::<S, U>(first, c.ptr.add((local + i) * c.stride), c.width)
        });
        for j in vecs {
            let bp = b.ptr.add(*cols.add(j) as usize * b.stride);
            let mut bv = [S::zero(); U];
            for (u, x) in bv.iter_mut().enumerate() {
                *x = S::load(bp.add(u * S::LANES));
            }
            for (i, row_acc) in acc.iter_mut().enumerate() {
                let av = S::splat(*vals.add(j * v + i0 + i));
                for (x, &bu) in row_acc.iter_mut().zip(&bv) {
                    *x = S::fma(*x, av, bu);
                }
            }
        }
        for (i, row_acc) in acc.iter().enumerate() {
            store_row::<S, U>(row_acc, c, local + i);
        }
    }
}
