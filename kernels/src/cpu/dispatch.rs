//! Instantiates the micro-kernels per ISA (inside `#[target_feature]` functions) and per
//! `(rows, vectors per tile)`, and selects one as a function pointer.

use std::ops::Range;

use super::kernels::{self, BTile, CTile, Step};
use super::panel_layout::{self, Format, Layout};
use super::simd::{Scalar, Simd};
use crate::format::{CsrPanels, RowPanels};
use crate::{Isa, SparseMatrix};

/// A kernel over one N tile for a range of rows.
///
/// # Safety
/// The [`BTile`] / [`CTile`] contracts of `cpu::kernels`, the ISA of the selected function is
/// available, and for V:N:M and vector-wise `rows` is aligned to V.
pub(crate) type KernelFn = unsafe fn(&SparseMatrix, Range<usize>, &mut Step, BTile, CTile);

/// Runs the right format kernel; dense matrices never reach here.
#[inline(always)]
unsafe fn body<S: Simd, const R: usize, const U: usize>(
    a: &SparseMatrix,
    rows: Range<usize>,
    step: &mut Step,
    b: BTile,
    c: CTile,
) {
    // SAFETY: forwarded contract of `KernelFn`.
    unsafe {
        match a {
            SparseMatrix::Csr(x) => kernels::csr::<S, R, U>(x, rows, step, b, c),
            SparseMatrix::Nm(x) => kernels::nm::<S, R, U>(x, rows, step, b, c),
            SparseMatrix::Vnm(x) => kernels::vnm::<S, R, U>(x, rows, step, b, c),
            SparseMatrix::Vector(x) => kernels::vector::<S, R, U>(x, rows, step, b, c),
            SparseMatrix::Dense(_) => {}
        }
    }
}

