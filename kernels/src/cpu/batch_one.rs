//! Batch 1 (`n = 1`): the matrix-vector kernels, split over threads by rows. Across rows over
//! the matrix's panels where they apply (`kernels::gemv_*_panels`), else along K
//! (`kernels::gemv_*`).
//!
//! At the layer sizes of small models a whole product takes 1–5 µs, so the fixed cost of a call
//! matters as much as the kernel: one part runs on the calling thread without the split, and
//! the scratch (x padded, windowed or gathered per V-block) is a per-thread buffer reused
//! across calls.

use std::cell::RefCell;
use std::ops::Range;

use super::dispatch::{self, GemvPanels};
use super::{partition, split_rows, Epilogue};
use crate::{Isa, SparseMatrix};

thread_local! {
    /// The batch-1 kernels' scratch on this thread, grown as needed.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// `c = a · b` for one column `b`, then the epilogue, on `threads` threads; `false` (nothing
/// done) where no batch-1 kernel runs `a` on `isa`. Shapes are checked by the caller.
pub(super) fn run(
    a: &SparseMatrix,
    b: &[f32],
    c: &mut [f32],
    threads: usize,
    epilogue: &Epilogue,
    isa: Isa,
) -> bool {
    if let (Some(gemv), Some(panels)) =
        (dispatch::select_gemv_panels(isa), dispatch::panels(a, isa))
    {
        let parts = panel_parts(a, panels, threads);
        let part = |range: Range<usize>, y: &mut [f32]| {
            with_scratch(|scratch| {
                match (a, panels) {
                    (SparseMatrix::Nm(x), _) => pad_x(b, x.groups() * x.m(), scratch),
                    (SparseMatrix::Vnm(x), GemvPanels::Groups(_)) => {
                        pad_x(b, x.groups() * x.m(), scratch)
                    }
                    (SparseMatrix::Vnm(x), _) => scratch.resize(4 * x.groups(), 0.0),
                    (_, GemvPanels::Csr(p)) => p.window_x(b, scratch),
                    _ => {}
                }
                // SAFETY: `gemv` and `panels` were selected for this process's ISA; `b` holds
                // `cols` floats (n = 1, checked by the caller), the scratch is sized as the
                // kernels need, `y` holds the range's rows, and the parts start on multiples of
                // the lanes (and of V for V:N:M's gathered panels).
                unsafe { gemv(a, panels, range, b.as_ptr(), y.as_mut_ptr(), scratch) }
            })
        };
        split(&parts, c, 1, threads, &part, epilogue);
        return true;
    }
    if let Some(gemv) = dispatch::select_gemv(isa).filter(|_| dispatch::gemv_applies(a, isa)) {
        let (unit, groups) = match a {
            SparseMatrix::Vnm(x) => (x.v(), x.groups()),
            SparseMatrix::Vector(x) => (x.v(), 0),
            _ => (1, 0),
        };
        let parts = match a {
            SparseMatrix::Csr(x) => partition(x.rows(), 1, threads, |u| x.row_ptr()[u] as usize),
            _ => partition(a.rows(), unit, threads, |u| u),
        };
        let part = |range: Range<usize>, y: &mut [f32]| {
            with_scratch(|xs| {
                xs.resize(4 * groups, 0.0);
                // SAFETY: `gemv` was selected for this process's ISA and accepted this matrix;
                // `b` holds `cols` floats (n = 1, checked by the caller), `y` the range's rows,
                // and the parts are aligned to V.
                unsafe { gemv(a, range, b.as_ptr(), y.as_mut_ptr(), xs) }
            })
        };
        split(&parts, c, 1, threads, &part, epilogue);
        return true;
    }
    false
}

/// x then zeros in `scratch` (emptied first), `spans + 16` floats: every window of up to 16
/// floats from a group's first column (`spans` = groups · M) is inside it.
fn pad_x(x: &[f32], spans: usize, scratch: &mut Vec<f32>) {
    scratch.clear();
    scratch.extend_from_slice(x);
    scratch.resize(spans + 16, 0.0);
}

/// `a`'s rows split over `threads` for its panel kernels: parts start on whole panels (whole
/// V-blocks for V:N:M's gathered panels), balanced by stored values for CSR, and the rows past
/// the last whole panel go with the last part.
pub(super) fn panel_parts(
    a: &SparseMatrix,
    panels: GemvPanels<'_>,
    threads: usize,
) -> Vec<Range<usize>> {
    let mut parts = match (a, panels) {
        (SparseMatrix::Vnm(x), GemvPanels::Rows(_)) => partition(a.rows(), x.v(), threads, |u| u),
        (_, GemvPanels::Csr(p)) => {
            partition(a.rows(), p.lanes(), threads, |u| p.starts()[u] as usize)
        }
        _ => partition(a.rows(), panels.lanes(), threads, |u| u),
    };
    match parts.last_mut() {
        Some(last) => last.end = a.rows(),
        None if a.rows() > 0 => parts.push(0..a.rows()),
        None => {}
    }
    parts
}

/// Runs `part` on each of `parts` (rows of `c`, `row` floats each) and the epilogue after it: on
/// this thread when there is one part, else through [`split_rows`].
pub(super) fn split(
    parts: &[Range<usize>],
    c: &mut [f32],
    row: usize,
    threads: usize,
    part: &(dyn Fn(Range<usize>, &mut [f32]) + Sync),
    epilogue: &Epilogue,
) {
    match parts {
        [one] => {
            let y = &mut c[one.start * row..one.end * row];
            part(one.clone(), y);
            epilogue.apply(one.start, y, row);
        }
        _ => split_rows(parts, row, c, threads, part, epilogue),
    }
}

/// `f` on this thread's scratch, emptied first (a call that finds it borrowed, which a
/// re-entrant caller would, gets a fresh buffer).
pub(super) fn with_scratch<R>(f: impl FnOnce(&mut Vec<f32>) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => {
            buf.clear();
            f(&mut buf)
        }
        Err(_) => f(&mut Vec::new()),
    })
}
