//! A few columns of B (2 ≤ n ≤ `cpu::few_columns::MAX_COLUMNS`) across rows, over the batch-1
//! panels ([`RowPanels`], [`CsrPanels`]): the matrix-vector kernels of [`super::gemv_panels`]
//! run on up to [`COLUMNS`] columns at once, each step's values and positions loaded once and
//! shared by the columns (one permute and one FMA per column).
//!
//! The tile kernels vectorise along N: at a ViT's 17 tokens a 16-lane vector holds 16 columns
//! and the 17th takes a second, mostly empty vector, and below 16 columns the scalar kernels
//! ran. Across rows every lane is a row, whatever n is.
//!
//! Column `c`'s x values (padded, windowed or gathered as the n = 1 kernels read them) start at
//! `x + c · xcol`; C is row-major with `n` floats per row.

use std::ops::Range;

use super::gemv_panels::PanelPick;
use crate::cpu::simd::Simd;
use crate::format::{CsrPanels, RowPanels};
use crate::VnmMatrix;

/// Columns computed together in one pass over a panel.
pub(crate) const COLUMNS: usize = 4;

/// Panel `p`'s `C` columns from `col`: lane `l` of result `c` is `Σ_g Σ_j vals[(g·N + j)·LANES
/// + l] · x_c[g·stride + pos[same]]`, with `x_c = x + c · xcol`.
///
/// # Safety
/// The ISA of `S` is available; `vals` and `pos` are readable for `groups · N · LANES` entries,
/// each position `< W`; each `x_c` is readable for `(groups − 1) · stride + W` floats.
#[inline(always)]
unsafe fn panel_dots<S: PanelPick, const W: usize, const N: usize, const C: usize>(
    vals: *const f32,
    pos: *const u8,
    groups: usize,
    x: *const f32,
    stride: usize,
    xcol: usize,
) -> [S::V; C] {
    let l = S::LANES;
    // SAFETY: every read is at an entry below groups · N · LANES, or a window inside an x_c
    // (contract). Plain loops over constant bounds, which unroll: a closure the compiler does
    // not inline loses the caller's target features (kernels/BENCH.md, tenth session).
    unsafe {
        let (mut acc0, mut acc1) = ([S::zero(); C], [S::zero(); C]);
        if groups == 0 {
            return acc0;
        }
        // Two groups per step, each with its own accumulators, so that a column's FMAs do not
        // wait on each other and each window is loaded once per group. (The windows start as
        // x's first, which exists: groups ≥ 1.)
        let (mut w0, mut w1) = ([S::window::<W>(x); C], [S::window::<W>(x); C]);
        let mut g = 0;
        while g + 2 <= groups {
            for c in 0..C {
                w0[c] = S::window::<W>(x.add(c * xcol + g * stride));
                w1[c] = S::window::<W>(x.add(c * xcol + (g + 1) * stride));
            }
            for j in 0..N {
                let (e0, e1) = ((g * N + j) * l, ((g + 1) * N + j) * l);
                let (v0, i0) = (S::load(vals.add(e0)), S::positions(pos.add(e0)));
                let (v1, i1) = (S::load(vals.add(e1)), S::positions(pos.add(e1)));
                for c in 0..C {
                    acc0[c] = S::fma(acc0[c], v0, S::pick_at::<W>(w0[c], i0));
                    acc1[c] = S::fma(acc1[c], v1, S::pick_at::<W>(w1[c], i1));
                }
            }
            g += 2;
        }
        if g < groups {
            for (c, w) in w0.iter_mut().enumerate() {
                *w = S::window::<W>(x.add(c * xcol + g * stride));
            }
            for j in 0..N {
                let e0 = (g * N + j) * l;
                let (v0, i0) = (S::load(vals.add(e0)), S::positions(pos.add(e0)));
                for c in 0..C {
                    acc0[c] = S::fma(acc0[c], v0, S::pick_at::<W>(w0[c], i0));
                }
            }
        }
        for c in 0..C {
            acc0[c] = S::add(acc0[c], acc1[c]);
        }
        acc0
    }
}

