//! The CPU SpMM micro-kernels, written once against [`Simd`] and instantiated per ISA, rows
//! together (`R`) and vectors per N tile (`U`) by `cpu::dispatch`.
//!
//! Each call computes, for one N tile and one chunk of K (a [`Step`]), `C[rows, tile] (+)=
//! A[rows, kchunk] · B[kchunk, tile]`, keeping an `R × U` block of accumulators in registers and
//! touching C once per row and chunk. Chunking K keeps the B rows a chunk touches in L1 while
//! every row block of the thread streams through them. V:N:M instead chunks inside its kernel,
//! per V-block, over a panel of the block's gathered columns (see [`vnm`]). B is read through a
//! [`BTile`] whose every
//! row has `U · LANES` readable floats (the caller pads a partial last tile), so there is no tail
//! loop over N.

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

/// One step of the K loop: the columns of A (rows of B) covered, whether it is the first step
/// (C is overwritten rather than accumulated), per-row (CSR) or per-block (vector-wise)
/// cursors into the entry lists, advanced as the chunks go by, and V:N:M's chunking and scratch.
pub(crate) struct Step<'a> {
    pub(crate) k: Range<usize>,
    pub(crate) first: bool,
    pub(crate) cursors: &'a mut [u32],
    /// K columns per internal chunk (V:N:M, which chunks inside the kernel; 0 = all).
    pub(crate) k_chunk: usize,
    /// Per-thread scratch (V:N:M's gathered panel).
    pub(crate) scratch: &'a mut [f32],
}

/// Loads one row of C into accumulators (zeros on the first step).
///
/// # Safety
/// `src` is valid for `min(width, U · LANES)` reads; `U · LANES ≤ 128`.
#[inline(always)]
unsafe fn load_row<S: Simd, const U: usize>(
    first: bool,
    src: *const f32,
    width: usize,
) -> [S::V; U] {
    // SAFETY: full tiles read U·LANES floats from `src`; partial ones copy `width` floats into a
    // 128-float stack buffer first.
    unsafe {
        let mut acc = [S::zero(); U];
        if first {
            return acc;
        }
        if width >= U * S::LANES {
            for (u, a) in acc.iter_mut().enumerate() {
                *a = S::load(src.add(u * S::LANES));
            }
        } else {
            let mut tmp = [0.0f32; 128];
            std::ptr::copy_nonoverlapping(src, tmp.as_mut_ptr(), width);
            for (u, a) in acc.iter_mut().enumerate() {
                *a = S::load(tmp.as_ptr().add(u * S::LANES));
            }
        }
        acc
    }
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

/// `acc[u] += a · row[u]` for the `U` vectors of a B row.
///
/// # Safety
/// `row` is readable for `U · LANES` floats.
#[inline(always)]
unsafe fn axpy<S: Simd, const U: usize>(acc: &mut [S::V; U], a: f32, row: *const f32) {
    // SAFETY: forwarded contract.
    unsafe { fma_row::<S, U>(acc, S::splat(a), row) }
}

/// `acc[u] += av · row[u]` with `av` already splat.
///
/// # Safety
/// `row` is readable for `U · LANES` floats.
#[inline(always)]
unsafe fn fma_row<S: Simd, const U: usize>(acc: &mut [S::V; U], av: S::V, row: *const f32) {
    // SAFETY: the caller guarantees the row is readable for U·LANES floats.
    unsafe {
        for (u, x) in acc.iter_mut().enumerate() {
            *x = S::fma(*x, av, S::load(row.add(u * S::LANES)));
        }
    }
}

/// CSR, `R` rows together: per chunk, each row's entries below `step.k.end` are found first
/// (binary search from its cursor), the rows then advance in lock step over their common length
/// with no bounds test in the loop (`R × U` independent FMA chains), and each row finishes its
/// own tail alone. `cursors[i]` is the next entry of local row `i`.
///
/// # Safety
/// `b` holds `a.cols()` rows of the tile width; `c` holds `rows.len()` rows; `U · LANES ≤ 128`;
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
            store_row::<S, U>(row_acc, c.ptr.add((local + i) * c.stride), c.width);
        }
    }
}

