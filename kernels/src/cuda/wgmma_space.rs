//! The Hopper kernel's parameter space (`cuda-vnm-wgmma`) and which spaces a device offers a
//! signature ([`cuda_spaces`]): on sm_90 the formats the Hopper kernel serves get its space
//! beside the `mma.sp` kernel's, and the tuner measures both.

use super::space::{cuda_space, size_param};
use super::wgmma::{
    WgmmaConfig, WGMMA_BK, WGMMA_BLOCK_ROWS, WGMMA_BM, WGMMA_BN, WGMMA_BULK, WGMMA_CLUSTER,
    WGMMA_CLUSTER_N, WGMMA_KEEP, WGMMA_PERSISTENT, WGMMA_PINGPONG, WGMMA_RASTER, WGMMA_SPLIT_K,
    WGMMA_STAGES, WGMMA_SWIZZLE, WGMMA_TMA,
};
use super::wgmma_exclude::{env_exclusions, WgmmaExclusions};
use crate::{
    Constraint, FormatSignature, KernelError, KernelSpace, ParamDef, ParamPoint, PatternKind,
};

/// The Hopper kernel's space name (and the `kernel` column of its rows).
pub const WGMMA_KERNEL: &str = "cuda-vnm-wgmma";

/// The arch whose devices run the Hopper kernel (`wgmma.sp` is sm_90a only).
pub const WGMMA_ARCH: &str = "sm_90";

/// The thread-block heights (BM) of the Hopper kernel for `sig`, empty where it does not
/// apply: V:N:M with V ∈ {64, 128} (BM dividing V), or N:M 2:4 / 1:4 with rows a multiple of
/// BM (2:4 is V:N:M with M = 4 and V = BM).
pub fn wgmma_block_rows(sig: &FormatSignature) -> Vec<usize> {
    let whole = match sig.kind {
        PatternKind::Vnm if WGMMA_BLOCK_ROWS.contains(&sig.v) => sig.v,
        PatternKind::Nm if sig.m == 4 && sig.n <= 2 => sig.rows,
        _ => return vec![],
    };
    WGMMA_BM
        .into_iter()
        .filter(|bm| whole.is_multiple_of(*bm))
        .collect()
}

/// The Hopper kernel's space, for a format of group width `m`, with thread blocks of any of
/// the heights `bms`: `bm`, `bn`, `bk`, `stages`, `keep`, `split_k`, `bulk`, `swizzle`, `tma`
/// and `cluster` (1, 2 and 4 offered only where M = 4), `cluster_n`, `raster`, `persistent`,
/// `pingpong`, constrained to what the kernel accepts (`keep` = 1 needs 3+ stages; `tma` = 1
/// needs `swizzle` = 1 and `bulk` = 1; `cluster` > 1 needs `tma` = 1; `cluster_n` > 1 needs
/// `bulk` = 1 and no cluster along the rows; `pingpong` = 1 needs BM = 128, BN ≤ 128, persistent
/// blocks, and `keep` = 0 at BN 128 × BK 128; the pipeline must fit sm_90's shared memory;
/// see [`WgmmaConfig::validate`]).
pub fn wgmma_space(bms: &[usize], m: usize) -> KernelSpace {
    space_of(wgmma_params(bms, m, &WgmmaExclusions::default()))
}

/// [`wgmma_space`]'s parameters less the values `ex` excludes (a parameter may be left with
/// none).
fn wgmma_params(bms: &[usize], m: usize, ex: &WgmmaExclusions) -> Vec<ParamDef> {
    let (tma, cluster): (&[usize], &[usize]) = if m == 4 {
        (&WGMMA_TMA, &WGMMA_CLUSTER)
    } else {
        (&WGMMA_TMA[..1], &WGMMA_CLUSTER[..1])
    };
    [
        ("bk", &WGMMA_BK[..]),
        ("bm", bms),
        ("bn", &WGMMA_BN),
        ("bulk", &WGMMA_BULK),
        ("cluster", cluster),
        ("cluster_n", &WGMMA_CLUSTER_N),
        ("keep", &WGMMA_KEEP),
        ("persistent", &WGMMA_PERSISTENT),
        ("pingpong", &WGMMA_PINGPONG),
        ("raster", &WGMMA_RASTER),
        ("split_k", &WGMMA_SPLIT_K),
        ("stages", &WGMMA_STAGES),
        ("swizzle", &WGMMA_SWIZZLE),
        ("tma", tma),
    ]
    .into_iter()
    .map(|(name, values)| ParamDef {
        name,
        values: ex
            .keep(name, values)
            .into_iter()
            .map(|v| v as i64)
            .collect(),
    })
    .collect()
}

