//! Batch 1 (`n = 1`, a matrix–vector product), vectorised along K.
//!
//! With one column the tile kernels waste all but one lane (the scalar kernels ran instead and
//! reached 4–6 GFLOP/s of useful work on 3072×768, 1.0–1.7× over dense where the bytes allow
//! ~3.5×). Every row's stored values are contiguous, so a row takes `LANES` of them per step
//! and needs the x values at their columns:
//! - V:N:M: each V-block first gathers the x values of its 4 kept columns per group (`xs`, 4 per
//!   group, shared by the block's V rows); a step covers `LANES / 2` groups, and the 2 of each
//!   group's 4 gathered x values its pair code names are picked by one in-register permute
//!   ([`Gemv::select_pairs`]) — no load per product, no gather instruction;
//! - N:M and CSR: a gather instruction per step ([`Gemv::gather_nm`], [`Gemv::gather`]).
//!
//! On AVX2 and AVX-512 the across-rows kernels of [`super::gemv_panels`] run instead wherever
//! they apply (every CSR matrix, N:M with N ≤ 4 and M ≤ 16, V:N:M with M ≤ 8, with M ≤ 16 up
//! to V = 64, or with V a multiple of the lanes: `cpu::panel_layout::batch_one_layout`); these
//! remain for the other shapes.

use std::ops::Range;

use crate::cpu::simd::Simd;
use crate::VnmMatrix;

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The selections and gathers the batch-1 kernels need, for the ISAs that have them.
///
/// # Safety
/// As [`Simd`], and the pointer contracts of each method.
pub(crate) unsafe trait Gemv: Simd {
    /// From the gathered x values of `LANES / 2` groups (`xs`, 4 per group, `2 · LANES`
    /// readable floats) and their pair codes (`p0 | p1 << 2`, a byte per group, `LANES / 2`
    /// readable): the vector `[xs[4j + p0_j], xs[4j + p1_j]]` over the groups `j`, in the order
    /// of the value slots.
    unsafe fn select_pairs(xs: *const f32, codes: *const u8) -> Self::V;
    /// `[x[idx[l]]]` over the lanes; `idx` is readable for `LANES` indices, each a valid index
    /// of `x`.
    unsafe fn gather(x: *const f32, idx: *const u32) -> Self::V;
    /// `[x[first + offs[l] + pos[l]]]` over the lanes, 0 where that column is `cols` or more;
    /// `pos` readable for `LANES` bytes, `offs` for `LANES` indices, and `x` for `cols` floats.
    unsafe fn gather_nm(
        x: *const f32,
        cols: usize,
        first: usize,
        offs: *const i32,
        pos: *const u8,
    ) -> Self::V;
    /// As [`Gemv::gather_nm`] where all the step's columns lie within the `span ≤ 64` columns
    /// from `first`, and `x` is readable for `first + 32` floats (`span ≤ 32`) or `first + 64`:
    /// where the ISA can, the values are picked from those columns loaded whole, by permutes
    /// instead of a gather.
    #[inline(always)]
    unsafe fn select_nm(
        x: *const f32,
        first: usize,
        span: usize,
        offs: *const i32,
        pos: *const u8,
    ) -> Self::V {
        // SAFETY: the step's columns are below first + span, inside x by the contract.
        unsafe { Self::gather_nm(x, first + span, first, offs, pos) }
    }
    /// The sum of the lanes.
    unsafe fn sum(v: Self::V) -> f32;
}

