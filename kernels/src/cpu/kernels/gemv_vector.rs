//! Batch 1 for vector-wise V×1: a kept column's V values are contiguous, so a V-block's rows
//! are vectors of lanes, and each kept column is one broadcast of its x value and one FMA per
//! `LANES` rows — a dense matrix–vector product over the kept columns only, with no permute.
//! (The tile kernels ran instead, with one useful lane of eight at batch 1: ~1.0–1.3× of dense
//! on Zen 3, where the bytes allow ~4× at 75 %.)

use std::ops::Range;

use crate::cpu::simd::Simd;
use crate::VectorMatrix;

/// `y[r − rows.start] = A[r, :] · x` for the rows of `rows` (whole V-blocks), where `LANES`
/// divides V.
///
/// # Safety
/// The ISA of `S` is available; `x` is readable for `a.cols()` floats, `y` writable for
/// `rows.len()`; `rows` starts and ends on multiples of V, and `LANES` divides V.
#[inline(always)]
pub(crate) unsafe fn gemv_vector<S: Simd>(
    a: &VectorMatrix,
    rows: Range<usize>,
    x: *const f32,
    y: *mut f32,
) {
    let vectors = a.v() / S::LANES;
    // SAFETY: forwarded contract; each instance covers the block's V rows in chunks of its Q
    // vectors, Q dividing V / LANES.
    unsafe {
        match vectors {
            v if v.is_multiple_of(8) => blocks::<S, 8, 1>(a, rows, x, y),
            v if v.is_multiple_of(4) => blocks::<S, 4, 2>(a, rows, x, y),
            v if v.is_multiple_of(2) => blocks::<S, 2, 2>(a, rows, x, y),
            _ => blocks::<S, 1, 2>(a, rows, x, y),
        }
    }
}

/// Each V-block of `rows` in chunks of `Q` vectors of rows, `J` kept columns per step into `J`
/// sets of accumulators (so that there are at least four FMA chains).
///
/// # Safety
/// As [`gemv_vector`], with `Q · LANES` dividing V.
#[inline(always)]
unsafe fn blocks<S: Simd, const Q: usize, const J: usize>(
    a: &VectorMatrix,
    rows: Range<usize>,
    x: *const f32,
    y: *mut f32,
) {
    let (v, l) = (a.v(), S::LANES);
    let (cols, vals) = (a.col_idx().as_ptr(), a.values().as_ptr());
    for blk in rows.start / v..rows.end / v {
        let range = a.block_range(blk);
        for r0 in (0..v).step_by(Q * l) {
            // SAFETY: kept vectors `range` are inside col_idx and values, each with V values;
            // their columns are < cols, inside x; rows blk·v + r0 + q·l + LANES ≤ the block's
            // end, inside `rows` and y.
            unsafe {
                let mut acc = [[S::zero(); Q]; J];
                let mut j = range.start;
                while j + J <= range.end {
                    for (u, set) in acc.iter_mut().enumerate() {
                        let xb = S::splat(*x.add(*cols.add(j + u) as usize));
                        let col = vals.add((j + u) * v + r0);
                        for (q, a) in set.iter_mut().enumerate() {
                            *a = S::fma(*a, S::load(col.add(q * l)), xb);
                        }
                    }
                    j += J;
                }
                for j in j..range.end {
                    let xb = S::splat(*x.add(*cols.add(j) as usize));
                    let col = vals.add(j * v + r0);
                    for (q, a) in acc[0].iter_mut().enumerate() {
                        *a = S::fma(*a, S::load(col.add(q * l)), xb);
                    }
                }
                let out = y.add(blk * v + r0 - rows.start);
                for q in 0..Q {
                    let mut sum = acc[0][q];
                    for set in &acc[1..] {
                        sum = S::add(sum, set[q]);
                    }
                    S::store(out.add(q * l), sum);
                }
            }
        }
    }
}