/// The Hopper kernel's space over `params`.
fn space_of(params: Vec<ParamDef>) -> KernelSpace {
    KernelSpace::new(
        WGMMA_KERNEL,
        params,
        vec![Constraint::KernelAccepts {
            kernel: WGMMA_KERNEL,
        }],
    )
}

/// [`wgmma_space`] less the values `ex` excludes; `None` where a parameter is left without
/// values.
fn wgmma_space_without(bms: &[usize], m: usize, ex: &WgmmaExclusions) -> Option<KernelSpace> {
    let params = wgmma_params(bms, m, ex);
    params
        .iter()
        .all(|p| !p.values.is_empty())
        .then(|| space_of(params))
}

/// Every CUDA space a device of `arch` offers for a matrix of signature `sig` times a B of `n`
/// columns: the `mma.sp` kernel's (or CSR's, cuBLAS's: [`cuda_space`]) first, then on sm_90
/// the Hopper kernel's where it serves the format, less what `COTUNE_WGMMA_EXCLUDE` leaves
/// out ([`env_exclusions`]; a value that does not parse leaves nothing out here, and the
/// Hopper kernel's launches refuse it). Points of different spaces have different parameters,
/// so a point names its kernel ([`is_wgmma_point`]).
pub fn cuda_spaces(sig: &FormatSignature, n: usize, arch: &str) -> Vec<KernelSpace> {
    let mut spaces = vec![cuda_space(sig, n)];
    let bms = wgmma_block_rows(sig);
    if arch == WGMMA_ARCH && !bms.is_empty() {
        let ex = env_exclusions().unwrap_or_default();
        spaces.extend(wgmma_space_without(&bms, sig.m, &ex));
    }
    spaces
}

/// Whether `p` is a point of the Hopper kernel's space (only it has `split_k`).
pub fn is_wgmma_point(p: &ParamPoint) -> bool {
    p.0.contains_key("split_k")
}

/// Checks a [`Constraint::KernelAccepts`]: `p` is a configuration `kernel` accepts.
pub(crate) fn kernel_accepts(kernel: &str, p: &ParamPoint) -> Result<(), KernelError> {
    match kernel {
        WGMMA_KERNEL => WgmmaConfig::from_point(p).map(|_| ()),
        other => Err(KernelError::Backend(format!(
            "no configuration check for kernel `{other}`"
        ))),
    }
}

impl WgmmaConfig {
    /// The names of its parameters in [`wgmma_space`] (and, upper-case, of its `#define`s and
    /// launch arguments in its display).
    pub const PARAMS: [&'static str; 14] = [
        "bm",
        "bn",
        "bk",
        "stages",
        "keep",
        "split_k",
        "bulk",
        "swizzle",
        "tma",
        "raster",
        "persistent",
        "cluster",
        "cluster_n",
        "pingpong",
    ];

    /// The configuration at `p` (a point of [`wgmma_space`]); checked like
    /// [`WgmmaConfig::validate`].
    pub fn from_point(p: &ParamPoint) -> Result<Self, KernelError> {
        let get = |name| size_param(p, name);
        let c = WgmmaConfig {
            bm: get("bm")?,
            bn: get("bn")?,
            bk: get("bk")?,
            stages: get("stages")?,
            keep: get("keep")?,
            split_k: get("split_k")?,
            bulk: get("bulk")?,
            swizzle: get("swizzle")?,
            tma: get("tma")?,
            raster: get("raster")?,
            persistent: get("persistent")?,
            cluster: get("cluster")?,
            cluster_n: get("cluster_n")?,
            pingpong: get("pingpong")?,
        };
        c.validate().map_err(|e| KernelError::ParamConstraint {
            name: "stages".into(),
            value: c.stages as i64,
            reason: e.to_string(),
        })?;
        Ok(c)
    }

