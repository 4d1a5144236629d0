//! The V:N:M micro-kernel and its gather of each V-block's kept columns.

use std::ops::Range;

use super::{fma_row, load_row, store_row, BTile, CTile, Step};
use crate::cpu::simd::Simd;
use crate::format::RowPairs;
use crate::VnmMatrix;

/// V:2:M with the block's shared columns gathered: for each V-block and chunk of groups, the B rows
/// of the block's 4 kept columns per group are copied once into `step.scratch` (`[group][4][w]`,
/// contiguous, so a chunk is one L1-sized panel), then the block's rows run `R` at a time (the
/// rest one by one) against it, each taking its 2 of the 4 through its pair code. The copy costs
/// `4/V` of the row work, and every B load of the row loop hits the panel.
///
/// With `R = 2` and an even V, the rows go in pairs through [`RowPairs`] instead
/// (`vnm_pair`): a column the two rows share in a group is loaded once for both. Where B's tile
/// is packed (`pack_b = 1`, or a partial last tile copied because no kernel of its own width
/// runs it in place), or always at V = 2 (N:M 2:M in pairs:
/// [`gathers_nothing`]), K is a multiple of M ≤ 16 and the layout's direct entries exist, the
/// pairs read the kept rows from the tile itself and nothing is gathered: the copy cost
/// 15–20 % of a V = 16 product (4/V of the row work, and stores).
///
/// `step.k` must be all of K (the chunking is internal, `step.k_chunk` columns per chunk, a
/// rounded up to whole groups, 0 = all).
///
/// # Safety
/// As `csr` (cursors unused), plus `rows` starts and ends on multiples of V and, unless
/// [`gathers_nothing`] at `R`, `step.scratch` holds at least `4 · w · groups-per-chunk` floats
/// (`w = U · LANES`).
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
    let panel = step.scratch.as_mut_ptr();
    let pairs = if R == 2 && pairs_enabled() {
        a.row_pairs()
    } else {
        None
    };
    // Where B's tile is packed (its rows w floats apart, so a chunk's rows spread over L1's
    // sets, and aligned to the vectors) the pairs read B's rows where they stand: the gather
    // would copy them into a second panel of the same shape (kernels/BENCH.md, 2026-12-05).
    // With V = 2 (N:M in pairs, `NmMatrix::as_row_pairs`) they read B where it lies, packed
    // or not: a gather per pair would cost as many loads as the pair's own FMAs.
    // `gathers_nothing` is this decision without a tile, made before the scratch panel is
    // allocated.
    let packed = b.stride == w && (b.ptr as usize).is_multiple_of(S::LANES * 4);
    let direct = pairs
        .filter(|_| reads_in_place(a, R, packed))
        .and_then(|p| p.direct.as_deref());
    if let (Some(plan), Some(ents)) = (pairs, direct) {
        // Nothing to gather: each chunk of groups goes past every pair of `rows` (a band of
        // whole V-blocks, `cpu::vnm_band`; for N:M in pairs a pair is a block, and a chunk per
        // pair would reuse nothing) while its B rows are in L1 or L2.
        let mut g0 = 0;
        loop {
            let g1 = (g0 + per_chunk).min(groups);
            let ct = if g1 >= groups { c } else { c.plain() };
            for p in rows.start / 2..rows.end / 2 {
                let [r1, r2] = plan.rows[p].map(|r| r as usize - rows.start);
                // SAFETY: forwarded contract; the pair's rows are in `rows` (its V-block is).
                unsafe {
                    vnm_pair::<S, U, true>(plan, ents, p, [r1, r2], g0..g1, (b.ptr, b.stride), ct)
                };
            }
            g0 = g1;
            if g0 >= groups {
                return;
            }
        }
    }
    debug_assert!(step.scratch.len() >= 4 * w * per_chunk.min(groups));
    for blk in rows.start / v..rows.end / v {
        // At least one (possibly empty) chunk, so that C is written even when K = 0.
        let mut g0 = 0;
        loop {
            let g1 = (g0 + per_chunk).min(groups);
            // The tile's bias and activation on the last chunk's store only.
            let ct = if g1 >= groups { c } else { c.plain() };
            // SAFETY: forwarded contract; the panel holds 4·w floats per group of the chunk and
            // every row block stays inside one V-block of `rows`.
            unsafe {
                gather_block::<S, U>(a, blk, g0..g1, b, panel);
                let (mut r, end) = (blk * v, blk * v + v);
                if let Some(plan) = pairs {
                    for p in blk * v / 2..(blk + 1) * v / 2 {
                        let [r1, r2] = plan.rows[p].map(|r| r as usize - rows.start);
                        vnm_pair::<S, U, false>(
                            plan,
                            &plan.entries,
                            p,
                            [r1, r2],
                            g0..g1,
                            (panel, w),
                            ct,
                        );
                    }
                    r = end;
                }
                while r + R <= end {
                    vnm_rows::<S, R, U>(a, r, r - rows.start, g0..g1, panel, ct);
                    r += R;
                }
                while r < end {
                    vnm_rows::<S, 1, U>(a, r, r - rows.start, g0..g1, panel, ct);
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

/// Whether [`vnm`] at `R = r` reads every tile of B in place, gathering nothing (V = 2 in
/// pairs with direct entries), so that its caller needs no scratch panel.
pub(crate) fn gathers_nothing(a: &VnmMatrix, r: usize) -> bool {
    reads_in_place(a, r, false)
}

/// Whether [`vnm`] at `R = r` runs its row pairs on B's tile where it lies: always at V = 2,
/// otherwise only where the tile is `packed` (rows `U · LANES` floats apart, on a vector).
fn reads_in_place(a: &VnmMatrix, r: usize, packed: bool) -> bool {
    r == 2
        && (a.v() == 2 || packed)
        && pairs_enabled()
        && direct_enabled()
        && a.row_pairs().is_some_and(|p| p.direct.is_some())
}

/// Whether the row pairs may read a packed tile of B in place (`COTUNE_VNM_DIRECT=0` in the
/// environment makes them gather it as before, to measure both at the same points).
pub(crate) fn direct_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("COTUNE_VNM_DIRECT").map_or(true, |v| v != "0"))
}

/// Whether `R = 2` takes the row pairs, V:N:M's and N:M's (`COTUNE_VNM_PAIRS=0` in the
/// environment turns them off, to measure the row loops at the same points).
pub(crate) fn pairs_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("COTUNE_VNM_PAIRS").map_or(true, |v| v != "0"))
}

