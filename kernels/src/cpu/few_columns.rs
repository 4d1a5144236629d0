//! A few columns (`2 ≤ n ≤` [`MAX_COLUMNS`]): the batch-1 panel kernels over several columns of
//! B at once (`kernels::gemm_*_panels`), split over threads by rows like batch 1.
//!
//! The tile kernels vectorise along N, so a product of a few columns wastes lanes: at a ViT's
//! 17 tokens a 16-lane vector holds 16 columns and the 17th takes a second, mostly empty
//! vector (2:4 read 0.64–0.97× of dense at 192×192×17 and 192×768×17 on Zen 4), and below 16
//! columns the scalar kernels ran. The panel kernels put a row in every lane whatever n is.

use super::batch_one::{panel_parts, split, with_scratch};
use super::dispatch::{self, GemvPanels};
use super::panel_layout::Format;
use super::transpose::transpose;
use super::Epilogue;
use crate::{Isa, PatternKind, SparseMatrix};

/// The most columns that may take the panel kernels (see [`takes_panels`]).
pub(crate) const MAX_COLUMNS: usize = 32;

/// `c = a · b` for `n` columns, then the epilogue, on `threads` threads; `false` (nothing
/// done) where no panel kernel runs `a` on `isa` or the tile kernels are the better choice for
/// `n` ([`takes_panels`]). Shapes are checked by the caller.
pub(super) fn run(
    a: &SparseMatrix,
    b: &[f32],
    n: usize,
    c: &mut [f32],
    threads: usize,
    epilogue: &Epilogue,
    isa: Isa,
) -> bool {
    if !takes_panels(Format::of(a), n, isa.lanes()) {
        return false;
    }
    let (Some(gemm), Some(panels)) = (
        dispatch::select_gemm_panels(isa),
        dispatch::few_column_panels(a, isa),
    ) else {
        return false;
    };
    let parts = panel_parts(a, panels, threads);
    // V:N:M's gathered panels gather per V-block, into the scratch after x.
    let groups = match (a, panels) {
        (SparseMatrix::Vnm(v), GemvPanels::Rows(_)) => v.groups(),
        _ => 0,
    };
    // Each thread lays out x for itself: one copy written by the calling thread and read by
    // the other core took 2 threads from 1.9× to 1.2× over dense (2:8 at 192×768×17, Zen 4).
    let part = |range: std::ops::Range<usize>, y: &mut [f32]| {
        with_scratch(|scratch| {
            prepare_columns(a, panels, b, n, scratch);
            let at = scratch.len();
            scratch.resize(at + 4 * groups * n, 0.0);
            let (x, xs) = scratch.split_at_mut(at);
            // SAFETY: `gemm` and `panels` were selected for this process's ISA; `x` holds B's
            // n columns as the kernel reads them (`prepare_columns`, from `b`'s `cols · n`
            // floats, checked by the caller), `xs` is sized for V:N:M's gathers, `y` holds the
            // range's rows of n floats, and the parts start on whole panels (and V-blocks).
            unsafe { gemm(a, panels, range, n, x, y.as_mut_ptr(), xs) }
        })
    };
    split(&parts, c, n, threads, &part, epilogue);
    true
}

/// Whether a product of `n` columns takes the panel kernels: below a vector's `lanes` columns
/// always (the tile kernels would run scalar code), and N:M and V:N:M with M ≤ 8 up to one and
/// a half vectors (24 columns at 16 lanes, 12 at 8). Else the tile kernels run, with a rest of
/// a few columns past whole vectors handed back here (`column_rest`).
///
/// Measured on Zen 4 at 192×768 (AVX-512 and AVX2, `kernels/examples/few_columns.rs`, one
/// thread, against dense at the same n): with M ≤ 8 the tile kernels are weak at one or two
/// vectors (at 16 columns 2:4 0.7–0.8×, 2:8 1.1–1.6× of dense; 1.0× and 1.8× on panels), and
/// the panels win up to 24 columns (at 17, 2:4 1.1×, 2:8 and 64:2:8 2.0×, against 0.6–0.7×,
/// 1.0–1.2×, 1.5–1.7× for 16 columns on tiles and one on the matrix-vector kernel); at 32 the
/// tiles win. For M = 16 the
/// tiles win from 16 columns (64:2:16 at 17: 2.2–2.5× on panels, 2.7–3.1× split), and CSR
/// ties.
pub(super) fn takes_panels(f: Format, n: usize, lanes: usize) -> bool {
    if !(2..=max_columns()).contains(&n) {
        return false;
    }
    let m = match f.kind {
        PatternKind::Nm | PatternKind::Vnm => f.m,
        _ => usize::MAX,
    };
    n < lanes || (m <= 8 && 2 * n <= 3 * lanes)
}

/// The most columns that take the panel kernels (`COTUNE_PANEL_COLUMNS` overrides it, for
/// measuring where the tile kernels take over: 1 sends every product of 2 or more columns to
/// them).
pub(crate) fn max_columns() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("COTUNE_PANEL_COLUMNS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(MAX_COLUMNS)
    })
}

/// B's `n` columns into `out` as the panel kernels read x, one after the other (`len / n` floats
/// apart):
/// for N:M and V:N:M's group panels each column then zeros, `groups · m + 16` floats; for
/// V:N:M's gathered panels each column as it is (the kernel gathers per V-block); for CSR
/// each column in windows.
fn prepare_columns(
    a: &SparseMatrix,
    panels: GemvPanels<'_>,
    b: &[f32],
    n: usize,
    out: &mut Vec<f32>,
) {
    let cols = a.cols();
    let (groups, m) = match a {
        SparseMatrix::Nm(x) => (x.groups(), x.m()),
        SparseMatrix::Vnm(x) => (x.groups(), x.m()),
        _ => (0, 0),
    };
    out.clear();
    match (a, panels) {
        (SparseMatrix::Nm(_), _) | (_, GemvPanels::Groups(_)) => {
            let xcol = groups * m + 16;
            out.resize(xcol * n, 0.0);
            transpose(b, n, cols, out, xcol);
        }
        (_, GemvPanels::Rows(_)) => {
            out.resize(cols * n, 0.0);
            transpose(b, n, cols, out, cols);
        }
        (_, GemvPanels::Csr(p)) => {
            let mut columns = vec![0.0f32; cols * n];
            transpose(b, n, cols, &mut columns, cols);
            let mut windowed = vec![];
            for column in columns.chunks_exact(cols.max(1)).take(n) {
                p.window_x(column, &mut windowed);
                out.extend_from_slice(&windowed);
            }
        }
    }
}