// SAFETY: compiled only into `avx2,fma` functions selected after detection; reads 16 floats and
// 4 bytes as the contract says.
#[cfg(target_arch = "x86_64")]
unsafe impl Gemv for super::super::simd::Avx2 {
    #[inline(always)]
    unsafe fn select_pairs(xs: *const f32, codes: *const u8) -> __m256 {
        // SAFETY: AVX2 is available; the reads are inside the contract's bounds.
        unsafe {
            let c = _mm_cvtsi32_si128(codes.cast::<i32>().read_unaligned());
            // Each group's code twice (one per slot), widened to 8 lanes of i32.
            let c = _mm256_cvtepu8_epi32(_mm_unpacklo_epi8(c, c));
            let pos = _mm256_and_si256(
                _mm256_srlv_epi32(c, _mm256_setr_epi32(0, 2, 0, 2, 0, 2, 0, 2)),
                _mm256_set1_epi32(3),
            );
            let idx = _mm256_add_epi32(pos, _mm256_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12));
            let lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(xs), idx);
            let hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(xs.add(8)), idx);
            // Index ≥ 8 takes the upper half: bit 3 moved into the sign bit picks `hi`.
            _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)))
        }
    }

    #[inline(always)]
    unsafe fn gather(x: *const f32, idx: *const u32) -> __m256 {
        // SAFETY: AVX2 is available; the indices are valid for `x` (contract).
        unsafe { _mm256_i32gather_ps::<4>(x, _mm256_loadu_si256(idx.cast())) }
    }

    #[inline(always)]
    unsafe fn gather_nm(
        x: *const f32,
        cols: usize,
        first: usize,
        offs: *const i32,
        pos: *const u8,
    ) -> __m256 {
        // SAFETY: AVX2 is available; lanes at columns ≥ cols are masked off, so only columns
        // of x are read.
        unsafe {
            let p = _mm256_cvtepu8_epi32(_mm_loadl_epi64(pos.cast()));
            let col = _mm256_add_epi32(
                _mm256_add_epi32(p, _mm256_loadu_si256(offs.cast())),
                _mm256_set1_epi32(first as i32),
            );
            let inside = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols as i32), col);
            _mm256_mask_i32gather_ps::<4>(_mm256_setzero_ps(), x, col, _mm256_castsi256_ps(inside))
        }
    }

    /// Up to 32 columns loaded whole, 8 at a time, each permuted by the lanes' indices (the
    /// low 3 bits) and the four blended by bits 3 and 4: on Zen 3 a masked gather per step
    /// made N:M 2:4 at batch 1 run at 0.15× dense (3072×768; 0.39–0.43× this way).
    #[inline(always)]
    unsafe fn select_nm(
        x: *const f32,
        first: usize,
        span: usize,
        offs: *const i32,
        pos: *const u8,
    ) -> __m256 {
        if span > 32 {
            // SAFETY: as the trait's default: the columns are below first + span, inside x.
            return unsafe { Self::gather_nm(x, first + span, first, offs, pos) };
        }
        // SAFETY: AVX2 is available; the loads read 16 floats from x + first, and 32 only when
        // span > 16, inside the 32 the contract makes readable.
        unsafe {
            let p = _mm256_cvtepu8_epi32(_mm_loadl_epi64(pos.cast()));
            let idx = _mm256_add_epi32(p, _mm256_loadu_si256(offs.cast()));
            let base = x.add(first);
            let pick = |at: usize| _mm256_permutevar8x32_ps(_mm256_loadu_ps(base.add(at)), idx);
            // Bit 3 of an index, moved into the sign bit, picks the upper 8 columns.
            let bit3 = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));
            let low = _mm256_blendv_ps(pick(0), pick(8), bit3);
            if span <= 16 {
                return low;
            }
            let high = _mm256_blendv_ps(pick(16), pick(24), bit3);
            _mm256_blendv_ps(low, high, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 27)))
        }
    }

    #[inline(always)]
    unsafe fn sum(v: __m256) -> f32 {
        // SAFETY: AVX is available.
        unsafe {
            let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
            let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            let s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
            _mm_cvtss_f32(s)
        }
    }
}

