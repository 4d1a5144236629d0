//! Kernel parameter spaces as data: each kernel declares its tunable parameters, their allowed
//! values and the constraints between them, so that the kernel-tune stage can enumerate, sample
//! and rank points without knowing the kernel.
//!
//! CPU SpMM parameters (see [`cpu_space`]):
//! - `threads`: worker threads, `1..=cores`.
//! - `tile_n`: width of the N tile in floats (a multiple of the ISA's lanes); a tile of B is kept
//!   hot in L2 while every row block streams through it.
//! - `rows`: rows processed together (register blocking; `rows × tile_n / lanes` accumulators
//!   give that many independent FMA chains, which must cover the FMA latency × throughput). For
//!   V:N:M and vector-wise a row block never straddles two V-blocks: the rest of a block goes
//!   row by row. CSR rows advance in lock step over their common length, then alone.
//! - `k_chunk`: columns of A (rows of B) per step of the K loop, 0 = all; rounded up to whole
//!   groups for N:M and V:N:M. A chunk's B rows stay in L1 while the thread's rows stream
//!   through them; C is re-read once per row and chunk.
//! - `pack_b`: 1 copies B into contiguous tile-major panels first, 0 reads B in place.
//! - constraint: `rows · tile_n / lanes ≤` the accumulator registers of the ISA.
//!
//! Dense baseline (see [`dense_space`]): `backend` 0 = faer, 1 = gemm (x86-v4); `threads`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::isa::available_cores;
use crate::{isa, FormatSignature, KernelError, PatternKind};

/// Checks `p` against the space `build` makes for `(sig, n)`, keeping every space this thread
/// has checked against: building one costs ~0.6 µs on Zen 3, as much as a whole batch-1
/// product of a small layer, and a product checks its point on every call.
pub(crate) fn check_point(
    sig: FormatSignature,
    n: usize,
    build: impl FnOnce() -> KernelSpace,
    p: &ParamPoint,
) -> Result<(), KernelError> {
    use std::cell::RefCell;
    use std::collections::HashMap;
    thread_local! {
        static SPACES: RefCell<HashMap<(FormatSignature, usize), KernelSpace>> =
            RefCell::new(HashMap::new());
        /// The points accepted on this thread, a model's layers' worth: a layer called again
        /// with its tuned point skips the lookup (~10 % of a 64×64×17 product on Zen 4). Only
        /// the last one would miss on every call of a pass, whose layers alternate.
        static ACCEPTED: RefCell<Vec<(FormatSignature, usize, ParamPoint)>> =
            const { RefCell::new(Vec::new()) };
    }
    let seen = ACCEPTED.with(|seen| {
        seen.borrow()
            .iter()
            .any(|(s, m, q)| *s == sig && *m == n && q == p)
    });
    if seen {
        return Ok(());
    }
    SPACES.with(|cache| {
        let mut cache = cache.borrow_mut();
        // A run meets a few shapes; a long-lived process sweeping many starts over.
        if cache.len() >= 1024 {
            cache.clear();
        }
        cache.entry((sig, n)).or_insert_with(build).contains(p)
    })?;
    ACCEPTED.with(|seen| {
        let mut seen = seen.borrow_mut();
        // A tuning sweeps many points; keep the search short.
        if seen.len() >= 64 {
            seen.clear();
        }
        seen.push((sig, n, p.clone()));
    });
    Ok(())
}

/// A point of a kernel space: parameter name → value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
pub struct ParamPoint(pub BTreeMap<String, i64>);

impl ParamPoint {
    /// A point from `(name, value)` pairs.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, i64)>) -> Self {
        ParamPoint(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// The value of `name`, or [`KernelError::MissingParam`].
    pub fn get(&self, name: &str) -> Result<i64, KernelError> {
        self.0
            .get(name)
            .copied()
            .ok_or_else(|| KernelError::MissingParam {
                name: name.to_string(),
            })
    }

    /// The value of `name` as a count (parameters of these spaces are never negative).
    pub(crate) fn count(&self, name: &str) -> Result<usize, KernelError> {
        let v = self.get(name)?;
        usize::try_from(v).map_err(|_| KernelError::ParamConstraint {
            name: name.to_string(),
            value: v,
            reason: "must not be negative".to_string(),
        })
    }
}

/// One tunable parameter and its allowed values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParamDef {
    /// Parameter name.
    pub name: &'static str,
    /// Allowed values, ascending.
    pub values: Vec<i64>,
}

