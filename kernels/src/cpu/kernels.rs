//! The CPU SpMM micro-kernels, written once against [`Simd`] and instantiated per ISA, rows
//! together (`R`) and vectors per N tile (`U`) by `cpu::dispatch`.
//!
//! Each kernel computes `C[rows, tile] = A[rows, :] · B[:, tile]` for one N tile, keeping an
//! `R × U` block of accumulators in registers across all of A's stored entries of those rows, and
//! writes C once. B is read through a [`BTile`] whose every row has `U · LANES` readable floats
//! (the caller pads a partial last tile), so there is no tail loop over N.

use std::ops::Range;

use super::simd::Simd;
use crate::{CsrMatrix, NmMatrix, VectorMatrix, VnmMatrix};

/// A tile of B: row `k` starts at `ptr + k · stride`, with the tile's full width readable.
#[derive(Clone, Copy)]
pub(crate) struct BTile {
    pub(crate) ptr: *const f32,
    pub(crate) stride: usize,
}

/// A tile of C: local row `i` starts at `ptr + i · stride`; `width` columns are real.
#[derive(Clone, Copy)]
pub(crate) struct CTile {
    pub(crate) ptr: *mut f32,
    pub(crate) stride: usize,
    pub(crate) width: usize,
}

/// Stores one row of accumulators, only the first `width` floats when the tile is partial.
///
/// # Safety
/// `dst` is valid for `min(width, U · LANES)` writes; `U · LANES ≤ 128`.
#[inline(always)]
unsafe fn store_row<S: Simd, const U: usize>(acc: &[S::V; U], dst: *mut f32, width: usize) {
    // SAFETY: per the contract, full tiles write U·LANES floats into `dst`; partial tiles go
    // through a stack buffer of 128 ≥ U·LANES floats and copy `width` of them.
    unsafe {
        if width >= U * S::LANES {
            for (u, &a) in acc.iter().enumerate() {
                S::store(dst.add(u * S::LANES), a);
            }
        } else {
            let mut tmp = [0.0f32; 128];
            for (u, &a) in acc.iter().enumerate() {
                S::store(tmp.as_mut_ptr().add(u * S::LANES), a);
            }
            std::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, width);
        }
    }
}

/// `acc[u] += a · B[k, u]` for the `U` vectors of B row `k`.
///
/// # Safety
/// Row `k` of `b` is readable for `U · LANES` floats.
#[inline(always)]
unsafe fn axpy<S: Simd, const U: usize>(acc: &mut [S::V; U], a: f32, b: BTile, k: usize) {
    // SAFETY: the caller guarantees row k of the tile is readable for U·LANES floats.
    unsafe {
        let av = S::splat(a);
        let bp = b.ptr.add(k * b.stride);
        for (u, x) in acc.iter_mut().enumerate() {
            *x = S::fma(*x, av, S::load(bp.add(u * S::LANES)));
        }
    }
}

/// CSR, one row at a time.
///
/// # Safety
/// `b` holds `a.cols()` rows of the tile width; `c` holds `rows.len()` rows; `U · LANES ≤ 128`.
#[inline(always)]
pub(crate) unsafe fn csr<S: Simd, const U: usize>(
    a: &CsrMatrix,
    rows: Range<usize>,
    b: BTile,
    c: CTile,
) {
    let (ci, vals) = (a.col_idx(), a.values());
    for (i, r) in rows.enumerate() {
        // SAFETY: CSR invariants give j < nnz and col_idx[j] < cols, so B row k exists; local
        // row i < rows.len() is inside C's tile.
        unsafe {
            let mut acc = [S::zero(); U];
            for j in a.row_range(r) {
                axpy::<S, U>(
                    &mut acc,
                    *vals.get_unchecked(j),
                    b,
                    *ci.get_unchecked(j) as usize,
                );
            }
            store_row::<S, U>(&acc, c.ptr.add(i * c.stride), c.width);
        }
    }
}

/// N:M, `R` rows together (then single rows for the remainder).
///
/// # Safety
/// As [`csr`].
#[inline(always)]
pub(crate) unsafe fn nm<S: Simd, const R: usize, const U: usize>(
    a: &NmMatrix,
    rows: Range<usize>,
    b: BTile,
    c: CTile,
) {
    let mut r = rows.start;
    // SAFETY: forwarded contract; every block stays inside `rows`.
    unsafe {
        while r + R <= rows.end {
            nm_block::<S, R, U>(a, r, r - rows.start, b, c);
            r += R;
        }
        while r < rows.end {
            nm_block::<S, 1, U>(a, r, r - rows.start, b, c);
            r += 1;
        }
    }
}