/// Stores panel `p`'s results for columns `col..col + C` into `y` (rows from `rows.start`, `n`
/// floats each), only the lanes of rows below `rows.end`.
///
/// # Safety
/// The ISA of `S` is available; panel `p` starts inside `rows`; `y` is writable for
/// `rows.len() · n` floats and `col + C ≤ n`; `C ≤ COLUMNS` and `LANES ≤ 16`.
#[inline(always)]
unsafe fn store_columns<S: Simd, const C: usize>(
    v: &[S::V; C],
    p: usize,
    rows: &Range<usize>,
    y: *mut f32,
    n: usize,
    col: usize,
) {
    let l = S::LANES;
    let (first, live) = (p * l, (rows.end - p * l).min(l));
    let mut t = [0.0f32; 16 * COLUMNS];
    // SAFETY: `t` holds C ≤ COLUMNS vectors of LANES ≤ 16 floats; rows first..first + live are
    // inside `rows` and columns col..col + C inside n (contract).
    unsafe {
        for (c, vc) in v.iter().enumerate() {
            S::store(t.as_mut_ptr().add(c * 16), *vc);
        }
        for i in 0..live {
            let row = y.add((first + i - rows.start) * n + col);
            for c in 0..C {
                *row.add(c) = t[c * 16 + i];
            }
        }
    }
}

/// Where a panel's products come from: `dots::<C>(p, col)` is panel `p`'s results for columns
/// `col..col + C`.
///
/// # Safety
/// Implementations read only inside their matrix's panels and their columns' x values for
/// panels of the rows and columns their constructor's contract covers.
unsafe trait PanelSource<S: PanelPick> {
    /// Panel `p`'s results for columns `col..col + C`.
    ///
    /// # Safety
    /// The ISA of `S` is available; `p` and the columns are inside what the source covers.
    unsafe fn dots<const C: usize>(&self, p: usize, col: usize) -> [S::V; C];
}

/// N:M or V:N:M panels: `N` slots per group, windows of `W` floats `stride` apart.
struct RowSource<const W: usize, const N: usize> {
    vals: *const f32,
    pos: *const u8,
    groups: usize,
    x: *const f32,
    stride: usize,
    xcol: usize,
}

// SAFETY: reads through `panel_dots`, whose contract the constructors' callers guarantee.
unsafe impl<S: PanelPick, const W: usize, const N: usize> PanelSource<S> for RowSource<W, N> {
    #[inline(always)]
    unsafe fn dots<const C: usize>(&self, p: usize, col: usize) -> [S::V; C] {
        let per = self.groups * N * S::LANES;
        // SAFETY: panel p's `per` entries lie inside the panels and columns col..col + C are
        // the caller's (trait contract).
        unsafe {
            panel_dots::<S, W, N, C>(
                self.vals.add(p * per),
                self.pos.add(p * per),
                self.groups,
                self.x.add(col * self.xcol),
                self.stride,
                self.xcol,
            )
        }
    }
}

/// CSR panels over x in windows, one windowed copy per column.
struct CsrSource<'a> {
    panels: &'a CsrPanels,
    x: *const f32,
    xcol: usize,
}

// SAFETY: slots, windows and positions come from the panels, whose windows lie inside each
// column's windowed x (the caller's contract).
unsafe impl<S: PanelPick> PanelSource<S> for CsrSource<'_> {
    #[inline(always)]
    unsafe fn dots<const C: usize>(&self, p: usize, col: usize) -> [S::V; C] {
        let l = S::LANES;
        let (starts, wins) = (self.panels.starts(), self.panels.windows().as_ptr());
        let (vals, pos) = (
            self.panels.values().as_ptr(),
            self.panels.positions().as_ptr(),
        );
        let x = self.x.wrapping_add(col * self.xcol);
        let (s0, end) = (starts[p] as usize, starts[p + 1] as usize);
        // SAFETY: slots s0..end are the panel's, inside windows, values and positions; each
        // window offset is that of a window of LANES floats inside every column's windowed x,
        // and positions are < LANES.
        unsafe {
            let (mut acc0, mut acc1) = ([S::zero(); C], [S::zero(); C]);
            let mut s = s0;
            while s + 2 <= end {
                let (v0, i0) = (S::load(vals.add(s * l)), S::positions(pos.add(s * l)));
                let (v1, i1) = (
                    S::load(vals.add((s + 1) * l)),
                    S::positions(pos.add((s + 1) * l)),
                );
                let (x0, x1) = (
                    x.add(*wins.add(s) as usize),
                    x.add(*wins.add(s + 1) as usize),
                );
                for c in 0..C {
                    let xc = c * self.xcol;
                    acc0[c] = S::fma(acc0[c], v0, S::pick_lanes_at(x0.add(xc), i0));
                    acc1[c] = S::fma(acc1[c], v1, S::pick_lanes_at(x1.add(xc), i1));
                }
                s += 2;
            }
            if s < end {
                let (v0, i0) = (S::load(vals.add(s * l)), S::positions(pos.add(s * l)));
                let x0 = x.add(*wins.add(s) as usize);
                for (c, acc) in acc0.iter_mut().enumerate() {
                    *acc = S::fma(*acc, v0, S::pick_lanes_at(x0.add(c * self.xcol), i0));
                }
            }
            for c in 0..C {
                acc0[c] = S::add(acc0[c], acc1[c]);
            }
            acc0
        }
    }
}

