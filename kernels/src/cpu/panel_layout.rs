//! Which matrix-vector or panel kernel a product of a few columns runs on, decided on the
//! format alone (its family, N, M and V), so that the dispatch ([`super::batch_one`],
//! [`super::few_columns`]) and the cost model (`crate::cost`) read one rule.
//!
//! One exception the rule cannot see: a matrix builds its panels once, for the lanes of the
//! first ISA that asks (the process's, `crate::isa`), and a later call on another ISA finds
//! none and runs the kernels along K instead. Only tests switch ISAs within a process.

use super::dispatch;
use super::few_columns::takes_panels;
use crate::{FormatSignature, Isa, PatternKind, SparseMatrix};

/// A sparse format as these rules see it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Format {
    pub(crate) kind: PatternKind,
    /// N of N:M (2 for V:N:M).
    pub(crate) n: usize,
    /// M of N:M and V:N:M.
    pub(crate) m: usize,
    /// V of V:N:M and vector-wise.
    pub(crate) v: usize,
}

impl Format {
    pub(crate) fn of(a: &SparseMatrix) -> Format {
        Format::of_signature(&super::space_signature(a))
    }

    pub(crate) fn of_signature(sig: &FormatSignature) -> Format {
        Format {
            kind: sig.kind,
            n: sig.n,
            m: sig.m,
            v: sig.v,
        }
    }
}

/// A layout of panels of `lanes` rows (`format::panels`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// N:M's rows (`NmMatrix::row_panels`).
    NmRows,
    /// V:N:M with positions in each group's M columns (`VnmMatrix::group_panels`): x read where
    /// it lies.
    VnmGroups,
    /// V:N:M with positions in a V-block's 4 kept columns (`VnmMatrix::row_panels`): each
    /// V-block's columns of x gathered first.
    VnmRows,
    /// CSR (`CsrMatrix::csr_panels`).
    Csr,
}

/// The layout of the batch-1 panel kernels on `isa` (AVX2 or AVX-512, panels of its lanes):
/// N:M with N ≤ 4 and M ≤ 16; V:N:M through its group panels for M ≤ 8, and for 8 < M ≤ 16 up
/// to V = 64, else with V a multiple of the lanes through its gathered panels; and CSR.
/// Measured (`spmm-bench --full --shapes 256x256x1,3072x768x1,768x3072x1`, AMD Zen 4, AVX-512,
/// kernels/BENCH.md 2026-12-06): the gather's 4 scalar copies per group and block cost most at
/// small V (3072×768 16:2:8 1.73× → 3.23× of dense with the group panels, 64:2:8 2.53× →
/// 3.21×, 16:2:16 3.36× → 6.08×); at 768×3072 the gathered panels won at 128:2:16 (5.3–5.5×
/// against 4.7–4.9×) and tied at 64.
pub(crate) fn batch_one_layout(f: Format, isa: Isa) -> Option<Layout> {
    if !matches!(isa, Isa::Avx2 | Isa::Avx512) {
        return None;
    }
    match f.kind {
        PatternKind::Nm if f.n <= 4 && f.m <= 16 => Some(Layout::NmRows),
        PatternKind::Vnm if f.m <= 8 || (f.m <= 16 && f.v <= 64) => Some(Layout::VnmGroups),
        PatternKind::Vnm if f.v.is_multiple_of(isa.lanes()) => Some(Layout::VnmRows),
        PatternKind::Unstructured => Some(Layout::Csr),
        _ => None,
    }
}

/// The layout of the few-column kernels: V:N:M's group panels for M ≤ 8, so that no V-block
/// gathers its columns per call (64:2:8 at 192×768, Zen 4, one thread: 1.3× faster at 2
/// columns, 1.1× at 8, the same at 17); for larger M the gathered panels where V is a multiple
/// of the lanes (at M = 16 the gathered columns won: 4.2–4.7× over dense against 3.4–3.5× at 17
/// columns, as a column's x no longer fits L1 beside the panel); the other formats those of
/// [`batch_one_layout`].
pub(crate) fn few_column_layout(f: Format, isa: Isa) -> Option<Layout> {
    let simd = matches!(isa, Isa::Avx2 | Isa::Avx512);
    match f.kind {
        PatternKind::Vnm if f.m <= 8 && simd => Some(Layout::VnmGroups),
        PatternKind::Vnm if f.v.is_multiple_of(isa.lanes()) && simd => Some(Layout::VnmRows),
        PatternKind::Vnm => None,
        _ => batch_one_layout(f, isa),
    }
}

