//! Fits the Hopper kernel's cost model ([`wgmma_cycles_with`]) to a device's table: its nine
//! constants, so that the model's ranking of each measured point's configurations finds the
//! fastest ones. The prior ([`WgmmaConstants::PRIOR`]) was never checked on a device; the first
//! `wgmma.csv` (`kernels/tests/cuda_bench_wgmma.rs`, run by `scripts/device-check.sh full`) is
//! what this fits, with `cuda-model-check --fit-wgmma`.
//!
//! The objective is what the tuner's `model` strategy needs, as `scripts/fit_cuda_cost.py`'s
//! for the `mma.sp` model: the regret of measuring only the model's first 10 % of a point's
//! configurations (mean plus half the largest over the points), plus 0.3 × the mean regret of
//! its first choice. Nelder–Mead over the constants' logarithms from the prior and from six
//! spread starts; the best result wins. Each BERT shape (rows × cols) is also held out in turn:
//! the constants fitted on the others are scored on it, which says whether the fit carries to
//! shapes it did not see.
//!
//! Only the rankings inside each point enter the objective, so the fit settles the constants'
//! ratios, not their scale (on a table the model made itself, other constants than the true
//! ones rank as well: see the test). The tuner never compares this model's scale with the
//! `mma.sp` model's ([`crate::cuda::cuda_spaces`]), so the ranking is what counts.

use std::collections::{BTreeMap, BTreeSet};

use super::cost::GpuModel;
use super::cost_check::{as_point, parse};
use super::wgmma::WgmmaConfig;
use super::wgmma_cost::{wgmma_cycles_with, WgmmaConstants};
use crate::regret_at_budget;

/// The configurations measured at one point of a table and their median times.
struct Group {
    /// (rows, cols, M).
    shape: (usize, usize, usize),
    n: usize,
    configs: Vec<WgmmaConfig>,
    times: Vec<f64>,
}

/// A fit's result.
#[derive(Debug, Clone, PartialEq)]
pub struct WgmmaFit {
    /// The fitted constants.
    pub constants: WgmmaConstants,
    /// Points (shape, n, M) of the table with at least two configurations.
    pub points: usize,
    /// The objective (see the module's notes) of the prior on the table.
    pub prior_objective: f64,
    /// The objective of the fitted constants on the table.
    pub objective: f64,
    /// Per shape (rows, cols): the objective, on that shape's points, of the constants fitted
    /// on the other shapes, and of the prior.
    pub held_out: Vec<((usize, usize), f64, f64)>,
}

/// The table's Hopper (`wgmma`) rows, grouped by point.
fn groups(csv: &str) -> Result<Vec<Group>, String> {
    let mut by_point: BTreeMap<(usize, usize, usize, usize), Group> = BTreeMap::new();
    for m in parse(csv)?
        .into_iter()
        .filter(|m| m.kind == "wgmma" && m.median_us.is_finite() && m.median_us > 0.0)
    {
        let (rows, cols, n, _, mm) = m.point;
        let cfg = WgmmaConfig::from_point(&as_point(&m.params))
            .map_err(|e| format!("wgmma {rows}x{cols}: {e}"))?;
        let g = by_point
            .entry((rows, cols, mm, n))
            .or_insert_with(|| Group {
                shape: (rows, cols, mm),
                n,
                configs: vec![],
                times: vec![],
            });
        g.configs.push(cfg);
        g.times.push(m.median_us);
    }
    Ok(by_point
        .into_values()
        .filter(|g| g.configs.len() >= 2)
        .collect())
}

/// The objective of constants `k` on `groups` (0 when the model's first choice is the fastest
/// everywhere).
fn objective(k: &WgmmaConstants, groups: &[&Group], gpu: &GpuModel) -> f64 {
    let (mut sum10, mut max10, mut first) = (0.0, 0.0f64, 0.0);
    for g in groups {
        let pred: Vec<f64> = g
            .configs
            .iter()
            .map(|c| wgmma_cycles_with(k, c, g.shape, g.n, gpu))
            .collect();
        let budget = ((pred.len() as f64 * 0.1).round() as usize).max(1);
        let r10 = regret_at_budget(&pred, &g.times, budget);
        sum10 += r10;
        max10 = max10.max(r10);
        first += regret_at_budget(&pred, &g.times, 1);
    }
    let count = groups.len().max(1) as f64;
    sum10 / count + 0.5 * max10 + 0.3 * first / count
}

