//! Batch 1 across rows, over panels ([`RowPanels`], [`CsrPanels`]): a vector holds `LANES`
//! consecutive rows, so each step is one load of their values, one permute of a window of x
//! values by their positions, and one FMA, and the panel's `LANES` results are stored together.
//!
//! - N:M, and V:N:M through its group panels (M ≤ 8, and M ≤ 16 up to V = 64; see
//!   `cpu::panel_layout::batch_one_layout`): a group's window is the `m ≤ 16` columns it spans, read from a
//!   zero-padded copy of x (the last group may run past `cols`);
//! - V:N:M otherwise: each V-block first gathers the x values of its 4 kept columns per group
//!   (shared by the block's V rows, V a multiple of the lanes), and the positions name one of
//!   those 4;
//! - CSR: windows of `LANES − 1` columns, each followed by a zero that padded lanes pick; a
//!   panel has as many slots per window as its fullest row has entries there.
//!
//! Row by row along K the same products needed a gather or several permutes per 8 values, and
//! one accumulator per row (see [`super::gemv`], kept for the shapes this does not cover). At
//! 3072×768 this took N:M 2:8 from 0.6× to 2.9× of dense, 64:2:8 from 1.0× to 2.5×, and CSR
//! 75 % from 0.46× to 1.0× on Zen 3 (AVX2, 8 lanes); on Zen 4 (AVX-512, 16 lanes, one
//! `vpermps` for every window) 2:8 from 1.3× to 2.9×, 64:2:8 from 1.35× to 2.2× and CSR 75 %
//! from 0.41× to 1.1× (`kernels/BENCH.md`).

use std::ops::Range;

use crate::cpu::simd::Simd;
use crate::format::{CsrPanels, RowPanels};

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Picks per lane from a group's window of x values.
///
/// # Safety
/// As [`Simd`], and the pointer contracts of each method.
pub(crate) unsafe trait PanelPick: Simd {
    /// A group's x values held in registers.
    type Window: Copy;
    /// A vector of lane positions, converted once and shared by every window picked from.
    type Idx: Copy;
    /// The `W` floats from `x` (`W` is 4, 8 or 16, and `x` readable for that many).
    unsafe fn window<const W: usize>(x: *const f32) -> Self::Window;
    /// The positions of `LANES` bytes at `pos` (`pos` readable for `LANES` bytes).
    unsafe fn positions(pos: *const u8) -> Self::Idx;
    /// `[w[idx[l]]]` over the lanes; each position `< W`.
    unsafe fn pick_at<const W: usize>(w: Self::Window, idx: Self::Idx) -> Self::V;
    /// `[x[idx[l]]]` over the lanes, from a window of `LANES` floats (CSR's windows); `x`
    /// readable for `LANES` floats, each position `< LANES`.
    unsafe fn pick_lanes_at(x: *const f32, idx: Self::Idx) -> Self::V;

    /// `[w[pos[l]]]` over the lanes; `pos` readable for `LANES` bytes, each `< W`.
    #[inline(always)]
    unsafe fn pick<const W: usize>(w: Self::Window, pos: *const u8) -> Self::V {
        // SAFETY: the contract's reads.
        unsafe { Self::pick_at::<W>(w, Self::positions(pos)) }
    }

    /// `[x[pos[l]]]` over the lanes, from a window of `LANES` floats (CSR's windows); `x`
    /// readable for `LANES` floats, `pos` for `LANES` bytes, each `< LANES`.
    #[inline(always)]
    unsafe fn pick_lanes(x: *const f32, pos: *const u8) -> Self::V {
        // SAFETY: the contract's reads.
        unsafe { Self::pick_lanes_at(x, Self::positions(pos)) }
    }
}

// SAFETY: compiled only into `avx2,fma` functions selected after detection; the reads are the
// contract's.
#[cfg(target_arch = "x86_64")]
unsafe impl PanelPick for super::super::simd::Avx2 {
    type Window = (__m256, __m256);
    type Idx = __m256i;