/// Whether a batch-1 kernel along K (`kernels::gemv_*`) runs the format on `isa`: V:N:M and
/// CSR always, N:M where N divides the lanes, vector-wise where the lanes divide V; never on
/// scalar code (the tile kernels run there) nor for dense.
pub(crate) fn gemv_applies(f: Format, isa: Isa) -> bool {
    isa != Isa::Scalar
        && match f.kind {
            PatternKind::Vnm | PatternKind::Unstructured => true,
            PatternKind::Nm => isa.lanes().is_multiple_of(f.n),
            PatternKind::Vector => f.v.is_multiple_of(isa.lanes()),
            PatternKind::Dense => false,
        }
}

/// The kernels a product of `n` columns runs on, where they are not the tile kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// The batch-1 (`n = 1`) or few-column panel kernels, over panels of this layout.
    Panels(Layout),
    /// The batch-1 kernels along K.
    Gemv,
}

/// [`path`] for a matrix of signature `sig`: the cost model's and the calibration's view.
pub(crate) fn signature_path(sig: &FormatSignature, n: usize, isa: Isa) -> Option<Path> {
    path(Format::of_signature(sig), n, isa)
}

/// The path of a product of `n` columns on `isa`, as [`super::spmm`] takes it; `None` for the
/// tile kernels (`cpu::kernels`).
pub(crate) fn path(f: Format, n: usize, isa: Isa) -> Option<Path> {
    if n == 1 {
        if dispatch::select_gemv_panels(isa).is_some() {
            if let Some(layout) = batch_one_layout(f, isa) {
                return Some(Path::Panels(layout));
            }
        }
        return (dispatch::select_gemv(isa).is_some() && gemv_applies(f, isa))
            .then_some(Path::Gemv);
    }
    if !takes_panels(f, n, isa.lanes()) || dispatch::select_gemm_panels(isa).is_none() {
        return None;
    }
    few_column_layout(f, isa).map(Path::Panels)
}

#[cfg(test)]
mod tests {
    use super::super::dispatch::GemvPanels;
    use super::super::{batch_one, few_columns, Epilogue};
    use super::*;
    use crate::{random_values, synthetic, Pattern};

    /// On the batch-1 and few-column kernels the points of a space that share a thread count
    /// are one kernel ([`crate::effective_point`] keeps only `threads`); on the tile kernels and
    /// for dense every point is its own.
    #[test]
    fn effective_points_keep_only_the_thread_count_where_the_panels_run() {
        let isa = crate::isa();
        let cases = [
            (Pattern::Nm { n: 2, m: 8 }, 1),
            (Pattern::Nm { n: 2, m: 8 }, 4),
            (Pattern::Nm { n: 2, m: 8 }, 64),
            (Pattern::Vnm { v: 64, m: 8 }, 1),
            (Pattern::Vnm { v: 64, m: 8 }, 8),
            (Pattern::Vnm { v: 64, m: 8 }, 33),
            (Pattern::Unstructured { sparsity: 0.75 }, 1),
            (Pattern::Dense, 1),
        ];
        let mut on_panels = 0;
        for (pattern, n) in cases {
            let sig = FormatSignature::for_pattern(&pattern, 256, 256).unwrap();
            let points = crate::cpu_space(&sig, n).points();
            let effective: std::collections::BTreeSet<_> = points
                .iter()
                .map(|p| crate::effective_point(&sig, n, p))
                .collect();
            let threads: std::collections::BTreeSet<i64> =
                points.iter().map(|p| p.0["threads"]).collect();
            let at = format!("{pattern:?} at n = {n} on {isa}");
            if signature_path(&sig, n, isa).is_some() {
                on_panels += 1;
                assert!(
                    points.len() > threads.len(),
                    "{at}: a space of thread counts only"
                );
                assert_eq!(effective.len(), threads.len(), "{at}");
                assert!(effective.iter().all(|p| p.0.keys().eq(["threads"])), "{at}");
            } else {
                assert_eq!(effective.len(), points.len(), "{at}");
            }
        }
        if isa != Isa::Scalar {
            assert!(
                on_panels >= 4,
                "{on_panels} of the cases on panels on {isa}"
            );
        }
    }