// SAFETY: compiled only into `avx512f` functions selected after detection; reads 32 floats and
// 8 bytes as the contract says.
#[cfg(target_arch = "x86_64")]
unsafe impl Gemv for super::super::simd::Avx512 {
    #[inline(always)]
    unsafe fn select_pairs(xs: *const f32, codes: *const u8) -> __m512 {
        // SAFETY: AVX-512F is available; the reads are inside the contract's bounds.
        unsafe {
            let c = _mm_loadl_epi64(codes.cast::<__m128i>());
            let c = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(c, c));
            let pos = _mm512_and_si512(
                _mm512_srlv_epi32(
                    c,
                    _mm512_setr_epi32(0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2),
                ),
                _mm512_set1_epi32(3),
            );
            let idx = _mm512_add_epi32(
                pos,
                _mm512_setr_epi32(0, 0, 4, 4, 8, 8, 12, 12, 16, 16, 20, 20, 24, 24, 28, 28),
            );
            _mm512_permutex2var_ps(_mm512_loadu_ps(xs), idx, _mm512_loadu_ps(xs.add(16)))
        }
    }

    #[inline(always)]
    unsafe fn gather(x: *const f32, idx: *const u32) -> __m512 {
        // SAFETY: AVX-512F is available; the indices are valid for `x` (contract).
        unsafe { _mm512_i32gather_ps::<4>(_mm512_loadu_si512(idx.cast()), x.cast()) }
    }

    #[inline(always)]
    unsafe fn gather_nm(
        x: *const f32,
        cols: usize,
        first: usize,
        offs: *const i32,
        pos: *const u8,
    ) -> __m512 {
        // SAFETY: AVX-512F is available; lanes at columns ≥ cols are masked off, so only
        // columns of x are read.
        unsafe {
            let p = _mm512_cvtepu8_epi32(_mm_loadu_si128(pos.cast()));
            let col = _mm512_add_epi32(
                _mm512_add_epi32(p, _mm512_loadu_si512(offs.cast())),
                _mm512_set1_epi32(first as i32),
            );
            let inside = _mm512_cmplt_epi32_mask(col, _mm512_set1_epi32(cols as i32));
            _mm512_mask_i32gather_ps::<4>(_mm512_setzero_ps(), inside, col, x.cast())
        }
    }

    #[inline(always)]
    unsafe fn select_nm(
        x: *const f32,
        first: usize,
        span: usize,
        offs: *const i32,
        pos: *const u8,
    ) -> __m512 {
        // SAFETY: AVX-512F is available; the loads read 32 floats from x + first, and 64 only
        // when span > 32, as the contract allows.
        unsafe {
            let p = _mm512_cvtepu8_epi32(_mm_loadu_si128(pos.cast()));
            let idx = _mm512_add_epi32(p, _mm512_loadu_si512(offs.cast()));
            let base = x.add(first);
            let lo =
                _mm512_permutex2var_ps(_mm512_loadu_ps(base), idx, _mm512_loadu_ps(base.add(16)));
            if span <= 32 {
                return lo;
            }
            // Indices 32..63 come from the next 32 columns (the permute reads 5 bits).
            let hi = _mm512_permutex2var_ps(
                _mm512_loadu_ps(base.add(32)),
                idx,
                _mm512_loadu_ps(base.add(48)),
            );
            _mm512_mask_blend_ps(_mm512_cmpge_epi32_mask(idx, _mm512_set1_epi32(32)), lo, hi)
        }
    }

    #[inline(always)]
    unsafe fn sum(v: __m512) -> f32 {
        // SAFETY: AVX-512F is available.
        unsafe { _mm512_reduce_add_ps(v) }
    }
}