/// Nelder–Mead minimisation of `f` from `start` with initial steps `step` per coordinate,
/// `iterations` steps; the best point and its value.
fn nelder_mead(
    f: &dyn Fn(&[f64]) -> f64,
    start: &[f64],
    step: f64,
    iterations: usize,
) -> (Vec<f64>, f64) {
    let d = start.len();
    let mut simplex: Vec<(Vec<f64>, f64)> = (0..=d)
        .map(|i| {
            let mut x = start.to_vec();
            if i > 0 {
                x[i - 1] += step;
            }
            let v = f(&x);
            (x, v)
        })
        .collect();
    let towards = |a: &[f64], b: &[f64], t: f64| -> Vec<f64> {
        a.iter().zip(b).map(|(a, b)| a + t * (b - a)).collect()
    };
    for _ in 0..iterations {
        simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
        let centroid: Vec<f64> = (0..d)
            .map(|j| simplex[..d].iter().map(|p| p.0[j]).sum::<f64>() / d as f64)
            .collect();
        let worst = simplex[d].clone();
        let reflected = towards(&centroid, &worst.0, -1.0);
        let fr = f(&reflected);
        if fr < simplex[0].1 {
            let expanded = towards(&centroid, &worst.0, -2.0);
            let fe = f(&expanded);
            simplex[d] = if fe < fr {
                (expanded, fe)
            } else {
                (reflected, fr)
            };
        } else if fr < simplex[d - 1].1 {
            simplex[d] = (reflected, fr);
        } else {
            let contracted = towards(&centroid, &worst.0, 0.5);
            let fc = f(&contracted);
            if fc < worst.1 {
                simplex[d] = (contracted, fc);
            } else {
                // Shrink towards the best point.
                let best = simplex[0].0.clone();
                for p in simplex.iter_mut().skip(1) {
                    p.0 = towards(&best, &p.0, 0.5);
                    p.1 = f(&p.0);
                }
            }
        }
    }
    simplex.sort_by(|a, b| a.1.total_cmp(&b.1));
    simplex.swap_remove(0)
}

/// The constants that minimise the objective on `groups`, over seven starts.
fn fit_groups(groups: &[&Group], gpu: &GpuModel) -> (WgmmaConstants, f64) {
    let prior = WgmmaConstants::PRIOR.to_array().map(f64::ln);
    let constants = |x: &[f64]| {
        let mut a = [0.0; 9];
        a.iter_mut().zip(x).for_each(|(a, x)| *a = x.exp());
        WgmmaConstants::from_array(a)
    };
    let f = |x: &[f64]| objective(&constants(x), groups, gpu);
    let mut best = (prior.to_vec(), f(&prior));
    if best.1 == 0.0 {
        // The prior already ranks every point's fastest configuration first.
        return (WgmmaConstants::PRIOR, 0.0);
    }
    // The prior, then six starts each constant a factor e^0.8 above or below it (a fixed
    // pattern of signs per start).
    for s in 0..7usize {
        let start: Vec<f64> = prior
            .iter()
            .enumerate()
            .map(|(j, &p)| match (s, (7 * j + 3 * s) % 5 < 2) {
                (0, _) => p,
                (_, true) => p - 0.8,
                (_, false) => p + 0.8,
            })
            .collect();
        let (x, v) = nelder_mead(&f, &start, 0.5, 300);
        if v < best.1 {
            best = (x, v);
        }
    }
    (constants(&best.0), best.1)
}

/// Fits the Hopper cost model's constants to the `wgmma` rows of the benchmark table `csv` on
/// `gpu`, and holds out each shape in turn (see the module's notes).
pub fn fit_wgmma(csv: &str, gpu: &GpuModel) -> Result<WgmmaFit, String> {
    let all = groups(csv)?;
    if all.is_empty() {
        return Err("no wgmma point with two or more measured configurations".into());
    }
    let refs: Vec<&Group> = all.iter().collect();
    let (constants, value) = fit_groups(&refs, gpu);
    let shapes: BTreeSet<(usize, usize)> = all.iter().map(|g| (g.shape.0, g.shape.1)).collect();
    let held_out = if shapes.len() < 2 {
        vec![]
    } else {
        shapes
            .iter()
            .map(|&s| {
                let (inside, outside): (Vec<&Group>, Vec<&Group>) =
                    refs.iter().partition(|g| (g.shape.0, g.shape.1) != s);
                let (k, _) = fit_groups(&inside, gpu);
                (
                    s,
                    objective(&k, &outside, gpu),
                    objective(&WgmmaConstants::PRIOR, &outside, gpu),
                )
            })
            .collect()
    };
    Ok(WgmmaFit {
        constants,
        points: all.len(),
        prior_objective: objective(&WgmmaConstants::PRIOR, &refs, gpu),
        objective: value,
        held_out,
    })
}