    /// The ISAs this CPU runs: the detected one and the narrower ones.
    fn isas() -> Vec<Isa> {
        match crate::isa() {
            Isa::Avx512 => vec![Isa::Avx512, Isa::Avx2, Isa::Scalar],
            Isa::Avx2 => vec![Isa::Avx2, Isa::Scalar],
            Isa::Scalar => vec![Isa::Scalar],
        }
    }

    /// The rule the cost model reads is the one the products take: for every family, a range
    /// of N, M and V, and column counts around the lanes, `path` names a kernel exactly where
    /// `batch_one` or `few_columns` runs the product, over the panels `dispatch` lays out.
    #[test]
    fn the_path_is_the_one_the_products_take() {
        let patterns = [
            Pattern::Dense,
            Pattern::Unstructured { sparsity: 0.75 },
            Pattern::Nm { n: 1, m: 4 },
            Pattern::Nm { n: 2, m: 4 },
            Pattern::Nm { n: 2, m: 8 },
            Pattern::Nm { n: 4, m: 8 },
            Pattern::Nm { n: 2, m: 16 },
            Pattern::Nm { n: 8, m: 16 },
            Pattern::Nm { n: 2, m: 32 },
            Pattern::Vnm { v: 16, m: 4 },
            Pattern::Vnm { v: 64, m: 8 },
            Pattern::Vnm { v: 16, m: 16 },
            Pattern::Vnm { v: 64, m: 16 },
            Pattern::Vnm { v: 128, m: 16 },
            Pattern::Vnm { v: 8, m: 32 },
            Pattern::Vnm { v: 32, m: 32 },
            Pattern::Vector {
                v: 4,
                sparsity: 0.75,
            },
            Pattern::Vector {
                v: 16,
                sparsity: 0.75,
            },
            Pattern::Vector {
                v: 64,
                sparsity: 0.5,
            },
        ];
        let (rows, cols) = (256, 256);
        for isa in isas() {
            let mut taken = 0;
            for pattern in &patterns {
                let sig = FormatSignature::for_pattern(pattern, rows, cols).unwrap();
                let a = synthetic(&sig, 3).unwrap();
                for n in [1, 2, 3, 7, 8, 12, 15, 16, 17, 24, 25, 32, 33] {
                    let b = random_values(cols * n, 4);
                    let mut c = vec![0f32; rows * n];
                    let ran = if n == 1 {
                        batch_one::run(&a, &b, &mut c, 1, &Epilogue::default(), isa)
                    } else {
                        few_columns::run(&a, &b, n, &mut c, 1, &Epilogue::default(), isa)
                    };
                    let taken_path = path(Format::of(&a), n, isa);
                    let at = format!("{pattern:?} at n = {n} on {isa}: {taken_path:?}");
                    assert_eq!(taken_path.is_some(), ran, "{at}, ran {ran}");
                    assert_eq!(taken_path, signature_path(&sig, n, isa), "{at}");
                    if taken_path == Some(Path::Gemv) {
                        assert!(dispatch::panels(&a, isa).is_none(), "{at}");
                    }
                    let Some(Path::Panels(layout)) = taken_path else {
                        continue;
                    };
                    taken += 1;
                    let panels = if n == 1 {
                        dispatch::panels(&a, isa)
                    } else {
                        dispatch::few_column_panels(&a, isa)
                    };
                    let laid = match panels {
                        Some(GemvPanels::Rows(_)) => {
                            matches!(layout, Layout::NmRows | Layout::VnmRows)
                        }
                        Some(GemvPanels::Groups(_)) => layout == Layout::VnmGroups,
                        Some(GemvPanels::Csr(_)) => layout == Layout::Csr,
                        None => false,
                    };
                    assert!(laid, "{at}");
                }
            }
            // Not vacuous: each SIMD ISA takes panels for most of these (64 products at 8
            // lanes, 102 at 16).
            if isa != Isa::Scalar {
                assert!(taken > 50, "{taken} products on panels on {isa}");
            }
        }
    }
}
