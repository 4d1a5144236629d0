//! The crate's one error type. Every variant carries the shape, parameter or value at fault so
//! that callers can report it without extra context.

use thiserror::Error;

/// Errors returned by formats, mask builders, parameter spaces and kernels.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum KernelError {
    /// A buffer's length does not match the shape it was given with.
    #[error("{what}: expected {expected} elements, got {got}")]
    LengthMismatch {
        /// Which buffer.
        what: &'static str,
        /// Length implied by the shape.
        expected: usize,
        /// Length received.
        got: usize,
    },
    /// The pattern's own parameters are impossible (e.g. N ≥ M, sparsity outside [0, 1]).
    #[error("invalid pattern {pattern}: {reason}")]
    InvalidPattern {
        /// The pattern, as displayed.
        pattern: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The pattern cannot be applied to a matrix of this shape (e.g. V does not divide rows).
    #[error("pattern {pattern} does not fit a {rows}x{cols} matrix: {reason}")]
    PatternShape {
        /// The pattern, as displayed.
        pattern: String,
        /// Matrix rows.
        rows: usize,
        /// Matrix columns.
        cols: usize,
        /// Why it does not fit.
        reason: String,
    },
    /// A format's invariant is violated (checked constructors, `from_masked`).
    #[error("invalid {format} matrix: {reason}")]
    InvalidFormat {
        /// The format's name.
        format: &'static str,
        /// The invariant that failed, with the location.
        reason: String,
    },
    /// A parameter point lacks a parameter the space requires.
    #[error("parameter `{name}` is missing from the point")]
    MissingParam {
        /// The parameter's name.
        name: String,
    },
    /// A parameter point names a parameter the space does not have.
    #[error("parameter `{name}` is not part of this kernel space")]
    UnknownParam {
        /// The parameter's name.
        name: String,
    },
    /// A parameter has a value outside its allowed list.
    #[error("parameter `{name}` = {value} is not one of {allowed:?}")]
    ParamValue {
        /// The parameter's name.
        name: String,
        /// The value given.
        value: i64,
        /// The allowed values.
        allowed: Vec<i64>,
    },
    /// The combination of values breaks a constraint between parameters.
    #[error("parameter `{name}` = {value} is invalid here: {reason}")]
    ParamConstraint {
        /// The parameter the constraint is reported against.
        name: String,
        /// Its value.
        value: i64,
        /// The constraint that failed.
        reason: String,
    },
    /// A backend failed: the thread pool, a dense library, the CUDA device.
    #[error("kernel backend error: {0}")]
    Backend(String),
}

impl KernelError {
    /// Shorthand for [`KernelError::InvalidFormat`].
    pub(crate) fn format(format: &'static str, reason: impl Into<String>) -> Self {
        KernelError::InvalidFormat {
            format,
            reason: reason.into(),
        }
    }

    /// Checks a buffer length.
    pub(crate) fn check_len(what: &'static str, expected: usize, got: usize) -> Result<(), Self> {
        if expected == got {
            Ok(())
        } else {
            Err(KernelError::LengthMismatch {
                what,
                expected,
                got,
            })
        }
    }
}
