//! The CUDA kernels' parameter spaces as [`KernelSpace`]s, so that kernel-tune enumerates,
//! samples and ranks them like the CPU ones, and the conversions between a [`ParamPoint`] and
//! a kernel configuration.
//!
//! - V:N:M (`cuda-vnm`) and 2:4 (`cuda-nm24`, the same kernel with M = 4): `bm` (fixed to V
//!   for V:N:M; for 2:4 each of 16, 32, 64, 128 dividing the rows), `bn`, `bk`, `wm`, `wn`,
//!   `mma_k`, `stages`; constraints `wm · wn / 32 ≤ 128` (accumulators per thread) and `wm`
//!   dividing `bm` into at most 2 warp rows (see [`super::config`]).
//! - CSR (`cuda-csr`): `warps_per_block`, `cols_per_lane`.
//! - Dense (`cuda-dense`): cuBLAS, one point (`algo` = 0, its default heuristic).
//! - Other patterns have no CUDA kernel: their space has no points.

use super::config::{
    vnm_configs, vnm_wm_values, CsrConfig, VnmConfig, CSR_COLS_PER_LANE, CSR_WARPS, MAX_WARPS_M,
    VNM_BK, VNM_BN, VNM_MMA_K, VNM_STAGES, VNM_WN,
};
use crate::{
    Constraint, FormatSignature, KernelError, KernelSpace, ParamDef, ParamPoint, PatternKind,
};

fn def(name: &'static str, values: &[usize]) -> ParamDef {
    ParamDef {
        name,
        values: values.iter().map(|&v| v as i64).collect(),
    }
}

/// The thread-block heights (BM) the V:N:M kernel may use for a 2:4 matrix with `rows` rows:
/// each of 16, 32, 64 and 128 that divides the rows. 2:4 is V:N:M with M = 4 for any V, so BM
/// is the tuner's choice; on the H200, BM = 128 ran 1.30–1.35× faster than 64 at every BERT
/// shape (fewer row blocks re-read B), but small products may want more, shorter blocks.
pub fn nm24_block_rows(rows: usize) -> Vec<usize> {
    super::VNM_BLOCK_ROWS
        .into_iter()
        .filter(|v| rows.is_multiple_of(*v))
        .collect()
}

/// The thread-block heights (BM) of the `mma.sp` kernel for `sig`, empty where the kernel does
/// not apply: V:N:M with V ∈ {16, 32, 64, 128} (BM = V), or N:M 2:4 / 1:4 with rows a multiple
/// of 16 ([`nm24_block_rows`]).
pub fn vnm_block_rows(sig: &FormatSignature) -> Vec<usize> {
    match sig.kind {
        PatternKind::Vnm if super::VNM_BLOCK_ROWS.contains(&sig.v) => vec![sig.v],
        PatternKind::Nm if sig.m == 4 && sig.n <= 2 => nm24_block_rows(sig.rows),
        _ => vec![],
    }
}

/// The space of the V:N:M kernel with thread blocks of any of the heights `bms`.
pub fn vnm_space(kernel: &'static str, bms: &[usize]) -> KernelSpace {
    let mut wm: Vec<usize> = bms.iter().flat_map(|&bm| vnm_wm_values(bm)).collect();
    wm.sort_unstable();
    wm.dedup();
    KernelSpace::new(
        kernel,
        vec![
            def("bk", &VNM_BK),
            def("bm", bms),
            def("bn", &VNM_BN),
            def("mma_k", &VNM_MMA_K),
            def("stages", &VNM_STAGES),
            def("wm", &wm),
            def("wn", &VNM_WN),
        ],
        vec![
            Constraint::ProductAtMost {
                a: "wm",
                b: "wn",
                divisor: 32,
                max: super::config::MAX_ACC_PER_THREAD as i64,
            },
            Constraint::DividesAtMost {
                part: "wm",
                whole: "bm",
                max_parts: MAX_WARPS_M as i64,
            },
        ],
    )
}

