//! The CPU SpMM micro-kernels, written once against [`Simd`] and instantiated per ISA, rows
//! together (`R`) and vectors per N tile (`U`) by `cpu::dispatch`.
//!
//! Each call computes, for one N tile and one chunk of K (a [`Step`]), `C[rows, tile] (+)=
//! A[rows, kchunk] · B[kchunk, tile]`, keeping an `R × U` block of accumulators in registers and
//! touching C once per row and chunk. Chunking K keeps the B rows a chunk touches in L1 while
//! every row block of the thread streams through them. V:N:M instead chunks inside its kernel,
//! per V-block, over a panel of the block's gathered columns (see `vnm`). Each format's kernel
//! has its own file: editing one re-tunes only that format's tunings (`crate::family`). B is read through a
//! [`BTile`] whose every
//! row has `U · LANES` readable floats (the caller pads a partial last tile, or runs it with a
//! kernel of its own width where that reads B in place), so there is no tail loop over N.

mod csr;
mod gemm_panels;
mod gemv;
mod gemv_panels;
mod gemv_vector;
mod nm;
mod vector;
mod vnm;

pub(crate) use csr::csr;
pub(crate) use gemm_panels::{gemm_csr_panels, gemm_group_panels, gemm_vnm_panels};
pub(crate) use gemv::{gemv_csr, gemv_nm, gemv_vnm, Gemv};
pub(crate) use gemv_panels::{gemv_csr_panels, gemv_group_panels, gemv_vnm_panels, PanelPick};
pub(crate) use gemv_vector::gemv_vector;
pub(crate) use nm::nm;
pub(crate) use vector::vector;
pub(crate) use vnm::{direct_enabled, gathers_nothing, pairs_enabled, vnm};

use std::ops::Range;

use super::activation::{activate, Activation};
use super::simd::Simd;

/// The widest tile a kernel instantiates: 12 vectors of 16 lanes (AVX-512); the partial-tile
/// buffers of [`load_row`] and [`store_row`] hold this many floats.
pub(crate) const MAX_TILE: usize = 192;

/// A tile of B: row `k` starts at `ptr + k · stride`, with the tile's full width readable.
#[derive(Clone, Copy)]
pub(crate) struct BTile {
    pub(crate) ptr: *const f32,
    pub(crate) stride: usize,
}

/// A tile of C: local row `i` starts at `ptr + i · stride`; `width` columns are real. When the
/// step is a product's last, local row `i` gets `bias[i]` (if `bias` is not null) and then
/// the activation in registers as it is stored: the layer's epilogue fused into the kernel.
#[derive(Clone, Copy)]
pub(crate) struct CTile {
    pub(crate) ptr: *mut f32,
    pub(crate) stride: usize,
    pub(crate) width: usize,
    /// The bias of local row 0 (then one per row), or null.
    pub(crate) bias: *const f32,
    pub(crate) activation: Activation,
}

impl CTile {
    /// The same tile with nothing applied on store (for a step that is not the last).
    pub(crate) fn plain(self) -> CTile {
        CTile {
            bias: std::ptr::null(),
            activation: Activation::None,
            ..self
        }
    }
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
/// `src` is valid for `min(width, U · LANES)` reads (`U · LANES ≤ MAX_TILE`, checked when the
/// kernel is instantiated).
#[inline(always)]
pub(super) unsafe fn load_row<S: Simd, const U: usize>(
    first: bool,
    src: *const f32,
    width: usize,
) -> [S::V; U] {
    const { assert!(U * S::LANES <= MAX_TILE) };
    // SAFETY: full tiles read U·LANES floats from `src`; partial ones read `width` floats, the
    // last vector through a masked load (a `memcpy` into a stack buffer was a library call per
    // row: ~45 % of a 64×64×17 product on Zen 4).
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
            for (u, a) in acc.iter_mut().enumerate() {
                let at = u * S::LANES;
                if width >= at + S::LANES {
                    *a = S::load(src.add(at));
                } else if width > at {
                    *a = S::load_partial(src.add(at), width - at);
                }
            }
        }
        acc
    }
}

/// Stores local row `local` of the tile's accumulators, only the first `width` floats when the
/// tile is partial, after the tile's bias and activation (per element `v + bias`, then the
/// activation's lane-wise operations, as `Epilogue` applies them after the product, so the
/// results are bit-identical).
///
/// # Safety
/// Row `local` of `c` is valid for `min(width, U · LANES)` writes (`U · LANES ≤ MAX_TILE`,
/// checked when the kernel is instantiated), and `c.bias`, when not null, for reading
/// `bias[local]`.
#[inline(always)]
pub(super) unsafe fn store_row<S: Simd, const U: usize>(acc: &[S::V; U], c: CTile, local: usize) {
    const { assert!(U * S::LANES <= MAX_TILE) };
    // SAFETY: per the contract, full tiles write U·LANES floats into the row; partial tiles
    // write `width`, the last vector through a masked store.
    unsafe {
        let mut out = *acc;
        if !c.bias.is_null() {
            let b = S::splat(*c.bias.add(local));
            for x in out.iter_mut() {
                *x = S::add(*x, b);
            }
        }
        // Loops, not `for_each` with closures: a closure is compiled without the kernel's
        // target features unless inlined, and GELU's is too large to be.
        if c.activation != Activation::None {
            for x in out.iter_mut() {
                *x = activate::<S>(*x, c.activation);
            }
        }
        let (dst, width) = (c.ptr.add(local * c.stride), c.width);
        if width >= U * S::LANES {
            for (u, &a) in out.iter().enumerate() {
                S::store(dst.add(u * S::LANES), a);
            }
        } else {
            for (u, &a) in out.iter().enumerate() {
                let at = u * S::LANES;
                if width >= at + S::LANES {
                    S::store(dst.add(at), a);
                } else if width > at {
                    S::store_partial(dst.add(at), a, width - at);
                }
            }
        }
    }
}

/// `acc[u] += a · row[u]` for the `U` vectors of a B row.
///
/// # Safety
/// `row` is readable for `U · LANES` floats.
#[inline(always)]
pub(super) unsafe fn axpy<S: Simd, const U: usize>(acc: &mut [S::V; U], a: f32, row: *const f32) {
    // SAFETY: forwarded contract.
    unsafe { fma_row::<S, U>(acc, S::splat(a), row) }
}

/// `acc[u] += av · row[u]` with `av` already splat.
///
/// # Safety
/// `row` is readable for `U · LANES` floats.
#[inline(always)]
pub(super) unsafe fn fma_row<S: Simd, const U: usize>(
    acc: &mut [S::V; U],
    av: S::V,
    row: *const f32,
) {
    // SAFETY: the caller guarantees the row is readable for U·LANES floats.
    unsafe {
        for (u, x) in acc.iter_mut().enumerate() {
            *x = S::fma(*x, av, S::load(row.add(u * S::LANES)));
        }
    }
}