/// `y[r − rows.start] = A[r, :] · x` for the rows of `rows` (whole V-blocks); `xs` is scratch of
/// at least `4 · groups` floats.
///
/// # Safety
/// The ISA of `S` is available; `x` is readable for `a.cols()` floats, `y` writable for
/// `rows.len()`; `rows` starts and ends on multiples of V.
#[inline(always)]
pub(crate) unsafe fn gemv_vnm<S: Gemv>(
    a: &VnmMatrix,
    rows: Range<usize>,
    x: *const f32,
    y: *mut f32,
    xs: &mut [f32],
) {
    let (v, groups, k_sp) = (a.v(), a.groups(), a.k_sp());
    let per = S::LANES / 2; // groups per vector
    debug_assert!(xs.len() >= 4 * groups);
    let (vals, codes) = (a.values().as_ptr(), a.pair_codes().as_ptr());
    for blk in rows.start / v..rows.end / v {
        // SAFETY: column_loc has 4 entries per (block, group); columns < cols are inside x;
        // xs holds 4·groups floats. Rows of the block are < rows.end; values hold K_sp ≥
        // 2·groups slots per row and codes `groups` bytes per row, so the vector loop's reads
        // (2·per values and per codes from group g, with g + per ≤ groups) stay inside the row,
        // as do `select_pairs`' 4·per floats of xs.
        unsafe {
            gather_block_columns(a, blk, x, xs);
            let xs = xs.as_ptr();
            for r in blk * v..(blk + 1) * v {
                let (vr, cr) = (vals.add(r * k_sp), codes.add(r * groups));
                // Two chains, so that the loop is not bound by the FMA's latency.
                let (mut acc0, mut acc1) = (S::zero(), S::zero());
                let mut g = 0;
                while g + 2 * per <= groups {
                    let x0 = S::select_pairs(xs.add(4 * g), cr.add(g));
                    let x1 = S::select_pairs(xs.add(4 * (g + per)), cr.add(g + per));
                    acc0 = S::fma(acc0, S::load(vr.add(2 * g)), x0);
                    acc1 = S::fma(acc1, S::load(vr.add(2 * (g + per))), x1);
                    g += 2 * per;
                }
                if g + per <= groups {
                    let x0 = S::select_pairs(xs.add(4 * g), cr.add(g));
                    acc0 = S::fma(acc0, S::load(vr.add(2 * g)), x0);
                    g += per;
                }
                let mut sum = S::sum(acc0) + S::sum(acc1);
                for g in g..groups {
                    let code = *cr.add(g) as usize;
                    sum += *vr.add(2 * g) * *xs.add(4 * g + (code & 3))
                        + *vr.add(2 * g + 1) * *xs.add(4 * g + (code >> 2));
                }
                *y.add(r - rows.start) = sum;
            }
        }
    }
}

/// `xs[4g + q] = x[g · m + column_loc[q]]` for V-block `blk`'s 4 kept columns of each group
/// `g` (0 at a phantom column ≥ `cols`).
///
/// # Safety
/// `x` is readable for `a.cols()` floats; `blk` is a block of `a`; `xs` holds `4 · groups`.
#[inline(always)]
pub(crate) unsafe fn gather_block_columns(
    a: &VnmMatrix,
    blk: usize,
    x: *const f32,
    xs: &mut [f32],
) {
    let (m, groups, cols) = (a.m(), a.groups(), a.cols());
    let loc = &a.column_loc()[blk * groups * 4..(blk + 1) * groups * 4];
    for (g, (xg, lg)) in xs.chunks_exact_mut(4).zip(loc.chunks_exact(4)).enumerate() {
        for (o, &q) in xg.iter_mut().zip(lg) {
            let k = g * m + q as usize;
            // SAFETY: k < cols is inside x (contract).
            *o = if k < cols { unsafe { *x.add(k) } } else { 0.0 };
        }
    }
}

/// `Σ vals[e] · x_e` over a row's value slots `slots`: whole vectors of slots through `xv(e)`
/// (the x values of slots `e..e + LANES`), the rest one by one through `x_at(e)` (0 for a slot
/// at a phantom column).
///
/// # Safety
/// The ISA of `S` is available and `vals` is readable over `slots`.
#[inline(always)]
unsafe fn row_dot<S: Gemv>(
    vals: *const f32,
    slots: Range<usize>,
    xv: impl Fn(usize) -> S::V,
    x_at: impl Fn(usize) -> f32,
) -> f32 {
    // SAFETY: every read of `vals` is inside `slots` (contract).
    unsafe {
        let mut acc = S::zero();
        let mut e = slots.start;
        while e + S::LANES <= slots.end {
            acc = S::fma(acc, S::load(vals.add(e)), xv(e));
            e += S::LANES;
        }
        let mut sum = S::sum(acc);
        for e in e..slots.end {
            sum += *vals.add(e) * x_at(e);
        }
        sum
    }
}