/// N:M, `R` rows together (then single rows for the remainder); `step.k` is aligned to M.
///
/// # Safety
/// As [`csr`] (cursors unused).
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
            store_row::<S, U>(row_acc, c.ptr.add((local + i) * c.stride), c.width);
        }
    }
}

/// V:2:M with the block's shared columns gathered: for each V-block and chunk of groups, the B rows
/// of the block's 4 kept columns per group are copied once into `step.scratch` (`[group][4][w]`,
/// contiguous, so a chunk is one L1-sized panel), then the block's rows run `R` at a time (the
/// rest one by one) against it, each taking its 2 of the 4 through its pair code. The copy costs
/// `4/V` of the row work, and every B load of the row loop hits the panel.
///
/// `step.k` must be all of K (the chunking is internal, `step.k_chunk` columns per chunk, a
/// rounded up to whole groups, 0 = all).
///
/// # Safety
/// As [`csr`] (cursors unused), plus `rows` starts and ends on multiples of V and
/// `step.scratch` holds at least `4 · w · groups-per-chunk` floats (`w = U · LANES`).
#[inline(always)]
pub(crate) unsafe fn vnm<S: Simd, const R: usize, const U: usize>(
    a: &VnmMatrix,
    rows: Range<usize>,
    step: &mut Step,
    b: BTile,
    c: CTile,
) {
    let (v, m, groups) = (a.v(), a.m(), a.groups());
    let w = U * S::LANES;
    let per_chunk = if step.k_chunk == 0 {
        groups
    } else {
        step.k_chunk.div_ceil(m)
    };
    debug_assert!(step.scratch.len() >= 4 * w * per_chunk.min(groups));
    let panel = step.scratch.as_mut_ptr();
    for blk in rows.start / v..rows.end / v {
        // At least one (possibly empty) chunk, so that C is written even when K = 0.
        let mut g0 = 0;
        loop {
            let g1 = (g0 + per_chunk).min(groups);
            // SAFETY: forwarded contract; the panel holds 4·w floats per group of the chunk and
            // every row block stays inside one V-block of `rows`.
            unsafe {
                gather_block::<S, U>(a, blk, g0..g1, b, panel);
                let (mut r, end) = (blk * v, blk * v + v);
                while r + R <= end {
                    vnm_rows::<S, R, U>(a, r, r - rows.start, g0..g1, panel, c);
                    r += R;
                }
                while r < end {
                    vnm_rows::<S, 1, U>(a, r, r - rows.start, g0..g1, panel, c);
                    r += 1;
                }
            }
            g0 = g1;
            if g0 >= groups {
                break;
            }
        }
    }
}

/// Copies the B rows of V-block `blk`'s 4 kept columns of each group of `gs` into `panel`
/// (`[g − gs.start][q][w]`); phantom columns (past the last real one) get zeros.
///
/// # Safety
/// `panel` is writable for `4 · w · gs.len()` floats; `b` as in [`csr`].
#[inline(always)]
unsafe fn gather_block<S: Simd, const U: usize>(
    a: &VnmMatrix,
    blk: usize,
    gs: Range<usize>,
    b: BTile,
    panel: *mut f32,
) {
    let (m, groups, cols) = (a.m(), a.groups(), a.cols());
    let w = U * S::LANES;
    let loc = a.column_loc().as_ptr();
    for g in gs.clone() {
        for q in 0..4 {
            // SAFETY: column_loc has 4 entries per (block, group); a column < cols has a B row
            // with w readable floats; the destination row is inside the panel.
            unsafe {
                let k = g * m + *loc.add((blk * groups + g) * 4 + q) as usize;
                let dst = panel.add(((g - gs.start) * 4 + q) * w);
                for u in 0..U {
                    let x = if k < cols {
                        S::load(b.ptr.add(k * b.stride + u * S::LANES))
                    } else {
                        S::zero()
                    };
                    S::store(dst.add(u * S::LANES), x);
                }
            }
        }
    }
}