/// A constraint between parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Constraint {
    /// `a · b / divisor ≤ max` (e.g. rows × tile vectors ≤ registers); reported against `b`.
    ProductAtMost {
        /// First factor.
        a: &'static str,
        /// Second factor.
        b: &'static str,
        /// Divides the product (e.g. lanes per vector).
        divisor: i64,
        /// Upper bound.
        max: i64,
    },
    /// `part` divides `whole` into at most `max_parts` pieces (e.g. warp tiles of a thread
    /// block's rows); reported against `part`.
    DividesAtMost {
        /// The piece (e.g. `wm`).
        part: &'static str,
        /// What it divides (e.g. `bm`).
        whole: &'static str,
        /// Most pieces allowed.
        max_parts: i64,
    },
    /// The point is a configuration the named kernel accepts: its own checks, where they do
    /// not reduce to the forms above (e.g. the shared memory a Hopper pipeline needs).
    KernelAccepts {
        /// The kernel, e.g. `cuda-vnm-wgmma`.
        kernel: &'static str,
    },
}

/// A kernel's parameter space: parameters with allowed values, and the constraints a point must
/// satisfy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelSpace {
    /// Which kernel family this space belongs to (e.g. `cpu-vnm`, `dense`).
    pub kernel: &'static str,
    params: Vec<ParamDef>,
    constraints: Vec<Constraint>,
}