/// `y[r − rows.start] = A[r, :] · x` for CSR rows `rows`.
///
/// # Safety
/// The ISA of `S` is available; `x` is readable for `a.cols()` floats, `y` writable for
/// `rows.len()`.
#[inline(always)]
pub(crate) unsafe fn gemv_csr<S: Gemv>(
    a: &crate::CsrMatrix,
    rows: Range<usize>,
    x: *const f32,
    y: *mut f32,
) {
    let (ptr, idx, vals) = (a.row_ptr(), a.col_idx().as_ptr(), a.values().as_ptr());
    for r in rows.clone() {
        let (lo, hi) = (ptr[r] as usize, ptr[r + 1] as usize);
        // SAFETY: entries lo..hi of the row are inside col_idx and values, and every column
        // index is < cols (the format's invariant), so the gathers and reads stay in x.
        unsafe {
            *y.add(r - rows.start) = row_dot::<S>(
                vals,
                lo..hi,
                |e| S::gather(x, idx.add(e)),
                |e| *x.add(*idx.add(e) as usize),
            );
        }
    }
}

/// `y[r − rows.start] = A[r, :] · x` for N:M rows `rows`, where N divides `LANES` (so that
/// each step covers `LANES / N` whole groups).
///
/// # Safety
/// The ISA of `S` is available; `x` is readable for `a.cols()` floats, `y` writable for
/// `rows.len()`; `LANES` is a multiple of `a.n()`.
#[inline(always)]
pub(crate) unsafe fn gemv_nm<S: Gemv>(
    a: &crate::NmMatrix,
    rows: Range<usize>,
    x: *const f32,
    y: *mut f32,
) {
    let (n, m, groups, cols) = (a.n(), a.m(), a.groups(), a.cols());
    debug_assert!(S::LANES.is_multiple_of(n));
    // N divides LANES, a power of two, so a slot's group is a shift away (a division per step
    // took ~20–30 % of the kernel's time at batch 1 on Zen 3).
    let shift = n.trailing_zeros();
    // Lane l's group offset within a step, in columns.
    let mut offs = [0i32; 16];
    for (l, o) in offs.iter_mut().enumerate().take(S::LANES) {
        *o = ((l / n) * m) as i32;
    }
    let (vals, pos) = (a.values().as_ptr(), a.positions().as_ptr());
    let slots = groups * n;
    // The columns a step's groups span: up to 64 are loaded whole where that stays inside x
    // (on AVX-512 the values are then picked by permutes), else gathered.
    let span = (S::LANES / n) * m;
    let whole = if span <= 32 { 32 } else { 64 };
    for r in rows.clone() {
        // SAFETY: a row's `groups · n` slots are inside values and positions, and `row_dot`
        // reads LANES slots from slot s only when s + LANES ≤ slots; gathers mask columns ≥
        // cols, whole loads happen only below cols, and the tail skips phantom columns.
        unsafe {
            let pr = pos.add(r * slots);
            *y.add(r - rows.start) = row_dot::<S>(
                vals.add(r * slots),
                0..slots,
                |s| {
                    let first = (s >> shift) * m;
                    if span <= 64 && first + whole <= cols {
                        S::select_nm(x, first, span, offs.as_ptr(), pr.add(s))
                    } else {
                        S::gather_nm(x, cols, first, offs.as_ptr(), pr.add(s))
                    }
                },
                |s| {
                    let k = (s >> shift) * m + *pr.add(s) as usize;
                    if k < cols {
                        *x.add(k)
                    } else {
                        0.0
                    }
                },
            );
        }
    }
}
