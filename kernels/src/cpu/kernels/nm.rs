//! The N:M micro-kernel.

use std::ops::Range;

use super::{axpy, fma_row, load_row, store_row, BTile, CTile, Step};
use crate::cpu::simd::Simd;
use crate::NmMatrix;

/// N:M, `R` rows together (then single rows for the remainder); `step.k` is aligned to M.
///
/// # Safety
/// As `csr` (cursors unused).
#[inline(always)]
pub(crate) unsafe fn nm<S: Simd, const R: usize, const U: usize>(
    a: &NmMatrix,
    rows: Range<usize>,
    step: &Step,
    b: BTile,
    c: CTile,
) {
    let mut r = rows.start;
    // SAFETY: forwarded contract; every block stays inside `rows`.
    unsafe {
        while r + R <= rows.end {
            nm_block::<S, R, U>(a, r, r - rows.start, step, b, c);
            r += R;
        }
        while r < rows.end {
            nm_block::<S, 1, U>(a, r, r - rows.start, step, b, c);
            r += 1;
        }
    }
}

#[inline(always)]
unsafe fn nm_block<S: Simd, const R: usize, const U: usize>(
    a: &NmMatrix,
    r0: usize,
    local: usize,
    step: &Step,
    b: BTile,
    c: CTile,
) {
    let (n, m, groups, cols) = (a.n(), a.m(), a.groups(), a.cols());
    let (g0, g1) = (step.k.start / m, step.k.end.div_ceil(m).min(groups));
    let full_end = g1.min(cols / m);
    let (vals, pos) = (a.values().as_ptr(), a.positions().as_ptr());
    // SAFETY: rows r0..r0+R exist, so slot indices (r·groups + g)·n + s are inside the value and
    // position buffers; full groups have positions < m, so k < cols; the last partial group is
    // checked against cols (phantom slots are skipped). C rows local..local+R are in the tile.
    unsafe {
        let mut acc: [[S::V; U]; R] = std::array::from_fn(|i| {
            load_row::<S, U>(step.first, c.ptr.add((local + i) * c.stride), c.width)
        });
        if n == 2 {
            // The common case: both values of a slot pair from one 8-byte load.
            for g in g0..full_end {
                let gb = b.ptr.add(g * m * b.stride);
                for (i, row_acc) in acc.iter_mut().enumerate() {
                    let s = ((r0 + i) * groups + g) * 2;
                    let (v0, v1) = S::splat_pair(vals.add(s));
                    fma_row::<S, U>(row_acc, v0, gb.add(*pos.add(s) as usize * b.stride));
                    fma_row::<S, U>(row_acc, v1, gb.add(*pos.add(s + 1) as usize * b.stride));
                }
            }
        } else {
            for g in g0..full_end {
                let gb = b.ptr.add(g * m * b.stride);
                for (i, row_acc) in acc.iter_mut().enumerate() {
                    let base = ((r0 + i) * groups + g) * n;
                    for s in base..base + n {
                        let k = *pos.add(s) as usize;
                        axpy::<S, U>(row_acc, *vals.add(s), gb.add(k * b.stride));
                    }
                }
            }
        }
        for g in full_end..g1 {
            for (i, row_acc) in acc.iter_mut().enumerate() {
                let base = ((r0 + i) * groups + g) * n;
                for s in base..base + n {
                    let k = g * m + *pos.add(s) as usize;
                    if k < cols {
                        axpy::<S, U>(row_acc, *vals.add(s), b.ptr.add(k * b.stride));
                    }
                }
            }
        }
        for (i, row_acc) in acc.iter().enumerate() {
            store_row::<S, U>(row_acc, c, local + i);
        }
    }
}