/// Columns `0..n` of the rows `rows` (whole panels from `rows.start`), [`COLUMNS`] at a time
/// and the remainder together, into `y` (row `rows.start` first, `n` floats per row).
///
/// # Safety
/// The ISA of `S` is available; `src` covers every panel of `rows` and columns `0..n`;
/// `rows.start` is a multiple of `LANES`; `y` is writable for `rows.len() · n` floats.
#[inline(always)]
unsafe fn run<S: PanelPick, P: PanelSource<S>>(src: &P, rows: Range<usize>, n: usize, y: *mut f32) {
    let l = S::LANES;
    // SAFETY: every panel and column range is inside what `src` covers and `y` holds (contract).
    unsafe {
        for p in rows.start / l..rows.end.div_ceil(l) {
            let mut col = 0;
            while col + COLUMNS <= n {
                let v = src.dots::<COLUMNS>(p, col);
                store_columns::<S, COLUMNS>(&v, p, &rows, y, n, col);
                col += COLUMNS;
            }
            match n - col {
                0 => {}
                1 => store_columns::<S, 1>(&src.dots::<1>(p, col), p, &rows, y, n, col),
                2 => store_columns::<S, 2>(&src.dots::<2>(p, col), p, &rows, y, n, col),
                _ => store_columns::<S, 3>(&src.dots::<3>(p, col), p, &rows, y, n, col),
            }
        }
    }
}

/// Rows `rows` times `n` columns through panels of `slots` slots per group whose positions lie
/// in each group's `m` columns (N:M's, or V:N:M's [`VnmMatrix::group_panels`]); `xt` holds each
/// column of B padded as the batch-1 kernel reads x (`groups · m + 16` floats: the column, then
/// zeros), `xcol` floats apart.
///
/// # Safety
/// The ISA of `S` is available; `panels` are built for `S::LANES` with `groups` groups of
/// `slots ≤ 4` slots and positions `< m ≤ 16`; `rows.start` is a multiple of `LANES` and
/// `rows.end` at most the matrix's rows; `xt` holds `n` columns of `xcol ≥ groups · m + 16`
/// floats; `y` is writable for `rows.len() · n` floats.
#[inline(always)]
pub(crate) unsafe fn gemm_group_panels<S: PanelPick>(
    panels: &RowPanels,
    (slots, m, groups): (usize, usize, usize),
    rows: Range<usize>,
    xt: &[f32],
    xcol: usize,
    n: usize,
    y: *mut f32,
) {
    debug_assert!(xcol >= groups * m + 16 && xt.len() >= n * xcol);
    let (vals, pos, x) = (
        panels.values().as_ptr(),
        panels.positions().as_ptr(),
        xt.as_ptr(),
    );
    macro_rules! go {
        ($w:literal, $n:literal) => {
            run::<S, _>(
                &RowSource::<$w, $n> {
                    vals,
                    pos,
                    groups,
                    x,
                    stride: m,
                    xcol,
                },
                rows,
                n,
                y,
            )
        };
        ($w:literal) => {
            match slots {
                1 => go!($w, 1),
                2 => go!($w, 2),
                3 => go!($w, 3),
                _ => go!($w, 4),
            }
        };
    }
    // SAFETY: positions are < m ≤ W; a window from g · m reads at most 16 floats, inside each
    // column's groups · m + 16; the rest is the contract.
    unsafe {
        match m {
            0..=4 => go!(4),
            5..=8 => go!(8),
            _ => go!(16),
        }
    }
}