#[inline(always)]
unsafe fn nm_block<S: Simd, const R: usize, const U: usize>(
    a: &NmMatrix,
    r0: usize,
    local: usize,
    b: BTile,
    c: CTile,
) {
    let (n, m, groups, cols) = (a.n(), a.m(), a.groups(), a.cols());
    let full = if cols.is_multiple_of(m) { groups } else { groups - 1 };
    let (vals, pos) = (a.values().as_ptr(), a.positions().as_ptr());
    // SAFETY: rows r0..r0+R exist, so slot indices (r·groups + g)·n + s are inside the value and
    // position buffers; full groups have positions < m, so k < cols; the last partial group is
    // checked against cols (phantom slots are skipped). C rows local..local+R are in the tile.
    unsafe {
        let mut acc = [[S::zero(); U]; R];
        for g in 0..full {
            for (i, row_acc) in acc.iter_mut().enumerate() {
                let base = ((r0 + i) * groups + g) * n;
                for s in base..base + n {
                    axpy::<S, U>(row_acc, *vals.add(s), b, g * m + *pos.add(s) as usize);
                }
            }
        }
        for g in full..groups {
            for (i, row_acc) in acc.iter_mut().enumerate() {
                let base = ((r0 + i) * groups + g) * n;
                for s in base..base + n {
                    let k = g * m + *pos.add(s) as usize;
                    if k < cols {
                        axpy::<S, U>(row_acc, *vals.add(s), b, k);
                    }
                }
            }
        }
        for (i, row_acc) in acc.iter().enumerate() {
            store_row::<S, U>(row_acc, c.ptr.add((local + i) * c.stride), c.width);
        }
    }
}

/// V:2:M, `R` rows of one V-block together; `R` divides V and `rows` is aligned to V.
///
/// Per group, the block's 4 shared B rows are located once for all its rows; each row then
/// takes its 2 of them through its pair code (positions `p0 | p1 << 2`).
///
/// # Safety
/// As [`csr`], plus `R` divides `a.v()` and `rows` starts and ends on multiples of V.
#[inline(always)]
pub(crate) unsafe fn vnm<S: Simd, const R: usize, const U: usize>(
    a: &VnmMatrix,
    rows: Range<usize>,
    b: BTile,
    c: CTile,
) {
    for r0 in rows.clone().step_by(R) {
        // SAFETY: forwarded contract; R | V keeps the block inside one V-block and `rows`.
        unsafe { vnm_block::<S, R, U>(a, r0, r0 - rows.start, b, c) };
    }
}

#[inline(always)]
unsafe fn vnm_block<S: Simd, const R: usize, const U: usize>(
    a: &VnmMatrix,
    r0: usize,
    local: usize,
    b: BTile,
    c: CTile,
) {
    let (m, groups, cols, k_sp) = (a.m(), a.groups(), a.cols(), a.k_sp());
    let full = if cols.is_multiple_of(m) { groups } else { groups - 1 };
    let blk = r0 / a.v();
    let (vals, loc, codes) = (
        a.values().as_ptr(),
        a.column_loc().as_ptr(),
        a.pair_codes().as_ptr(),
    );
    // SAFETY: the block's rows exist; column_loc has 4 entries per (block, group); full groups
    // have column_loc < m so every B row is < cols; in the last partial group phantom columns
    // (≥ cols) are skipped. Pair codes hold two positions in 0..4.
    unsafe {
        let mut acc = [[S::zero(); U]; R];
        for g in 0..groups {
            let l = loc.add((blk * groups + g) * 4);
            let ks = [0, 1, 2, 3].map(|q| g * m + *l.add(q) as usize);
            for (i, row_acc) in acc.iter_mut().enumerate() {
                let r = r0 + i;
                let code = *codes.add(r * groups + g) as usize;
                let (k0, k1) = (ks[code & 3], ks[code >> 2]);
                let v = vals.add(r * k_sp + 2 * g);
                if g < full {
                    axpy::<S, U>(row_acc, *v, b, k0);
                    axpy::<S, U>(row_acc, *v.add(1), b, k1);
                } else {
                    if k0 < cols {
                        axpy::<S, U>(row_acc, *v, b, k0);
                    }
                    if k1 < cols {
                        axpy::<S, U>(row_acc, *v.add(1), b, k1);
                    }
                }
            }
        }
        for (i, row_acc) in acc.iter().enumerate() {
            store_row::<S, U>(row_acc, c.ptr.add((local + i) * c.stride), c.width);
        }
    }
}

/// Vector-wise V×1, `R` rows of a V-block together: each kept column's B row is loaded once
/// into registers and used by all `R` rows.
///
/// # Safety
/// As [`vnm`].
#[inline(always)]
pub(crate) unsafe fn vector<S: Simd, const R: usize, const U: usize>(
    a: &VectorMatrix,
    rows: Range<usize>,
    b: BTile,
    c: CTile,
) {
    let v = a.v();
    let (cols, vals) = (a.col_idx().as_ptr(), a.values().as_ptr());
    for blk in rows.start / v..rows.end / v {
        for i0 in (0..v).step_by(R) {
            // SAFETY: vector invariants: j indexes kept vectors, col_idx[j] < cols, values has v
            // per vector and i0 + i < v; the C rows are inside `rows`.
            unsafe {
                let mut acc = [[S::zero(); U]; R];
                for j in a.block_range(blk) {
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
                let local = blk * v + i0 - rows.start;
                for (i, row_acc) in acc.iter().enumerate() {
                    store_row::<S, U>(row_acc, c.ptr.add((local + i) * c.stride), c.width);
                }
            }
        }
    }
}