    /// The point of this configuration.
    pub fn to_point(&self) -> ParamPoint {
        ParamPoint::from_pairs(
            Self::PARAMS
                .into_iter()
                .zip(self.values().map(|v| v as i64)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::wgmma_configs;
    use crate::Pattern;

    fn sig(p: Pattern, rows: usize, cols: usize) -> FormatSignature {
        FormatSignature::for_pattern(&p, rows, cols).unwrap()
    }

    #[test]
    fn the_space_is_every_valid_configuration_and_points_round_trip() {
        for (v, m) in WGMMA_BLOCK_ROWS.into_iter().flat_map(|v| [(v, 8), (v, 4)]) {
            let s = sig(Pattern::Vnm { v, m }, 2 * v, 256);
            let spaces = cuda_spaces(&s, 512, "sm_90");
            assert_eq!(spaces.len(), 2);
            assert_eq!(spaces[0].kernel, "cuda-vnm");
            let points = spaces[1].points();
            let mut configs: Vec<WgmmaConfig> = points
                .iter()
                .map(|p| WgmmaConfig::from_point(p).unwrap())
                .collect();
            configs.sort();
            // TMA only where M = 4.
            let mut want: Vec<WgmmaConfig> = wgmma_configs(v)
                .into_iter()
                .filter(|c| c.tma == 0 || m == 4)
                .collect();
            want.sort();
            assert_eq!(configs, want, "V = {v}, M = {m}");
            assert!(
                points
                    .iter()
                    .all(|p| is_wgmma_point(p)
                        && WgmmaConfig::from_point(p).unwrap().to_point() == *p)
            );
            assert!(spaces[0].points().iter().all(|p| !is_wgmma_point(p)));
        }
    }

    #[test]
    fn the_space_rejects_what_the_kernel_rejects() {
        let space = wgmma_space(&[64, 128], 8);
        let ok = WgmmaConfig {
            bm: 128,
            bn: 128,
            bk: 64,
            stages: 4,
            keep: 1,
            split_k: 2,
            bulk: 0,
            swizzle: 0,
            tma: 0,
            raster: 1,
            persistent: 0,
            cluster: 1,
            cluster_n: 1,
            pingpong: 0,
        };
        assert!(space.contains(&ok.to_point()).is_ok());
        let two_stages = WgmmaConfig { stages: 2, ..ok };
        let err = space.contains(&two_stages.to_point()).unwrap_err();
        assert!(err.to_string().contains("KEEP"), "{err}");
        let too_big = WgmmaConfig {
            bn: 256,
            bk: 128,
            stages: 6,
            ..ok
        };
        let err = space.contains(&too_big.to_point()).unwrap_err();
        assert!(err.to_string().contains("shared memory"), "{err}");
        // TMA only where M = 4, and only with the swizzle its copies write.
        let tma = WgmmaConfig {
            swizzle: 1,
            bulk: 1,
            tma: 1,
            ..ok
        };
        assert!(space.contains(&tma.to_point()).is_err());
        let m4 = wgmma_space(&[64, 128], 4);
        assert!(m4.contains(&tma.to_point()).is_ok());
        let err = m4
            .contains(&WgmmaConfig { swizzle: 0, ..tma }.to_point())
            .unwrap_err();
        assert!(err.to_string().contains("TMA"), "{err}");
        // Where the device faulted on TMA (COTUNE_WGMMA_EXCLUDE=tma=1): the rest of M = 4's.
        let ex = WgmmaExclusions::parse("tma=1").unwrap();
        let no_tma = wgmma_space_without(&[64, 128], 4, &ex).unwrap();
        assert!(no_tma.contains(&tma.to_point()).is_err());
        assert!(no_tma.contains(&ok.to_point()).is_ok());
        assert_eq!(no_tma.points().len(), space.points().len());
        // Excluding split-K's factors keeps 1; excluding a parameter's every value, no space.
        let ex = WgmmaExclusions::parse("split_k=2,split_k=4").unwrap();
        let whole = wgmma_space_without(&[64, 128], 8, &ex).unwrap();
        assert_eq!(3 * whole.points().len(), space.points().len());
        let ex = WgmmaExclusions::parse("bm=64").unwrap();
        assert!(wgmma_space_without(&[64], 8, &ex).is_none());
    }

    #[test]
    fn only_sm90_offers_the_hopper_kernel_and_only_where_it_serves_the_format() {
        let vnm128 = sig(Pattern::Vnm { v: 128, m: 8 }, 256, 64);
        assert_eq!(cuda_spaces(&vnm128, 64, "sm_80").len(), 1);
        assert_eq!(cuda_spaces(&vnm128, 64, "sm_100").len(), 1);
        assert_eq!(wgmma_block_rows(&vnm128), vec![64, 128]);
        let vnm32 = sig(Pattern::Vnm { v: 32, m: 8 }, 64, 64);
        assert_eq!(cuda_spaces(&vnm32, 64, "sm_90").len(), 1);
        // 2:4: BM divides the rows.
        let nm = |rows| sig(Pattern::Nm { n: 2, m: 4 }, rows, 64);
        assert_eq!(wgmma_block_rows(&nm(192)), vec![64]);
        assert_eq!(wgmma_block_rows(&nm(256)), vec![64, 128]);
        assert!(wgmma_block_rows(&nm(48)).is_empty());
        assert!(wgmma_block_rows(&sig(Pattern::Nm { n: 2, m: 8 }, 256, 64)).is_empty());
        assert!(wgmma_block_rows(&sig(Pattern::Dense, 256, 64)).is_empty());
        let csr = sig(Pattern::Unstructured { sparsity: 0.5 }, 256, 64);
        assert_eq!(cuda_spaces(&csr, 64, "sm_90").len(), 1);
    }
}