unsafe fn run_scalar<const R: usize, const U: usize>(
    a: &SparseMatrix,
    rows: Range<usize>,
    step: &mut Step,
    b: BTile,
    c: CTile,
) {
    // SAFETY: forwarded contract; scalar code needs no CPU feature.
    unsafe { body::<Scalar, R, U>(a, rows, step, b, c) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2<const R: usize, const U: usize>(
    a: &SparseMatrix,
    rows: Range<usize>,
    step: &mut Step,
    b: BTile,
    c: CTile,
) {
    // SAFETY: forwarded contract; selected only when AVX2 and FMA were detected.
    unsafe { body::<super::simd::Avx2, R, U>(a, rows, step, b, c) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run_avx512<const R: usize, const U: usize>(
    a: &SparseMatrix,
    rows: Range<usize>,
    step: &mut Step,
    b: BTile,
    c: CTile,
) {
    // SAFETY: forwarded contract; selected only when AVX-512F and FMA were detected.
    unsafe { body::<super::simd::Avx512, R, U>(a, rows, step, b, c) }
}

/// A batch-1 kernel (`kernels::gemv_*`) over a range of rows (whole V-blocks for V:N:M).
///
/// # Safety
/// As the `kernels::gemv_*` function of the matrix's format, which [`gemv_applies`] accepted,
/// and the ISA of the selected function is available.
pub(crate) type GemvFn = unsafe fn(&SparseMatrix, Range<usize>, *const f32, *mut f32, &mut [f32]);

/// Whether a batch-1 kernel along K runs `a` on `isa` ([`panel_layout::gemv_applies`]).
pub(crate) fn gemv_applies(a: &SparseMatrix, isa: Isa) -> bool {
    panel_layout::gemv_applies(Format::of(a), isa)
}

#[inline(always)]
unsafe fn gemv_body<S: kernels::Gemv>(
    a: &SparseMatrix,
    rows: Range<usize>,
    x: *const f32,
    y: *mut f32,
    xs: &mut [f32],
) {
    // SAFETY: forwarded contract of `GemvFn`.
    unsafe {
        match a {
            SparseMatrix::Vnm(m) => kernels::gemv_vnm::<S>(m, rows, x, y, xs),
            SparseMatrix::Csr(m) => kernels::gemv_csr::<S>(m, rows, x, y),
            SparseMatrix::Nm(m) => kernels::gemv_nm::<S>(m, rows, x, y),
            SparseMatrix::Vector(m) => kernels::gemv_vector::<S>(m, rows, x, y),
            SparseMatrix::Dense(_) => {}
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemv_avx2(
    a: &SparseMatrix,
    rows: Range<usize>,
    x: *const f32,
    y: *mut f32,
    xs: &mut [f32],
) {
    // SAFETY: forwarded contract; selected only when AVX2 and FMA were detected.
    unsafe { gemv_body::<super::simd::Avx2>(a, rows, x, y, xs) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn gemv_avx512(
    a: &SparseMatrix,
    rows: Range<usize>,
    x: *const f32,
    y: *mut f32,
    xs: &mut [f32],
) {
    // SAFETY: forwarded contract; selected only when AVX-512F and FMA were detected.
    unsafe { gemv_body::<super::simd::Avx512>(a, rows, x, y, xs) }
}

/// Copies `width` floats from each of `rows` rows of `src` (`src_stride` apart) into the rows
/// of `dst` (`dst_stride` apart): B's partial tiles into their panels.
///
/// # Safety
/// The rows are readable and writable for `width` floats each, and do not overlap.
pub(crate) type PackFn = unsafe fn(*const f32, usize, *mut f32, usize, usize, usize);

#[inline(always)]
unsafe fn pack_body<S: Simd>(
    src: *const f32,
    src_stride: usize,
    dst: *mut f32,
    dst_stride: usize,
    rows: usize,
    width: usize,
) {
    let (l, full) = (S::LANES, width - width % S::LANES);
    // SAFETY: forwarded contract of `PackFn`; every access is below `width` in its row.
    unsafe {
        for k in 0..rows {
            let (s, d) = (src.add(k * src_stride), dst.add(k * dst_stride));
            for i in (0..full).step_by(l) {
                S::store(d.add(i), S::load(s.add(i)));
            }
            if full < width {
                let v = S::load_partial(s.add(full), width - full);
                S::store_partial(d.add(full), v, width - full);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pack_avx2(src: *const f32, ss: usize, dst: *mut f32, ds: usize, rows: usize, w: usize) {
    // SAFETY: forwarded contract of `PackFn`; selected only when AVX2 was detected.
    unsafe { pack_body::<super::simd::Avx2>(src, ss, dst, ds, rows, w) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn pack_avx512(src: *const f32, ss: usize, dst: *mut f32, ds: usize, rows: usize, w: usize) {
    // SAFETY: forwarded contract of `PackFn`; selected only when AVX-512F was detected.
    unsafe { pack_body::<super::simd::Avx512>(src, ss, dst, ds, rows, w) }
}

unsafe fn pack_scalar(src: *const f32, ss: usize, dst: *mut f32, ds: usize, rows: usize, w: usize) {
    // SAFETY: forwarded contract of `PackFn`.
    unsafe {
        for k in 0..rows {
            std::ptr::copy_nonoverlapping(src.add(k * ss), dst.add(k * ds), w);
        }
    }
}

/// The packing of B's tiles at `isa`'s width: a `memcpy` call per row of a 17-column tile was
/// ~10 % of a 64×64×17 product on Zen 4.
pub(crate) fn select_pack(isa: Isa) -> PackFn {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => pack_avx512 as PackFn,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => pack_avx2 as PackFn,
        _ => pack_scalar as PackFn,
    }
}

/// The batch-1 kernels for `isa`; none for scalar code.
pub(crate) fn select_gemv(isa: Isa) -> Option<GemvFn> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => Some(gemv_avx512 as GemvFn),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => Some(gemv_avx2 as GemvFn),
        _ => None,
    }
}

/// A matrix's batch-1 panels, of whichever layout its format has.
#[derive(Clone, Copy)]
pub(crate) enum GemvPanels<'a> {
    /// N:M and V:N:M (positions in V:N:M's 4 kept columns per group).
    Rows(&'a RowPanels),
    /// V:N:M with positions in each group's M columns (`VnmMatrix::group_panels`).
    Groups(&'a RowPanels),
    /// CSR.
    Csr(&'a CsrPanels),
}

impl GemvPanels<'_> {
    /// Rows per panel.
    pub(crate) fn lanes(&self) -> usize {
        match self {
            GemvPanels::Rows(p) | GemvPanels::Groups(p) => p.lanes(),
            GemvPanels::Csr(p) => p.lanes(),
        }
    }
}

/// A batch-1 kernel over panels (`kernels::gemv_*_panels`): `(a, a's panels, rows, x, y,
/// scratch)`, where the scratch holds x then zeros (`groups · m + 16` floats) for N:M and
/// V:N:M's group panels, `4 · groups` floats for V:N:M's gathered panels, and x in windows for
/// CSR (`CsrPanels::window_x`).
///
/// # Safety
/// As the `kernels::gemv_*_panels` function of the matrix's format, with panels from
/// [`panels`] for the same ISA, whose function this is.
pub(crate) type PanelGemvFn =
    unsafe fn(&SparseMatrix, GemvPanels<'_>, Range<usize>, *const f32, *mut f32, &mut [f32]);

/// `a`'s panels for the batch-1 kernels, where a panel kernel runs it on `isa`, in the layout
/// of [`panel_layout::batch_one_layout`].
pub(crate) fn panels(a: &SparseMatrix, isa: Isa) -> Option<GemvPanels<'_>> {
    laid_out(
        a,
        panel_layout::batch_one_layout(Format::of(a), isa)?,
        isa.lanes(),
    )
}

/// `a`'s panels of `layout`, `None` where the layout is not of `a`'s format.
fn laid_out(a: &SparseMatrix, layout: Layout, lanes: usize) -> Option<GemvPanels<'_>> {
    match (layout, a) {
        (Layout::NmRows, SparseMatrix::Nm(x)) => x.row_panels(lanes).map(GemvPanels::Rows),
        (Layout::VnmGroups, SparseMatrix::Vnm(x)) => x.group_panels(lanes).map(GemvPanels::Groups),
        (Layout::VnmRows, SparseMatrix::Vnm(x)) => x.row_panels(lanes).map(GemvPanels::Rows),
        (Layout::Csr, SparseMatrix::Csr(x)) => x.csr_panels(lanes).map(GemvPanels::Csr),
        _ => None,
    }
}

#[inline(always)]
unsafe fn gemv_panels_body<S: kernels::PanelPick>(
    a: &SparseMatrix,
    panels: GemvPanels<'_>,
    rows: Range<usize>,
    x: *const f32,
    y: *mut f32,
    scratch: &mut [f32],
) {
    // SAFETY: forwarded contract of `PanelGemvFn`.
    unsafe {
        match (a, panels) {
            (SparseMatrix::Nm(m), GemvPanels::Rows(p)) => {
                kernels::gemv_group_panels::<S>(p, (m.n(), m.m(), m.groups()), rows, scratch, y)
            }
            (SparseMatrix::Vnm(m), GemvPanels::Groups(p)) => {
                kernels::gemv_group_panels::<S>(p, (2, m.m(), m.groups()), rows, scratch, y)
            }
            (SparseMatrix::Vnm(m), GemvPanels::Rows(p)) => {
                kernels::gemv_vnm_panels::<S>(m, p, rows, x, y, scratch)
            }
            (SparseMatrix::Csr(_), GemvPanels::Csr(p)) => {
                kernels::gemv_csr_panels::<S>(p, rows, scratch, y)
            }
            _ => {}
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemv_panels_avx2(
    a: &SparseMatrix,
    panels: GemvPanels<'_>,
    rows: Range<usize>,
    x: *const f32,
    y: *mut f32,
    scratch: &mut [f32],
) {
    // SAFETY: forwarded contract of `PanelGemvFn`; selected only when AVX2 and FMA were
    // detected.
    unsafe { gemv_panels_body::<super::simd::Avx2>(a, panels, rows, x, y, scratch) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn gemv_panels_avx512(
    a: &SparseMatrix,
    panels: GemvPanels<'_>,
    rows: Range<usize>,
    x: *const f32,
    y: *mut f32,
    scratch: &mut [f32],
) {
    // SAFETY: forwarded contract of `PanelGemvFn`; selected only when AVX-512F, AVX2 and FMA
    // were detected.
    unsafe { gemv_panels_body::<super::simd::Avx512>(a, panels, rows, x, y, scratch) }
}

/// The panel kernels for `isa` (see [`panels`]).
pub(crate) fn select_gemv_panels(isa: Isa) -> Option<PanelGemvFn> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => Some(gemv_panels_avx512 as PanelGemvFn),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => Some(gemv_panels_avx2 as PanelGemvFn),
        _ => None,
    }
}

/// A few-column kernel over panels (`kernels::gemm_*_panels`): `(a, a's panels, rows, n, x
/// prepared, y, scratch)`. The prepared x holds each of B's `n` columns as the batch-1 kernel
/// reads x, `x.len() / n` floats apart: padded (N:M, V:N:M's group panels), in windows (CSR),
/// or as they are (V:N:M's gathered panels, which gather per V-block into the scratch, `4 ·
/// groups · n` floats).
///
/// # Safety
/// As the `kernels::gemm_*_panels` function of the matrix's format, with panels from
/// [`few_column_panels`] for the same ISA, whose function this is.
pub(crate) type PanelGemmFn =
    unsafe fn(&SparseMatrix, GemvPanels<'_>, Range<usize>, usize, &[f32], *mut f32, &mut [f32]);

/// `a`'s panels for the few-column kernels, in the layout of
/// [`panel_layout::few_column_layout`].
pub(crate) fn few_column_panels(a: &SparseMatrix, isa: Isa) -> Option<GemvPanels<'_>> {
    laid_out(
        a,
        panel_layout::few_column_layout(Format::of(a), isa)?,
        isa.lanes(),
    )
}

#[inline(always)]
unsafe fn gemm_panels_body<S: kernels::PanelPick>(
    a: &SparseMatrix,
    panels: GemvPanels<'_>,
    rows: Range<usize>,
    n: usize,
    x: &[f32],
    y: *mut f32,
    scratch: &mut [f32],
) {
    let xcol = x.len() / n.max(1);
    // SAFETY: forwarded contract of `PanelGemmFn`.
    unsafe {
        match (a, panels) {
            (SparseMatrix::Nm(m), GemvPanels::Rows(p)) => {
                let shape = (m.n(), m.m(), m.groups());
                kernels::gemm_group_panels::<S>(p, shape, rows, x, xcol, n, y)
            }
            (SparseMatrix::Vnm(m), GemvPanels::Groups(p)) => {
                let shape = (2, m.m(), m.groups());
                kernels::gemm_group_panels::<S>(p, shape, rows, x, xcol, n, y)
            }
            (SparseMatrix::Vnm(m), GemvPanels::Rows(p)) => {
                kernels::gemm_vnm_panels::<S>(m, p, rows, x, n, y, scratch)
            }
            (SparseMatrix::Csr(_), GemvPanels::Csr(p)) => {
                kernels::gemm_csr_panels::<S>(p, rows, x, xcol, n, y)
            }
            _ => {}
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemm_panels_avx2(
    a: &SparseMatrix,
    panels: GemvPanels<'_>,
    rows: Range<usize>,
    n: usize,
    x: &[f32],
    y: *mut f32,
    scratch: &mut [f32],
) {
    // SAFETY: forwarded contract of `PanelGemmFn`; selected only when AVX2 and FMA were
    // detected.
    unsafe { gemm_panels_body::<super::simd::Avx2>(a, panels, rows, n, x, y, scratch) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn gemm_panels_avx512(
    a: &SparseMatrix,
    panels: GemvPanels<'_>,
    rows: Range<usize>,
    n: usize,
    x: &[f32],
    y: *mut f32,
    scratch: &mut [f32],
) {
    // SAFETY: forwarded contract of `PanelGemmFn`; selected only when AVX-512F, AVX2 and FMA
    // were detected.
    unsafe { gemm_panels_body::<super::simd::Avx512>(a, panels, rows, n, x, y, scratch) }
}

/// The few-column panel kernels for `isa` (see [`panels`]).
pub(crate) fn select_gemm_panels(isa: Isa) -> Option<PanelGemmFn> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => Some(gemm_panels_avx512 as PanelGemmFn),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => Some(gemm_panels_avx2 as PanelGemmFn),
        _ => None,
    }
}

/// Every `(rows, vectors)` pair with at most 24 accumulators (the AVX-512 budget).
macro_rules! table {
    ($f:ident, $r:expr, $u:expr) => {
        match ($r, $u) {
            (1, 1) => Some($f::<1, 1> as KernelFn),
            (1, 2) => Some($f::<1, 2> as KernelFn),
            (1, 3) => Some($f::<1, 3> as KernelFn),
            (1, 4) => Some($f::<1, 4> as KernelFn),
            (1, 6) => Some($f::<1, 6> as KernelFn),
            (1, 8) => Some($f::<1, 8> as KernelFn),
            (1, 12) => Some($f::<1, 12> as KernelFn),
            (2, 1) => Some($f::<2, 1> as KernelFn),
            (2, 2) => Some($f::<2, 2> as KernelFn),
            (2, 3) => Some($f::<2, 3> as KernelFn),
            (2, 4) => Some($f::<2, 4> as KernelFn),
            (2, 6) => Some($f::<2, 6> as KernelFn),
            (2, 8) => Some($f::<2, 8> as KernelFn),
            (2, 12) => Some($f::<2, 12> as KernelFn),
            (3, 1) => Some($f::<3, 1> as KernelFn),
            (3, 2) => Some($f::<3, 2> as KernelFn),
            (3, 3) => Some($f::<3, 3> as KernelFn),
            (3, 4) => Some($f::<3, 4> as KernelFn),
            (3, 6) => Some($f::<3, 6> as KernelFn),
            (3, 8) => Some($f::<3, 8> as KernelFn),
            (4, 1) => Some($f::<4, 1> as KernelFn),
            (4, 2) => Some($f::<4, 2> as KernelFn),
            (4, 3) => Some($f::<4, 3> as KernelFn),
            (4, 4) => Some($f::<4, 4> as KernelFn),
            (4, 6) => Some($f::<4, 6> as KernelFn),
            (6, 1) => Some($f::<6, 1> as KernelFn),
            (6, 2) => Some($f::<6, 2> as KernelFn),
            (6, 3) => Some($f::<6, 3> as KernelFn),
            (6, 4) => Some($f::<6, 4> as KernelFn),
            (8, 1) => Some($f::<8, 1> as KernelFn),
            (8, 2) => Some($f::<8, 2> as KernelFn),
            (8, 3) => Some($f::<8, 3> as KernelFn),
            _ => None,
        }
    };
}

/// The kernel for `isa`, `rows` together and `vectors` vectors per tile, if instantiated.
pub(crate) fn select(isa: Isa, rows: usize, vectors: usize) -> Option<KernelFn> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => table!(run_avx512, rows, vectors),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => table!(run_avx2, rows, vectors),
        _ => table!(run_scalar, rows, vectors),
    }
}