/// Rows `r0..r0 + R` (all in one V-block) over the groups `gs` of a gathered panel; C is
/// overwritten on the first chunk and accumulated after.
///
/// The loop is bound by load ports (each FMA loads its B vector from the panel), so the rest is
/// loaded as little as possible: the pair codes of 8 groups come in one 8-byte load per row,
/// and each value in one broadcast load (no shuffle, which would share a port with the FMAs).
/// In an L1-resident micro-benchmark (`examples/row_loop_ceiling.rs`) this runs at 0.76 of a
/// dense micro-kernel's FMA rate, against 0.67 with a code load per group and a shuffled pair
/// of values.
///
/// # Safety
/// The panel holds the block's gathered rows for `gs`; C rows `local..local + R` are in the
/// tile.
#[inline(always)]
unsafe fn vnm_rows<S: Simd, const R: usize, const U: usize>(
    a: &VnmMatrix,
    r0: usize,
    local: usize,
    gs: Range<usize>,
    panel: *const f32,
    c: CTile,
) {
    let (groups, k_sp) = (a.groups(), a.k_sp());
    let w = U * S::LANES;
    let (vals, codes) = (a.values().as_ptr(), a.pair_codes().as_ptr());
    // SAFETY: rows r0..r0+R exist, so the (row, group) codes of `gs` and the value slots 2g,
    // 2g+1 < K_sp of its groups are inside their buffers (8 codes are read only when 8 groups of
    // `gs` remain); pair codes hold two positions in 0..4, so every panel row read exists.
    unsafe {
        let mut acc: [[S::V; U]; R] = std::array::from_fn(|i| {
            load_row::<S, U>(gs.start == 0, c.ptr.add((local + i) * c.stride), c.width)
        });
        let mut g = gs.start;
        while g + 8 <= gs.end {
            let mut code8: [u64; R] = std::array::from_fn(|i| {
                u64::from_le_bytes(*codes.add((r0 + i) * groups + g).cast::<[u8; 8]>())
            });
            // Two groups per step: four values and two codes per row.
            for h in (0..8).step_by(2) {
                let gp = panel.add((g + h - gs.start) * 4 * w);
                for (i, row_acc) in acc.iter_mut().enumerate() {
                    let vp = vals.add((r0 + i) * k_sp + 2 * (g + h));
                    let code = code8[i] as usize;
                    code8[i] >>= 16;
                    let rows = [
                        code & 3,
                        (code >> 2) & 3,
                        4 + ((code >> 8) & 3),
                        4 + ((code >> 10) & 3),
                    ];
                    for (s, q) in rows.into_iter().enumerate() {
                        fma_row::<S, U>(row_acc, S::splat(*vp.add(s)), gp.add(q * w));
                    }
                }
            }
            g += 8;
        }
        for g in g..gs.end {
            let gp = panel.add((g - gs.start) * 4 * w);
            for (i, row_acc) in acc.iter_mut().enumerate() {
                let r = r0 + i;
                let code = *codes.add(r * groups + g) as usize;
                let vp = vals.add(r * k_sp + 2 * g);
                fma_row::<S, U>(row_acc, S::splat(*vp), gp.add((code & 3) * w));
                fma_row::<S, U>(row_acc, S::splat(*vp.add(1)), gp.add((code >> 2) * w));
            }
        }
        for (i, row_acc) in acc.iter().enumerate() {
            store_row::<S, U>(row_acc, c.ptr.add((local + i) * c.stride), c.width);
        }
    }
}

/// Vector-wise V×1, `R` rows of a V-block together (then single rows): each kept column's B row
/// is loaded once into registers and used by all `R` rows. `cursors[b]` is the next kept vector
/// of local block `b`.
///
/// # Safety
/// As [`vnm`], with `cursors` holding one entry per V-block of `rows`.
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
            store_row::<S, U>(row_acc, c.ptr.add((local + i) * c.stride), c.width);
        }
    }
}