    #[inline(always)]
    unsafe fn window<const W: usize>(x: *const f32) -> Self::Window {
        // SAFETY: AVX is available; `x` is readable for W floats (contract). For W = 4 the
        // upper half is left undefined by the cast, and `pick` never reads it (positions < 4).
        unsafe {
            match W {
                4 => (_mm256_castps128_ps256(_mm_loadu_ps(x)), _mm256_setzero_ps()),
                8 => (_mm256_loadu_ps(x), _mm256_setzero_ps()),
                _ => (_mm256_loadu_ps(x), _mm256_loadu_ps(x.add(8))),
            }
        }
    }

    #[inline(always)]
    unsafe fn positions(pos: *const u8) -> __m256i {
        // SAFETY: AVX2 is available; `pos` is readable for 8 bytes (contract).
        unsafe { _mm256_cvtepu8_epi32(_mm_loadl_epi64(pos.cast())) }
    }

    #[inline(always)]
    unsafe fn pick_at<const W: usize>(w: Self::Window, idx: __m256i) -> __m256 {
        // SAFETY: AVX2 is available.
        unsafe {
            let lo = _mm256_permutevar8x32_ps(w.0, idx);
            if W <= 8 {
                return lo;
            }
            // Positions 8..16 take the upper window: bit 3 moved into the sign bit picks it.
            let hi = _mm256_permutevar8x32_ps(w.1, idx);
            _mm256_blendv_ps(lo, hi, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)))
        }
    }

    #[inline(always)]
    unsafe fn pick_lanes_at(x: *const f32, idx: __m256i) -> __m256 {
        // SAFETY: the contract's read of 8 floats.
        unsafe { Self::pick_at::<8>(Self::window::<8>(x), idx) }
    }
}

// SAFETY: compiled only into `avx512f` functions selected after detection; the reads are the
// contract's.
#[cfg(target_arch = "x86_64")]
unsafe impl PanelPick for super::super::simd::Avx512 {
    type Window = __m512;
    type Idx = __m512i;

    #[inline(always)]
    unsafe fn window<const W: usize>(x: *const f32) -> __m512 {
        // SAFETY: AVX-512F is available; `x` is readable for W floats (contract). For W < 16
        // the upper lanes are left undefined by the cast, and `pick_at` never reads them
        // (positions < W).
        unsafe {
            match W {
                4 => _mm512_castps128_ps512(_mm_loadu_ps(x)),
                8 => _mm512_castps256_ps512(_mm256_loadu_ps(x)),
                _ => _mm512_loadu_ps(x),
            }
        }
    }

    #[inline(always)]
    unsafe fn positions(pos: *const u8) -> __m512i {
        // SAFETY: AVX-512F is available; `pos` is readable for 16 bytes (contract).
        unsafe { _mm512_cvtepu8_epi32(_mm_loadu_si128(pos.cast())) }
    }

    #[inline(always)]
    unsafe fn pick_at<const W: usize>(w: __m512, idx: __m512i) -> __m512 {
        // SAFETY: AVX-512F is available. One permute covers every window, 16 included.
        unsafe { _mm512_permutexvar_ps(idx, w) }
    }

    #[inline(always)]
    unsafe fn pick_lanes_at(x: *const f32, idx: __m512i) -> __m512 {
        // SAFETY: the contract's read of 16 floats.
        unsafe { Self::pick_at::<16>(Self::window::<16>(x), idx) }
    }
}

