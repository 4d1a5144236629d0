//! Sparsity patterns (the accuracy search space's structures) and the format signature that
//! kernel tuning is keyed on: the structure and shape of a matrix, never its weights.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::KernelError;

/// A sparsity pattern. See DESIGN.md, "Sparse formats".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Pattern {
    /// No sparsity.
    Dense,
    /// Any positions; `sparsity` is the fraction of zeros, chosen per layer (global top-k).
    Unstructured {
        /// Fraction of weights removed, in [0, 1] (1: a layer pruned to nothing, as a layer's
        /// measured sparsity can be).
        sparsity: f64,
    },
    /// Each row keeps `n` of every `m` consecutive columns.
    Nm {
        /// Kept per group, 1 ≤ n < m.
        n: usize,
        /// Group width.
        m: usize,
    },
    /// VENOM V:N:M with N = 2: rows in blocks of `v`; each `v`×`m` block keeps 4 columns shared by
    /// its rows, and each row keeps 2 of those 4.
    Vnm {
        /// Rows per block (must divide the matrix rows).
        v: usize,
        /// Group width, 4 ≤ m ≤ 256.
        m: usize,
    },
    /// Vector-wise V×1 (CLASP): whole column-vectors of `v` rows kept or dropped.
    Vector {
        /// Rows per column-vector (must divide the matrix rows).
        v: usize,
        /// Fraction of column-vectors removed, in [0, 1].
        sparsity: f64,
    },
}

keytag::tagged_enum! {
    /// The pattern family, without parameters; its tags are what experiment files, keys and
    /// result columns spell.
    pub enum PatternKind {
        /// [`Pattern::Dense`].
        Dense = "dense",
        /// [`Pattern::Unstructured`], stored as CSR.
        Unstructured = "unstructured",
        /// [`Pattern::Nm`].
        Nm = "nm",
        /// [`Pattern::Vnm`].
        Vnm = "vnm",
        /// [`Pattern::Vector`].
        Vector = "vector",
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Dense => write!(f, "dense"),
            Pattern::Unstructured { sparsity } => write!(f, "unstructured({sparsity})"),
            Pattern::Nm { n, m } => write!(f, "{n}:{m}"),
            Pattern::Vnm { v, m } => write!(f, "{v}:2:{m}"),
            Pattern::Vector { v, sparsity } => write!(f, "vector({v}x1, {sparsity})"),
        }
    }
}

impl Pattern {
    /// The pattern family.
    pub fn kind(&self) -> PatternKind {
        match self {
            Pattern::Dense => PatternKind::Dense,
            Pattern::Unstructured { .. } => PatternKind::Unstructured,
            Pattern::Nm { .. } => PatternKind::Nm,
            Pattern::Vnm { .. } => PatternKind::Vnm,
            Pattern::Vector { .. } => PatternKind::Vector,
        }
    }

    /// Nominal fraction of removed weights: the given sparsity of unstructured and vector-wise
    /// patterns (exactly as given), 1 − N/M of N:M and V:N:M, 0 for dense.
    pub fn sparsity(&self) -> f64 {
        match *self {
            Pattern::Dense => 0.0,
            Pattern::Unstructured { sparsity } | Pattern::Vector { sparsity, .. } => sparsity,
            Pattern::Nm { n, m } => 1.0 - n as f64 / m as f64,
            Pattern::Vnm { m, .. } => 1.0 - 2.0 / m as f64,
        }
    }

    /// Nominal fraction of kept weights (1 − sparsity).
    pub fn density(&self) -> f64 {
        match *self {
            Pattern::Dense => 1.0,
            Pattern::Unstructured { sparsity } | Pattern::Vector { sparsity, .. } => 1.0 - sparsity,
            Pattern::Nm { n, m } => n as f64 / m as f64,
            Pattern::Vnm { m, .. } => 2.0 / m as f64,
        }
    }