/// The CUDA space for a matrix of signature `sig` times a B of `n` columns.
pub fn cuda_space(sig: &FormatSignature, _n: usize) -> KernelSpace {
    match sig.kind {
        PatternKind::Dense => KernelSpace::new("cuda-dense", vec![def("algo", &[0])], vec![]),
        PatternKind::Unstructured => KernelSpace::new(
            "cuda-csr",
            vec![
                def("cols_per_lane", &CSR_COLS_PER_LANE),
                def("warps_per_block", &CSR_WARPS),
            ],
            vec![],
        ),
        PatternKind::Vnm | PatternKind::Nm => match vnm_block_rows(sig) {
            bms if bms.is_empty() => unsupported(),
            bms if sig.kind == PatternKind::Vnm => vnm_space("cuda-vnm", &bms),
            bms => vnm_space("cuda-nm24", &bms),
        },
        PatternKind::Vector => unsupported(),
    }
}

/// The value of parameter `name` of `p` as a size: an error if it is missing or negative.
pub(super) fn size_param(p: &ParamPoint, name: &str) -> Result<usize, KernelError> {
    let v = p.get(name)?;
    usize::try_from(v).map_err(|_| KernelError::ParamConstraint {
        name: name.to_string(),
        value: v,
        reason: "must not be negative".into(),
    })
}

/// A space without points, for patterns no CUDA kernel implements.
fn unsupported() -> KernelSpace {
    KernelSpace::new("cuda-unsupported", vec![def("none", &[])], vec![])
}

impl VnmConfig {
    /// The names of its parameters in [`vnm_space`].
    pub const PARAMS: [&'static str; 7] = ["bm", "bn", "bk", "wm", "wn", "mma_k", "stages"];

    /// The configuration at `p` (a point of [`vnm_space`]); checked like [`VnmConfig::validate`].
    pub fn from_point(p: &ParamPoint) -> Result<Self, KernelError> {
        let get = |name| size_param(p, name);
        let c = VnmConfig {
            bm: get("bm")?,
            bn: get("bn")?,
            bk: get("bk")?,
            wm: get("wm")?,
            wn: get("wn")?,
            mma_k: get("mma_k")?,
            stages: get("stages")?,
        };
        c.validate().map_err(|e| KernelError::ParamConstraint {
            name: "bm".into(),
            value: c.bm as i64,
            reason: e.to_string(),
        })?;
        Ok(c)
    }

    /// The point of this configuration.
    pub fn to_point(&self) -> ParamPoint {
        ParamPoint::from_pairs(self.defines().into_iter().map(|(k, v)| (k, v as i64)).map(
            |(k, v)| {
                (
                    match k {
                        "BM" => "bm",
                        "BN" => "bn",
                        "BK" => "bk",
                        "WM" => "wm",
                        "WN" => "wn",
                        "MMA_K" => "mma_k",
                        _ => "stages",
                    },
                    v,
                )
            },
        ))
    }
}

impl CsrConfig {
    /// The configuration at `p` (a point of the `cuda-csr` space).
    pub fn from_point(p: &ParamPoint) -> Result<Self, KernelError> {
        let c = CsrConfig {
            warps_per_block: p.get("warps_per_block")?.max(0) as usize,
            cols_per_lane: p.get("cols_per_lane")?.max(0) as usize,
        };
        c.validate().map_err(|e| KernelError::ParamConstraint {
            name: "warps_per_block".into(),
            value: c.warps_per_block as i64,
            reason: e.to_string(),
        })?;
        Ok(c)
    }