/// One panel: lane `l` gets `Σ_g Σ_j vals[(g·N + j)·LANES + l] · x[g·stride + pos[same]]`.
///
/// # Safety
/// The ISA of `S` is available; `vals` and `pos` are readable for `groups · N · LANES`
/// entries, each position `< W`; `x` is readable for `(groups − 1) · stride + W` floats.
#[inline(always)]
unsafe fn panel_dot<S: PanelPick, const W: usize, const N: usize>(
    vals: *const f32,
    pos: *const u8,
    groups: usize,
    x: *const f32,
    stride: usize,
) -> S::V {
    let l = S::LANES;
    // SAFETY: every read is at an entry below groups · N · LANES, or a window inside x
    // (contract).
    unsafe {
        // Four chains (two groups × slot parity), so that the loop is not bound by the FMA's
        // latency.
        let (mut a0, mut a1, mut a2, mut a3) = (S::zero(), S::zero(), S::zero(), S::zero());
        let mut g = 0;
        while g + 2 <= groups {
            let (w0, w1) = (
                S::window::<W>(x.add(g * stride)),
                S::window::<W>(x.add((g + 1) * stride)),
            );
            let e = g * N * l;
            for j in 0..N {
                let (e0, e1) = (e + j * l, e + (N + j) * l);
                let p0 = S::pick::<W>(w0, pos.add(e0));
                let p1 = S::pick::<W>(w1, pos.add(e1));
                if j % 2 == 0 {
                    a0 = S::fma(a0, S::load(vals.add(e0)), p0);
                    a2 = S::fma(a2, S::load(vals.add(e1)), p1);
                } else {
                    a1 = S::fma(a1, S::load(vals.add(e0)), p0);
                    a3 = S::fma(a3, S::load(vals.add(e1)), p1);
                }
            }
            g += 2;
        }
        if g < groups {
            let w0 = S::window::<W>(x.add(g * stride));
            for j in 0..N {
                let e0 = (g * N + j) * l;
                let p0 = S::pick::<W>(w0, pos.add(e0));
                if j % 2 == 0 {
                    a0 = S::fma(a0, S::load(vals.add(e0)), p0);
                } else {
                    a1 = S::fma(a1, S::load(vals.add(e0)), p0);
                }
            }
        }
        S::add(S::add(a0, a1), S::add(a2, a3))
    }
}

/// `y[r − rows.start] = A[r, :] · x` for the rows of `rows` through their panels (`N` slots per
/// group, a window of `W` floats from `x + g · stride`).
///
/// # Safety
/// The ISA of `S` is available; `panels` were built for `S::LANES` with `groups` groups of `N`
/// slots and positions `< W`; `rows.start` is a multiple of `LANES`, `rows.end` at most the
/// matrix's rows; `x` as [`panel_dot`]; `y` writable for `rows.len()`.
#[inline(always)]
unsafe fn run<S: PanelPick, const W: usize, const N: usize>(
    panels: &RowPanels,
    groups: usize,
    rows: Range<usize>,
    x: *const f32,
    stride: usize,
    y: *mut f32,
) {
    let l = S::LANES;
    let per = groups * N * l;
    let (vals, pos) = (panels.values().as_ptr(), panels.positions().as_ptr());
    for p in rows.start / l..rows.end.div_ceil(l) {
        // SAFETY: panel p is inside the panels (its rows are below the matrix's), so its
        // `per` entries are readable; the rows written are inside `rows`.
        unsafe {
            let v = panel_dot::<S, W, N>(vals.add(p * per), pos.add(p * per), groups, x, stride);
            store_panel::<S>(v, p, &rows, y);
        }
    }
}

/// Stores panel `p`'s results into `y` (which starts at row `rows.start`), only the lanes of
/// rows below `rows.end`.
///
/// # Safety
/// The ISA of `S` is available; panel `p` starts inside `rows`, and `y` is writable for
/// `rows.len()`.
#[inline(always)]
unsafe fn store_panel<S: Simd>(v: S::V, p: usize, rows: &Range<usize>, y: *mut f32) {
    let l = S::LANES;
    let (first, live) = (p * l, (rows.end - p * l).min(l));
    // SAFETY: rows first..first + live are inside `rows` (contract); the buffer holds 16 ≥
    // LANES floats.
    unsafe {
        if live == l {
            S::store(y.add(first - rows.start), v);
        } else {
            let mut t = [0.0f32; 16];
            S::store(t.as_mut_ptr(), v);
            std::ptr::copy_nonoverlapping(t.as_ptr(), y.add(first - rows.start), live);
        }
    }
}