/// V:N:M rows `rows` (whole V-blocks) times `n` columns through their panels (positions in the
/// 4 kept columns of each group); `xt` holds B's columns one after the other (`cols` floats
/// each), and `xs` is scratch of at least `4 · groups · n` floats.
///
/// # Safety
/// The ISA of `S` is available; `panels` are `a`'s for `S::LANES`; V is a multiple of `LANES`;
/// `rows` starts and ends on multiples of V; `xt` holds `a.cols() · n` floats; `y` is writable
/// for `rows.len() · n` floats.
#[inline(always)]
pub(crate) unsafe fn gemm_vnm_panels<S: PanelPick>(
    a: &VnmMatrix,
    panels: &RowPanels,
    rows: Range<usize>,
    xt: &[f32],
    n: usize,
    y: *mut f32,
    xs: &mut [f32],
) {
    let (v, groups) = (a.v(), a.groups());
    let xcol = 4 * groups;
    debug_assert!(xs.len() >= xcol * n && xt.len() >= a.cols() * n);
    let src = RowSource::<4, 2> {
        vals: panels.values().as_ptr(),
        pos: panels.positions().as_ptr(),
        groups,
        x: xs.as_ptr(),
        stride: 4,
        xcol,
    };
    for blk in rows.start / v..rows.end / v {
        gather_block_columns(a, blk, xt, n, xs);
        let block = blk * v..(blk + 1) * v;
        // SAFETY: the block's rows are inside `rows` and its start a multiple of LANES; its
        // panels' positions are < 4, and every column's windows of 4 from 4·g lie inside xs;
        // its rows of y lie inside y's (contract).
        unsafe {
            run::<S, _>(
                &src,
                block.clone(),
                n,
                y.add((block.start - rows.start) * n),
            )
        };
    }
}

/// Column `c`'s x values of V-block `blk`'s 4 kept columns per group into `xs[c · 4·groups..]`
/// (0 for a kept column past the matrix's last), from B's columns laid out one after the other
/// in `xt`.
fn gather_block_columns(a: &VnmMatrix, blk: usize, xt: &[f32], n: usize, xs: &mut [f32]) {
    let (m, groups, cols) = (a.m(), a.groups(), a.cols());
    let xcol = 4 * groups;
    if xcol == 0 || cols == 0 {
        return;
    }
    let loc = &a.column_loc()[blk * xcol..(blk + 1) * xcol];
    for (column, out) in xt.chunks_exact(cols).zip(xs.chunks_exact_mut(xcol)).take(n) {
        for (i, (o, &q)) in out.iter_mut().zip(loc).enumerate() {
            let k = (i / 4) * m + q as usize;
            *o = column.get(k).copied().unwrap_or(0.0);
        }
    }
}

/// CSR rows `rows` times `n` columns through their panels; `xw` holds each column of B in
/// windows ([`CsrPanels::window_x`]), `xcol` floats apart.
///
/// # Safety
/// The ISA of `S` is available; `panels` are the matrix's for `S::LANES`; `rows.start` is a
/// multiple of `LANES` and `rows.end` at most the matrix's rows; `xw` holds `n` windowed columns
/// of `xcol` floats; `y` is writable for `rows.len() · n` floats.
#[inline(always)]
pub(crate) unsafe fn gemm_csr_panels<S: PanelPick>(
    panels: &CsrPanels,
    rows: Range<usize>,
    xw: &[f32],
    xcol: usize,
    n: usize,
    y: *mut f32,
) {
    debug_assert!(xw.len() >= n * xcol);
    let src = CsrSource {
        panels,
        x: xw.as_ptr(),
        xcol,
    };
    // SAFETY: forwarded contract.
    unsafe { run::<S, _>(&src, rows, n, y) }
}