    /// Checks the pattern's own parameters.
    pub fn validate(&self) -> Result<(), KernelError> {
        let bad = |reason: &str| {
            Err(KernelError::InvalidPattern {
                pattern: self.to_string(),
                reason: reason.to_string(),
            })
        };
        match *self {
            Pattern::Dense => Ok(()),
            Pattern::Unstructured { sparsity } | Pattern::Vector { sparsity, .. }
                if !(0.0..=1.0).contains(&sparsity) =>
            {
                bad("sparsity must be in [0, 1]")
            }
            Pattern::Vector { v: 0, .. } | Pattern::Vnm { v: 0, .. } => bad("V must be at least 1"),
            Pattern::Unstructured { .. } | Pattern::Vector { .. } => Ok(()),
            Pattern::Nm { n, m } if n == 0 || n >= m => bad("N:M needs 1 <= N < M"),
            Pattern::Nm { m, .. } if m > 256 => bad("M must be at most 256"),
            Pattern::Nm { .. } => Ok(()),
            Pattern::Vnm { m, .. } if !(4..=256).contains(&m) => {
                bad("V:2:M needs 4 <= M <= 256 (4 columns are kept per block)")
            }
            Pattern::Vnm { .. } => Ok(()),
        }
    }

    /// Checks that the pattern applies to a `rows`×`cols` matrix: V must divide `rows`.
    /// K not a multiple of M is allowed (the last group is partial, see [`crate::build_mask`]).
    pub fn validate_for(&self, rows: usize, cols: usize) -> Result<(), KernelError> {
        self.validate()?;
        match *self {
            Pattern::Vnm { v, .. } | Pattern::Vector { v, .. } if !rows.is_multiple_of(v) => {
                Err(KernelError::PatternShape {
                    pattern: self.to_string(),
                    rows,
                    cols,
                    reason: format!("V = {v} does not divide the {rows} rows"),
                })
            }
            _ => Ok(()),
        }
    }
}

/// What kernel tuning is keyed on: pattern family and parameters, shape, and density (parts
/// per million of kept weights, which matters for CSR and vector-wise speed). Not the weights.
///
/// Fields that do not apply to a pattern are 0 (`n`, `m` for unstructured; `v` for N:M).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FormatSignature {
    /// Pattern family.
    pub kind: PatternKind,
    /// N of N:M (2 for V:N:M).
    pub n: usize,
    /// M of N:M and V:N:M.
    pub m: usize,
    /// V of V:N:M and vector-wise.
    pub v: usize,
    /// Matrix rows.
    pub rows: usize,
    /// Matrix columns (K).
    pub cols: usize,
    /// Kept weights per million, rounded.
    pub density_ppm: u32,
}

impl FormatSignature {
    /// The signature a matrix of `pattern` and this shape will have, from the pattern's nominal
    /// density. Errors if the pattern does not fit the shape.
    pub fn for_pattern(pattern: &Pattern, rows: usize, cols: usize) -> Result<Self, KernelError> {
        pattern.validate_for(rows, cols)?;
        let (n, m, v) = match *pattern {
            Pattern::Dense | Pattern::Unstructured { .. } => (0, 0, 0),
            Pattern::Nm { n, m } => (n, m, 0),
            Pattern::Vnm { v, m } => (2, m, v),
            Pattern::Vector { v, .. } => (0, 0, v),
        };
        Ok(FormatSignature {
            kind: pattern.kind(),
            n,
            m,
            v,
            rows,
            cols,
            density_ppm: ppm(pattern.density()),
        })
    }

    /// The pattern this signature describes (density from `density_ppm`).
    pub fn pattern(&self) -> Pattern {
        let sparsity = 1.0 - self.density();
        match self.kind {
            PatternKind::Dense => Pattern::Dense,
            PatternKind::Unstructured => Pattern::Unstructured { sparsity },
            PatternKind::Nm => Pattern::Nm {
                n: self.n,
                m: self.m,
            },
            PatternKind::Vnm => Pattern::Vnm {
                v: self.v,
                m: self.m,
            },
            PatternKind::Vector => Pattern::Vector {
                v: self.v,
                sparsity,
            },
        }
    }

    /// Fraction of kept weights.
    pub fn density(&self) -> f64 {
        f64::from(self.density_ppm) / 1e6
    }
}

/// Rounds a density to parts per million.
pub(crate) fn ppm(density: f64) -> u32 {
    (density.clamp(0.0, 1.0) * 1e6).round() as u32
}
