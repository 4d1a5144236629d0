//! Sizes a run can hold. Each is checked where the file gives it, so that an absurd value (a
//! width near 2⁶⁴, a batch of 10⁹) is an error at its place, exit 2, instead of an allocation
//! that overflows (a panic) or fails (an abort with a backtrace) in the middle of the run.

use std::ops::Range;

use super::error::{ExperimentError, SourceMap};
use super::validate::check;

/// The widest layer a model may declare: hidden widths, channels, `d_model`, `d_ff`.
pub const WIDTH_MAX: u64 = 1 << 16;
/// The largest batch: `batch_sizes`, `batch_tokens` and the training `batch_size`.
pub const BATCH_MAX: u64 = 1 << 20;
/// The most values one matrix of a run may hold (2³⁰, 4 GiB of f32): a layer's weights, and its
/// inputs and outputs at the largest batch.
pub const ELEMENTS_MAX: u64 = 1 << 30;
/// The largest `[kernel_tune] budget` (configurations measured per tuning).
pub const BUDGET_MAX: u64 = 1 << 20;
/// The most encoder blocks of a transformer.
pub const LAYERS_MAX: u64 = 1 << 10;

/// `x ≤ max`, else an error at `span` naming `what`.
pub(super) fn at_most(
    x: u64,
    max: u64,
    what: &str,
    map: &SourceMap,
    span: Range<usize>,
) -> Result<(), ExperimentError> {
    check(x <= max, map, span, || {
        format!("{what} = {x} is more than {max}, the most a run can hold")
    })
}

/// `rows × cols ≤ ELEMENTS_MAX`, else an error at `span` naming the matrix.
pub(super) fn matrix(
    (rows, cols): (u64, u64),
    what: impl FnOnce() -> String,
    map: &SourceMap,
    span: Range<usize>,
) -> Result<(), ExperimentError> {
    check(rows.saturating_mul(cols) <= ELEMENTS_MAX, map, span, || {
        format!(
            "{} would hold {rows} × {cols} values, more than {ELEMENTS_MAX} (4 GiB of f32) in one matrix",
            what()
        )
    })
}
