//! How the columns of B are cut into tiles for the tile kernels: the columns they take
//! ([`tile_columns`]), the tile width that covers them ([`fitted_tile`]), the kernel of a
//! narrower last tile ([`rest_kernel`]) and B's tiles as the kernels read them ([`Panels`]).
//! The cost model asks the same questions (`cost::predicted_cost`).

use std::ops::Range;

use super::dispatch::{self, KernelFn};
use super::kernels::BTile;
use crate::Isa;

/// The columns of `n` that the tile kernels take on `isa`: all of them, but a rest of at
/// most a quarter vector past whole vectors, which `column_rest` computes (where a kernel for
/// that many columns runs the format; the cost model assumes it does).
pub(crate) fn tile_columns(isa: Isa, n: usize) -> usize {
    let (lanes, rest) = (isa.lanes(), n % isa.lanes());
    if n < lanes || rest == 0 || 4 * rest > lanes || isa == Isa::Scalar {
        n
    } else {
        n - rest
    }
}

/// The tile width that runs `width` columns with the point's `w`: no wider than the columns
/// (the point's tile was chosen for all n), the fewest instantiated vectors that still cover
/// them (5, 7, 9, 10 and 11 are not: 72 columns at AVX-512 take 6 vectors, one partial tile).
pub(crate) fn fitted_tile(isa: Isa, rows: usize, width: usize, w: usize) -> usize {
    let lanes = isa.lanes();
    let (need, have) = (width.div_ceil(lanes), w / lanes);
    if need >= have {
        return w;
    }
    let u = (need..have)
        .find(|&u| dispatch::select(isa, rows, u).is_some())
        .unwrap_or(have);
    u * lanes
}

/// The kernel that runs a last tile of `columns` (fewer than the tile's) on B in place at its
/// own width, with `rows` rows per step on `isa`, where there is one: its columns are whole
/// vectors and a kernel of that width is instantiated (see `spmm_with`; B unpacked).
pub(super) fn rest_kernel(isa: Isa, rows: usize, columns: usize) -> Option<KernelFn> {
    if columns == 0 || !columns.is_multiple_of(isa.lanes()) {
        return None;
    }
    dispatch::select(isa, rows, columns / isa.lanes())
}

/// Whether [`rest_kernel`] has a kernel for that tile (the cost model's question).
pub(crate) fn rest_in_place(isa: Isa, rows: usize, columns: usize) -> bool {
    rest_kernel(isa, rows, columns).is_some()
}

/// B laid out for the kernels: tile `t` covers columns `t·w .. t·w + w` of the first `width`
/// (B's rows are `stride` floats apart). The tiles from `packed_from` on are copied into
/// contiguous `cols × w` panels (a partial last tile zero-padded, so that every row has `w`
/// floats); the others are read in place: with packing, none; without, the full tiles, and a
/// partial last tile too where a kernel of its own width runs it (`rest_in_place`).
pub(super) struct Panels<'a> {
    b: &'a [f32],
    stride: usize,
    cols: usize,
    w: usize,
    packed: Vec<f32>,
    /// Offset of the first panel in `packed`.
    align: usize,
    /// The first tile in `packed` (tiles before it are read in place).
    first: usize,
}

impl<'a> Panels<'a> {
    /// The tiles `tiles` of B, those from `packed_from` on packed (the others are read in
    /// place; [`Self::tile`] takes the same indices).
    pub(super) fn new(
        b: &'a [f32],
        cols: usize,
        (stride, width): (usize, usize),
        w: usize,
        packed_from: usize,
        tiles: Range<usize>,
        pack: dispatch::PackFn,
    ) -> Self {
        let (lo, tiles) = (tiles.start, tiles.end);
        let first = packed_from.max(lo);
        // 16 spare floats so that the panels can start on a 64-byte line (vector loads that
        // straddle cache lines cost two accesses).
        let len = tiles.saturating_sub(first) * cols * w;
        let mut packed = vec![0.0f32; len + 16];
        let align = packed.as_ptr().align_offset(64).min(16);
        for t in first..tiles {
            let (c0, real) = (t * w, w.min(width - t * w));
            let at = align + (t - first) * cols * w;
            let panel = &mut packed[at..at + cols * w];
            if cols > 0 {
                // The last row's `real` floats exist on both sides (the rows before it lie
                // below them).
                assert!(
                    (cols - 1) * stride + c0 + real <= b.len()
                        && (cols - 1) * w + real <= panel.len()
                );
                // SAFETY: `pack` was selected for this process's ISA (or is scalar); rows
                // 0..cols of the tile hold `real` floats on each side (asserted just above),
                // and `packed` is a fresh buffer.
                unsafe { pack(b[c0..].as_ptr(), stride, panel.as_mut_ptr(), w, cols, real) };
            }
        }
        Panels {
            b,
            stride,
            cols,
            w,
            packed,
            align,
            first,
        }
    }

    pub(super) fn tile(&self, t: usize) -> BTile {
        let first_packed = self.first;
        if t >= first_packed {
            BTile {
                // `wrapping_add` keeps this safe; the offset is inside `packed` whenever it is read.
                ptr: self
                    .packed
                    .as_ptr()
                    .wrapping_add(self.align + (t - first_packed) * self.cols * self.w),
                stride: self.w,
            }
        } else {
            BTile {
                ptr: self.b.as_ptr().wrapping_add(t * self.w),
                stride: self.stride,
            }
        }
    }
}
