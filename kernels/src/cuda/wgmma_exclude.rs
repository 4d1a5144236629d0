//! Configurations of the Hopper kernel a machine leaves out: `COTUNE_WGMMA_EXCLUDE`, a
//! comma-separated list of `param=value` (`tma=1`, `split_k=2,split_k=4`). The device check
//! runs one small test per feature of the kernel (two consumer warpgroups, bulk copies, the
//! swizzle, TMA, persistent blocks, split-K, wgmma groups kept in flight), each in a process
//! of its own since a fault or a hang ends the process's context, and excludes those that
//! failed, so that one feature the device rejects does not cost the benchmark's table or the
//! engine's run. The engine's Hopper space leaves the excluded values out
//! ([`super::cuda_spaces`]) and the device fingerprint names them, so tunings made without
//! them are keyed apart.

use std::fmt;
use std::sync::OnceLock;

use super::wgmma::{
    WgmmaConfig, WGMMA_BK, WGMMA_BM, WGMMA_BN, WGMMA_BULK, WGMMA_CLUSTER, WGMMA_CLUSTER_N,
    WGMMA_KEEP, WGMMA_PERSISTENT, WGMMA_PINGPONG, WGMMA_RASTER, WGMMA_SPLIT_K, WGMMA_STAGES,
    WGMMA_SWIZZLE, WGMMA_TMA,
};

/// The environment variable read by [`env_exclusions`].
pub const WGMMA_EXCLUDE_ENV: &str = "COTUNE_WGMMA_EXCLUDE";

/// Parameter values of the Hopper kernel left out, sorted by name and value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WgmmaExclusions(Vec<(&'static str, usize)>);

/// Every value parameter `name` of [`WgmmaConfig::PARAMS`] takes, or `None` for another name.
pub fn wgmma_param_values(name: &str) -> Option<&'static [usize]> {
    Some(match name {
        "bm" => &WGMMA_BM,
        "bn" => &WGMMA_BN,
        "bk" => &WGMMA_BK,
        "stages" => &WGMMA_STAGES,
        "keep" => &WGMMA_KEEP,
        "split_k" => &WGMMA_SPLIT_K,
        "bulk" => &WGMMA_BULK,
        "swizzle" => &WGMMA_SWIZZLE,
        "tma" => &WGMMA_TMA,
        "raster" => &WGMMA_RASTER,
        "persistent" => &WGMMA_PERSISTENT,
        "cluster" => &WGMMA_CLUSTER,
        "cluster_n" => &WGMMA_CLUSTER_N,
        "pingpong" => &WGMMA_PINGPONG,
        _ => return None,
    })
}

impl WgmmaExclusions {
    /// Reads `tma=1,split_k=2` (empty or `none`: nothing excluded); names are those of
    /// [`WgmmaConfig::PARAMS`] and values must be among the parameter's.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.is_empty() || text == "none" {
            return Ok(Self::default());
        }
        let mut out = Vec::new();
        for item in text.split(',').map(str::trim) {
            let (name, value) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}` is not `param=value`"))?;
            let (name, value) = (name.trim(), value.trim());
            let Some(i) = WgmmaConfig::PARAMS.iter().position(|p| *p == name) else {
                return Err(format!(
                    "`{name}` is not a parameter of the Hopper kernel (expected one of {})",
                    WgmmaConfig::PARAMS.join(", ")
                ));
            };
            let values = wgmma_param_values(name).unwrap_or(&[]);
            let value = value
                .parse::<usize>()
                .ok()
                .filter(|v| values.contains(v))
                .ok_or_else(|| format!("`{item}`: {name} takes {values:?}"))?;
            out.push((WgmmaConfig::PARAMS[i], value));
        }
        out.sort();
        out.dedup();
        Ok(Self(out))
    }

    /// Whether nothing is excluded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `cfg` has one of the excluded values.
    pub fn excludes(&self, cfg: &WgmmaConfig) -> bool {
        self.first_match(cfg).is_some()
    }

    /// The first of the listed values `cfg` has, as (parameter, value).
    pub fn first_match(&self, cfg: &WgmmaConfig) -> Option<(&'static str, usize)> {
        let values = cfg.values();
        self.0.iter().copied().find(|(name, v)| {
            WgmmaConfig::PARAMS
                .iter()
                .zip(values)
                .any(|(n, x)| n == name && x == *v)
        })
    }

    /// `values` of parameter `name` less the excluded ones.
    pub fn keep(&self, name: &str, values: &[usize]) -> Vec<usize> {
        values
            .iter()
            .copied()
            .filter(|v| !self.0.iter().any(|(n, x)| *n == name && x == v))
            .collect()
    }
}

impl fmt::Display for WgmmaExclusions {
    /// `tma=1,split_k=2` (what [`WgmmaExclusions::parse`] reads back), or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let items: Vec<String> = self.0.iter().map(|(n, v)| format!("{n}={v}")).collect();
        f.write_str(&items.join(","))
    }
}

/// The exclusions of [`WGMMA_EXCLUDE_ENV`] (none when unset), read once per process; a value
/// that does not parse is an error, which the Hopper kernel's launches report.
pub fn env_exclusions() -> Result<WgmmaExclusions, String> {
    static EXCLUDED: OnceLock<Result<WgmmaExclusions, String>> = OnceLock::new();
    EXCLUDED
        .get_or_init(|| {
            std::env::var(WGMMA_EXCLUDE_ENV).map_or(Ok(WgmmaExclusions::default()), |v| {
                WgmmaExclusions::parse(&v).map_err(|e| format!("{WGMMA_EXCLUDE_ENV}: {e}"))
            })
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::wgmma_configs;

    #[test]
    fn exclusions_round_trip_and_bad_ones_are_refused() {
        let ex = WgmmaExclusions::parse(" tma=1, split_k=4,split_k=2,tma=1 ").unwrap();
        assert_eq!(ex.to_string(), "split_k=2,split_k=4,tma=1");
        assert_eq!(WgmmaExclusions::parse(&ex.to_string()).unwrap(), ex);
        assert_eq!(WgmmaExclusions::parse("none").unwrap().to_string(), "none");
        for bad in ["tma", "tmaa=1", "tma=2", "bm=96", "split_k=x"] {
            assert!(WgmmaExclusions::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(ex.keep("split_k", &WGMMA_SPLIT_K), vec![1]);
        assert_eq!(ex.keep("bn", &WGMMA_BN), WGMMA_BN.to_vec());
    }

    #[test]
    fn a_configuration_with_any_excluded_value_is_excluded() {
        let ex = WgmmaExclusions::parse("persistent=1,bm=128").unwrap();
        let all = wgmma_configs(128);
        let kept: Vec<_> = all.iter().filter(|c| !ex.excludes(c)).collect();
        assert!(!kept.is_empty() && kept.len() < all.len());
        assert!(kept.iter().all(|c| c.persistent == 0 && c.bm == 64));
        assert_eq!(
            kept.len(),
            all.iter()
                .filter(|c| c.persistent == 0 && c.bm == 64)
                .count()
        );
        assert!(!WgmmaExclusions::default().excludes(all.last().unwrap()));
    }
}