impl KernelSpace {
    /// A space from parameter definitions and constraints.
    pub fn new(kernel: &'static str, params: Vec<ParamDef>, constraints: Vec<Constraint>) -> Self {
        KernelSpace {
            kernel,
            params,
            constraints,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &[ParamDef] {
        &self.params
    }

    /// The constraints.
    pub fn constraints(&self) -> &[Constraint] {
        &self.constraints
    }

    /// Checks a point: every parameter present with an allowed value, no unknown parameter, all
    /// constraints hold. The error names the parameter at fault.
    pub fn contains(&self, p: &ParamPoint) -> Result<(), KernelError> {
        for name in p.0.keys() {
            if !self.params.iter().any(|d| d.name == name) {
                return Err(KernelError::UnknownParam { name: name.clone() });
            }
        }
        for d in &self.params {
            let v = p.get(d.name)?;
            if !d.values.contains(&v) {
                return Err(KernelError::ParamValue {
                    name: d.name.to_string(),
                    value: v,
                    allowed: d.values.clone(),
                });
            }
        }
        for c in &self.constraints {
            match *c {
                Constraint::ProductAtMost { a, b, divisor, max } => {
                    let (va, vb) = (p.get(a)?, p.get(b)?);
                    if va * vb / divisor > max {
                        return Err(KernelError::ParamConstraint {
                            name: b.to_string(),
                            value: vb,
                            reason: format!("{a} x {b} / {divisor} must be at most {max}"),
                        });
                    }
                }
                Constraint::DividesAtMost {
                    part,
                    whole,
                    max_parts,
                } => {
                    let (vp, vw) = (p.get(part)?, p.get(whole)?);
                    if vp <= 0 || vw % vp != 0 || vw / vp > max_parts {
                        return Err(KernelError::ParamConstraint {
                            name: part.to_string(),
                            value: vp,
                            reason: format!(
                                "{part} must divide {whole} = {vw} into at most {max_parts} parts"
                            ),
                        });
                    }
                }
                Constraint::KernelAccepts { kernel } => crate::cuda::kernel_accepts(kernel, p)?,
            }
        }
        Ok(())
    }

    /// Every valid point, in lexicographic order of the parameter values.
    pub fn points(&self) -> Vec<ParamPoint> {
        let mut out = vec![ParamPoint::default()];
        for d in &self.params {
            out = out
                .into_iter()
                .flat_map(|p| {
                    d.values.iter().map(move |&v| {
                        let mut q = p.clone();
                        q.0.insert(d.name.to_string(), v);
                        q
                    })
                })
                .collect();
        }
        out.retain(|p| self.contains(p).is_ok());
        out
    }
}

fn threads_def() -> ParamDef {
    ParamDef {
        name: "threads",
        values: (1..=available_cores() as i64).collect(),
    }
}

/// Tile widths for `n` columns: lanes × {1, 2, 3, 4, 6, 8, 12}, dropping widths that exceed `n`
/// rounded up to the lanes (the narrowest is always offered).
fn tile_values(n: usize, lanes: usize) -> Vec<i64> {
    let cap = n.div_ceil(lanes).max(1) * lanes;
    let all = [1, 2, 3, 4, 6, 8, 12].map(|u| (u * lanes) as i64);
    all.into_iter()
        .enumerate()
        .filter(|&(i, w)| i == 0 || w as usize <= cap)
        .map(|(_, w)| w)
        .collect()
}

/// K chunk lengths: 0 (all of K) and the powers of two from 64 to 1024 below `cols`.
fn k_chunk_values(cols: usize) -> Vec<i64> {
    let mut v = vec![0];
    v.extend(
        [64, 128, 256, 512, 1024]
            .into_iter()
            .filter(|&k| k < cols)
            .map(|k| k as i64),
    );
    v
}

/// Rows processed together: {1, 2, 3, 4, 6, 8}, at most `v` when `v > 0` (a V-block's rows are
/// taken in chunks of this many, the rest one by one).
fn rows_values(v: usize) -> Vec<i64> {
    [1, 2, 3, 4, 6, 8]
        .into_iter()
        .filter(|&r| v == 0 || r <= v)
        .map(|r| r as i64)
        .collect()
}

/// Accumulator registers the kernels may use (the rest hold B and broadcasts).
pub(crate) fn accumulator_budget(isa: crate::Isa) -> i64 {
    match isa {
        crate::Isa::Avx512 => 24,
        crate::Isa::Avx2 => 12,
        crate::Isa::Scalar => 16,
    }
}

/// The CPU SpMM space for a matrix of signature `sig` times a B of `n` columns, for this
/// process's ISA. Dense signatures get [`dense_space`].
pub fn cpu_space(sig: &FormatSignature, n: usize) -> KernelSpace {
    let lanes = isa().lanes();
    let tile = ParamDef {
        name: "tile_n",
        values: tile_values(n, lanes),
    };
    let pack = ParamDef {
        name: "pack_b",
        values: vec![0, 1],
    };
    let k_chunk = ParamDef {
        name: "k_chunk",
        values: k_chunk_values(sig.cols),
    };
    let regs = Constraint::ProductAtMost {
        a: "rows",
        b: "tile_n",
        divisor: lanes as i64,
        max: accumulator_budget(isa()),
    };
    let rows = |v| ParamDef {
        name: "rows",
        values: rows_values(v),
    };
    match sig.kind {
        PatternKind::Dense => dense_space(sig.rows, sig.cols, n),
        PatternKind::Unstructured => KernelSpace::new(
            "cpu-csr",
            vec![k_chunk, pack, rows(0), threads_def(), tile],
            vec![regs],
        ),
        PatternKind::Nm => KernelSpace::new(
            "cpu-nm",
            vec![k_chunk, pack, rows(0), threads_def(), tile],
            vec![regs],
        ),
        PatternKind::Vnm => KernelSpace::new(
            "cpu-vnm",
            vec![k_chunk, pack, rows(sig.v), threads_def(), tile],
            vec![regs],
        ),
        PatternKind::Vector => KernelSpace::new(
            "cpu-vector",
            vec![k_chunk, pack, rows(sig.v), threads_def(), tile],
            vec![regs],
        ),
    }
}

/// The parameters of `p` that [`crate::spmm`] reads for a matrix of signature `sig` times `n`
/// columns on this process's ISA: only `threads` where the product runs on the batch-1 or
/// few-column kernels (`cpu::panel_layout::path`), which take none of the tile parameters;
/// all of `p` on the tile kernels and for dense. Points with equal effective points run the
/// same code, so a tuning needs to measure only one of them: at batch 1 the 48-odd points of a
/// 2-core space are 2 kernels.
pub fn effective_point(sig: &FormatSignature, n: usize, p: &ParamPoint) -> ParamPoint {
    if crate::cpu::panel_layout::signature_path(sig, n, isa()).is_none() {
        return p.clone();
    }
    ParamPoint(
        p.0.iter()
            .filter(|(k, _)| k.as_str() == "threads")
            .map(|(k, &v)| (k.clone(), v))
            .collect(),
    )
}

/// The dense baseline's space: `backend` (0 = faer, 1 = gemm with x86-v4) and `threads`.
pub fn dense_space(_rows: usize, _cols: usize, _n: usize) -> KernelSpace {
    KernelSpace::new(
        "dense",
        vec![
            ParamDef {
                name: "backend",
                values: vec![0, 1],
            },
            threads_def(),
        ],
        vec![],
    )
}