    /// The point of this configuration.
    pub fn to_point(&self) -> ParamPoint {
        ParamPoint::from_pairs([
            ("warps_per_block", self.warps_per_block as i64),
            ("cols_per_lane", self.cols_per_lane as i64),
        ])
    }
}

/// Every configuration of every CUDA kernel that some signature's space contains, with the
/// kernel it belongs to: what CI compiles for each target.
pub fn all_configs() -> (Vec<VnmConfig>, Vec<CsrConfig>) {
    let vnm = super::VNM_BLOCK_ROWS
        .iter()
        .flat_map(|&v| vnm_configs(v))
        .collect();
    (vnm, super::csr_configs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FormatSignature, Pattern};

    fn sig(p: Pattern, rows: usize, cols: usize) -> FormatSignature {
        FormatSignature::for_pattern(&p, rows, cols).unwrap()
    }

    #[test]
    fn vnm_space_points_are_exactly_the_valid_configurations() {
        for v in super::super::VNM_BLOCK_ROWS {
            let space = cuda_space(&sig(Pattern::Vnm { v, m: 8 }, 2 * v, 64), 128);
            let from_points: Vec<VnmConfig> = space
                .points()
                .iter()
                .map(|p| VnmConfig::from_point(p).unwrap())
                .collect();
            let mut want = vnm_configs(v);
            let mut got = from_points.clone();
            want.sort();
            got.sort();
            assert_eq!(got, want, "V={v}");
            for c in from_points {
                assert_eq!(VnmConfig::from_point(&c.to_point()).unwrap(), c);
            }
        }
    }

    #[test]
    fn two_four_tunes_every_block_height_dividing_the_rows() {
        assert_eq!(nm24_block_rows(768), vec![16, 32, 64, 128]);
        assert_eq!(nm24_block_rows(96), vec![16, 32]);
        assert!(nm24_block_rows(10).is_empty());
        let space = cuda_space(&sig(Pattern::Nm { n: 2, m: 4 }, 384, 64), 256);
        let mut got: Vec<VnmConfig> = space
            .points()
            .iter()
            .map(|p| VnmConfig::from_point(p).unwrap())
            .collect();
        let mut want: Vec<VnmConfig> = [16, 32, 64, 128]
            .into_iter()
            .flat_map(vnm_configs)
            .collect();
        got.sort();
        want.sort();
        assert_eq!(got, want);
        // A warp tile must divide the block's rows into at most two warp rows.
        let mut p = vnm_configs(128)[0].to_point();
        p.0.insert("wm".into(), 32);
        let err = space.contains(&p).unwrap_err().to_string();
        assert!(err.contains("wm") && err.contains("at most 2"), "{err}");
    }

    #[test]
    fn each_pattern_gets_its_kernel_or_an_empty_space() {
        let nm = cuda_space(&sig(Pattern::Nm { n: 2, m: 4 }, 96, 64), 64);
        assert_eq!(nm.kernel, "cuda-nm24");
        assert!(nm
            .points()
            .iter()
            .all(|p| [Ok(16), Ok(32)].contains(&p.get("bm"))));
        let csr = cuda_space(&sig(Pattern::Unstructured { sparsity: 0.9 }, 8, 8), 64);
        assert_eq!(csr.points().len(), 12);
        for p in csr.points() {
            assert_eq!(CsrConfig::from_point(&p).unwrap().to_point(), p);
        }
        assert_eq!(cuda_space(&sig(Pattern::Dense, 8, 8), 8).points().len(), 1);
        let vector = Pattern::Vector {
            v: 4,
            sparsity: 0.5,
        };
        assert!(cuda_space(&sig(vector, 8, 8), 8).points().is_empty());
        // V = 8 has no 16-row mma tile; 2:8 N:M is not a sparse tensor-core pattern.
        assert!(cuda_space(&sig(Pattern::Vnm { v: 8, m: 8 }, 16, 16), 8)
            .points()
            .is_empty());
        assert!(cuda_space(&sig(Pattern::Nm { n: 2, m: 8 }, 16, 16), 8)
            .points()
            .is_empty());
    }

    #[test]
    fn bad_points_are_rejected_with_the_parameter() {
        let mut p = vnm_configs(64)[0].to_point();
        p.0.insert("wm".into(), 48);
        assert!(VnmConfig::from_point(&p).is_err());
        p.0.remove("wm");
        assert!(matches!(
            VnmConfig::from_point(&p),
            Err(KernelError::MissingParam { .. })
        ));
    }
}