impl std::fmt::Display for WgmmaFit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "Hopper wgmma model fitted on {} points: objective {:.4} (prior {:.4}; the 10 % \
             budget's regret, mean + half the largest, + 0.3 x the first choice's)",
            self.points, self.objective, self.prior_objective
        )?;
        for ((rows, cols), fitted, prior) in &self.held_out {
            writeln!(
                f,
                "  {rows}x{cols} held out: {fitted:.4} fitted on the other shapes, {prior:.4} prior"
            )?;
        }
        writeln!(f, "constants (WgmmaConstants::PRIOR in wgmma_cost.rs):")?;
        for (name, (value, prior)) in WgmmaConstants::NAMES.iter().zip(
            self.constants
                .to_array()
                .iter()
                .zip(WgmmaConstants::PRIOR.to_array()),
        ) {
            writeln!(f, "  {name}: {value:.3},   // prior {prior:.3}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::wgmma_configs;
    use std::fmt::Write;

    /// A `wgmma.csv` whose times are the model's with constants `k` (1.7 GHz), on the BERT
    /// shapes at 2:4 and 2:8, 16 and 4,096 columns: every configuration the kernel accepts
    /// (without B's swizzle).
    fn table(k: &WgmmaConstants) -> String {
        let gpu = GpuModel::h200();
        let mut s = String::from("kind,rows,cols,n,v,m,config,median_us\n");
        for (rows, cols) in [(768, 768), (3072, 768), (768, 3072)] {
            for m in [4, 8] {
                for n in [16, 4096] {
                    // The model does not see B's swizzle: one of the two layouts is enough (and
                    // one grid: the persistent one differs by one term).
                    for c in wgmma_configs(128)
                        .into_iter()
                        .filter(|c| c.swizzle == 0 && c.persistent == 0)
                    {
                        let us = wgmma_cycles_with(k, &c, (rows, cols, m), n, &gpu) / 1700.0;
                        let _ = writeln!(s, "wgmma,{rows},{cols},{n},128,{m},\"{c}\",{us:.4}");
                    }
                }
            }
        }
        s
    }

    /// On a table made by the model itself with other constants (slower tensor cores, a
    /// longer drain, copy latency and cluster hand-off), the fit ranks far better than the
    /// prior, on the whole table and on each shape held out.
    #[test]
    fn a_table_of_the_model_with_other_constants_is_fitted_back() {
        let truth = WgmmaConstants {
            sparse_flop_per_cycle: 2500.0,
            wgmma_drain: 700.0,
            copy_latency: 2000.0,
            l2_bytes_per_cycle: 25.0,
            cluster_sync: 900.0,
            ..WgmmaConstants::PRIOR
        };
        let fit = fit_wgmma(&table(&truth), &GpuModel::h200()).unwrap();
        assert_eq!(fit.points, 12);
        assert!(fit.prior_objective > 0.05, "{fit}");
        assert!(fit.objective < 0.25 * fit.prior_objective, "{fit}");
        for (shape, fitted, prior) in &fit.held_out {
            assert!(fitted <= prior, "{shape:?}: {fit}");
        }
        // The prior's own table: nothing to improve.
        let fit = fit_wgmma(&table(&WgmmaConstants::PRIOR), &GpuModel::h200()).unwrap();
        assert_eq!(fit.prior_objective, 0.0);
        assert_eq!(fit.objective, 0.0);
    }

    /// A table without Hopper rows is an error, not a fit of nothing.
    #[test]
    fn a_table_without_wgmma_rows_is_an_error() {
        let csv = "kind,rows,cols,n,v,m,config,median_us\nvnm,768,768,16,128,8,\"BM=64\",1.0\n";
        assert!(fit_wgmma(csv, &GpuModel::h200()).is_err());
    }
}