/// Rows `rows` of N:M, or of V:N:M through its group panels (`VnmMatrix::group_panels`), of
/// `(n, m, groups)`: each row's `n` slots per group at positions in the group's `m` columns,
/// read from x directly; `xpad` holds x then zeros, `groups · m + 16` floats.
///
/// # Safety
/// The ISA of `S` is available; `panels` are the matrix's for `S::LANES`, positions `< m`;
/// `n ≤ 4` and `m ≤ 16`; `rows.start` is a multiple of `LANES` and `rows.end` at most the
/// matrix's rows; `y` writable for `rows.len()`.
#[inline(always)]
pub(crate) unsafe fn gemv_group_panels<S: PanelPick>(
    panels: &RowPanels,
    (n, m, groups): (usize, usize, usize),
    rows: Range<usize>,
    xpad: &[f32],
    y: *mut f32,
) {
    debug_assert!(xpad.len() >= groups * m + 16);
    let x = xpad.as_ptr();
    macro_rules! go {
        ($w:literal) => {
            match n {
                1 => run::<S, $w, 1>(panels, groups, rows, x, m, y),
                2 => run::<S, $w, 2>(panels, groups, rows, x, m, y),
                3 => run::<S, $w, 3>(panels, groups, rows, x, m, y),
                _ => run::<S, $w, 4>(panels, groups, rows, x, m, y),
            }
        };
    }
    // SAFETY: positions are < m ≤ W; a window from g · m reads at most 16 floats, inside xpad's
    // groups · m + 16; the rest is the contract.
    unsafe {
        match m {
            0..=4 => go!(4),
            5..=8 => go!(8),
            _ => go!(16),
        }
    }
}

/// V:N:M rows `rows` (whole V-blocks) through their panels; `xs` is scratch of at least
/// `4 · groups` floats.
///
/// # Safety
/// The ISA of `S` is available; `panels` are `a`'s for `S::LANES`; V is a multiple of `LANES`;
/// `rows` starts and ends on multiples of V; `x` is readable for `a.cols()` floats, `y`
/// writable for `rows.len()`.
#[inline(always)]
pub(crate) unsafe fn gemv_vnm_panels<S: PanelPick>(
    a: &crate::VnmMatrix,
    panels: &RowPanels,
    rows: Range<usize>,
    x: *const f32,
    y: *mut f32,
    xs: &mut [f32],
) {
    let (v, groups) = (a.v(), a.groups());
    debug_assert!(xs.len() >= 4 * groups);
    for blk in rows.start / v..rows.end / v {
        let block = blk * v..(blk + 1) * v;
        // SAFETY: x is readable for cols floats and blk is a block of a (contract); the block's
        // rows are inside `rows`, and its start a multiple of LANES; the positions are < 4 and
        // the windows of 4 from 4·g lie inside xs.
        unsafe {
            super::gemv::gather_block_columns(a, blk, x, xs);
            run::<S, 4, 2>(
                panels,
                groups,
                block.clone(),
                xs.as_ptr(),
                4,
                y.add(block.start - rows.start),
            );
        }
    }
}

/// CSR rows `rows` through their panels; `xw` is x in windows ([`CsrPanels::window_x`]).
///
/// # Safety
/// The ISA of `S` is available; `panels` are the matrix's for `S::LANES` (so that a window is
/// one vector); `rows.start` is a multiple of `LANES` and `rows.end` at most the matrix's
/// rows; `y` writable for `rows.len()`.
#[inline(always)]
pub(crate) unsafe fn gemv_csr_panels<S: PanelPick>(
    panels: &CsrPanels,
    rows: Range<usize>,
    xw: &[f32],
    y: *mut f32,
) {
    let l = S::LANES;
    let (starts, wins) = (panels.starts(), panels.windows().as_ptr());
    let (vals, pos, x) = (
        panels.values().as_ptr(),
        panels.positions().as_ptr(),
        xw.as_ptr(),
    );
    for p in rows.start / l..rows.end.div_ceil(l) {
        let (mut s, end) = (starts[p] as usize, starts[p + 1] as usize);
        // SAFETY: slots s..end are the panel's, inside windows, values and positions; each
        // window offset is that of a window of LANES floats inside xw, and positions are
        // < LANES; the rows written are inside `rows`.
        unsafe {
            let (mut a0, mut a1, mut a2, mut a3) = (S::zero(), S::zero(), S::zero(), S::zero());
            let step = |acc: S::V, s: usize| {
                S::fma(
                    acc,
                    S::load(vals.add(s * l)),
                    S::pick_lanes(x.add(*wins.add(s) as usize), pos.add(s * l)),
                )
            };
            while s + 4 <= end {
                a0 = step(a0, s);
                a1 = step(a1, s + 1);
                a2 = step(a2, s + 2);
                a3 = step(a3, s + 3);
                s += 4;
            }
            while s < end {
                a0 = step(a0, s);
                s += 1;
            }
            let v = S::add(S::add(a0, a1), S::add(a2, a3));
            store_panel::<S>(v, p, &rows, y);
        }
    }
}