/// Copies the B rows of V-block `blk`'s 4 kept columns of each group of `gs` into `panel`
/// (`[g − gs.start][q][w]`); phantom columns (past the last real one) get zeros.
///
/// # Safety
/// `panel` is writable for `4 · w · gs.len()` floats; `b` as in `csr`.
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
            store_row::<S, U>(row_acc, c, local + i);
        }
    }
}

/// Pair `p` of the row-pair layout (two rows of one V-block, C rows `local` of the tile) over
/// the groups `gs` of a gathered panel (or, `DIRECT`, of B's packed tile, `ents` then being
/// the layout's direct entries): in each shared group the shared column's B vector is
/// loaded once for both rows' FMAs (3 loads for 4 FMAs), then the disjoint groups as two rows.
/// C is overwritten on the first chunk and accumulated after.
///
/// In L1 (`examples/row_loop_ceiling_avx512.rs`, Zen 4) this loop runs at 0.96–0.97 of a dense
/// 12×2 micro-kernel's FMA rate, against 0.74–0.77 for the row loop at `R = 3` (`vnm_rows`).
/// The two rows' accumulators are separate arrays: one `[[V; U]; 2]` indexed by row was kept
/// on the stack at `U = 4` (the product 1.2–1.3× slower).
///
/// # Safety
/// As `vnm_rows`: the panel (`src.0`, rows `src.1 = w` floats apart) holds the pair's block's
/// gathered rows for `gs`, or, `DIRECT`, `src.0` is a tile of B with rows `src.1` floats apart
/// (each readable for `w`) and K rows, `ents` being `plan.direct` (as long as
/// `plan.entries`); and C rows `local[0]` and `local[1]` are in the tile.
#[inline(always)]
unsafe fn vnm_pair<S: Simd, const U: usize, const DIRECT: bool>(
    plan: &RowPairs,
    ents: &[u32],
    p: usize,
    local: [usize; 2],
    gs: Range<usize>,
    (src, stride): (*const f32, usize),
    c: CTile,
) {
    let (shared, disjoint) = plan.ranges(p, gs.clone());
    let (ents, vals) = (ents.as_ptr(), plan.values.as_ptr());
    // The B rows of an entry's four columns: in the gathered panel (`src`, the chunk's groups
    // from `gs.start`, 4 rows each) or, `DIRECT`, in B's tile (`src`, row k at k · stride).
    let rows_of = |ent: usize| -> [*const f32; 4] {
        if DIRECT {
            let base = src.wrapping_add((ent & 0xffff) * stride);
            [16, 20, 24, 28].map(|shift| base.wrapping_add(((ent >> shift) & 15) * stride))
        } else {
            let gp = src.wrapping_add(((ent & 0xffff) - gs.start) * 4 * stride);
            [16, 18, 20, 22].map(|shift| gp.wrapping_add(((ent >> shift) & 3) * stride))
        }
    };
    // SAFETY: the ranges index the pair's entries of groups in `gs` (4 values each); their
    // rows are panel rows the gather wrote (positions < 4) or, `DIRECT`, rows g·M + p < K of
    // the tile (`with_direct` leaves K a multiple of M); C rows `local` are in the tile.
    unsafe {
        let at = |i: usize| c.ptr.add(local[i] * c.stride);
        let mut a0 = load_row::<S, U>(gs.start == 0, at(0), c.width);
        let mut a1 = load_row::<S, U>(gs.start == 0, at(1), c.width);
        for e in shared {
            let [rs, r1, _, r2] = rows_of(*ents.add(e) as usize);
            let v = vals.add(4 * e);
            let (x0, x1, x2, x3) = (
                S::splat(*v),
                S::splat(*v.add(1)),
                S::splat(*v.add(2)),
                S::splat(*v.add(3)),
            );
            for u in 0..U {
                let bs = S::load(rs.add(u * S::LANES));
                a0[u] = S::fma(a0[u], x0, bs);
                a1[u] = S::fma(a1[u], x2, bs);
                a0[u] = S::fma(a0[u], x1, S::load(r1.add(u * S::LANES)));
                a1[u] = S::fma(a1[u], x3, S::load(r2.add(u * S::LANES)));
            }
        }
        for e in disjoint {
            let r = rows_of(*ents.add(e) as usize);
            let v = vals.add(4 * e);
            fma_row::<S, U>(&mut a0, S::splat(*v), r[0]);
            fma_row::<S, U>(&mut a0, S::splat(*v.add(1)), r[1]);
            fma_row::<S, U>(&mut a1, S::splat(*v.add(2)), r[2]);
            fma_row::<S, U>(&mut a1, S::splat(*v.add(3)), r[3]);
        }
        store_row::<S, U>(&a0, c, local[0]);
        store_row::<S, U>(&a1, c, local[1]);
    }
}
