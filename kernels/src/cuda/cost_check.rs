//! How well the CUDA cost model ranks a device's measurements: reads a benchmark table (the
//! `bench.csv` that `kernels/tests/cuda_bench.rs` writes, e.g.
//! `kernels/cuda/results/h200_run3_bench.csv`, or the `wgmma.csv` of
//! `kernels/tests/cuda_bench_wgmma.rs`, whose `wgmma` rows are the Hopper kernel's) and, for
//! every measured point (shape, n, V, M), ranks its configurations with the model and scores
//! the ranking against the timings.

use std::collections::{BTreeMap, BTreeSet};

use super::config::{CsrConfig, VnmConfig};
use super::cost::{csr_cycles, vnm_cycles, vnm_registers, GpuModel};
use super::wgmma::WgmmaConfig;
use super::wgmma_cost::wgmma_cycles;
use crate::{regret_at_budget, spearman, ParamPoint};

/// The model's scores over a benchmark table.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelCheck {
    /// V:N:M points scored (each with all its measured configurations).
    pub vnm_points: usize,
    /// Per V:N:M point: regret of the best of the model's first 10 % (at least 1).
    pub vnm_regret_10pct: Vec<f64>,
    /// Per V:N:M point: regret of the model's first choice.
    pub vnm_regret_first: Vec<f64>,
    /// Per V:N:M point: Spearman correlation of predicted and measured time.
    pub vnm_spearman: Vec<f64>,
    /// Per CSR point: regret of the model's first choice.
    pub csr_regret_first: Vec<f64>,
    /// Per (shape, n) measured at M = 4 with more than one V: regret of the model's first
    /// choice over all of them, i.e. over the `cuda-nm24` space, where BM is tuned.
    pub nm24_regret_first: Vec<f64>,
    /// Per Hopper (`wgmma`) point: regret of the best of the model's first 10 % (at least 1).
    pub wgmma_regret_10pct: Vec<f64>,
    /// Per Hopper point: regret of the model's first choice.
    pub wgmma_regret_first: Vec<f64>,
    /// Per Hopper point: Spearman correlation of predicted and measured time.
    pub wgmma_spearman: Vec<f64>,
}

/// A measured point: (rows, cols, n, V, M).
type Point = (usize, usize, usize, usize, usize);

/// One measured configuration: its kind ("vnm", "csr_f32", …), point, parameters, median µs.
pub(super) struct Measurement {
    pub(super) kind: String,
    pub(super) point: Point,
    pub(super) params: BTreeMap<String, usize>,
    pub(super) median_us: f64,
}

pub(super) fn parse(csv: &str) -> Result<Vec<Measurement>, String> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().ok_or("empty table")?.split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or(format!("no column {name}"))
    };
    let (kind, rows, cols, n, v, m, config, median) = (
        col("kind")?,
        col("rows")?,
        col("cols")?,
        col("n")?,
        col("v")?,
        col("m")?,
        col("config")?,
        col("median_us")?,
    );
    let mut out = vec![];
    for (i, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        let bad = |what: &str| format!("line {}: bad {what}", i + 2);
        let num = |j: usize, what: &str| -> Result<usize, String> {
            f.get(j)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad(what))
        };
        let params = f
            .get(config)
            .ok_or_else(|| bad("config"))?
            .trim_matches('"')
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
            .collect();
        out.push(Measurement {
            kind: f.get(kind).ok_or_else(|| bad("kind"))?.to_string(),
            point: (
                num(rows, "rows")?,
                num(cols, "cols")?,
                num(n, "n")?,
                num(v, "v")?,
                num(m, "m")?,
            ),
            params,
            median_us: f
                .get(median)
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| bad("median_us"))?,
        });
        // A configuration whose launch failed on the device is timed as NaN: nothing to rank.
        if !out.last().is_some_and(|m| m.median_us.is_finite()) {
            out.pop();
        }
    }
    Ok(out)
}

/// The parameters of a table's `config` column ("BM=64 BN=64 …") as a point of the kernel's
/// space, whose parameter names are the same in lower case.
pub(super) fn as_point(params: &BTreeMap<String, usize>) -> ParamPoint {
    let lower: Vec<(String, i64)> = params
        .iter()
        .map(|(k, v)| (k.to_lowercase(), *v as i64))
        .collect();
    ParamPoint::from_pairs(lower.iter().map(|(k, v)| (k.as_str(), *v)))
}

/// The model's predicted cycles for measured V:N:M configurations of a `rows × cols` 2:`m`
/// matrix times `n` columns; `None` if one is not a valid configuration.
fn predict_vnm(
    configs: &[&Measurement],
    (rows, cols, n, m): (usize, usize, usize, usize),
    gpu: &GpuModel,
) -> Option<Vec<f64>> {
    configs
        .iter()
        .map(|c| {
            let cfg = VnmConfig::from_point(&as_point(&c.params)).ok()?;
            let (registers, _) = vnm_registers(&cfg, &gpu.arch);
            Some(vnm_cycles(&cfg, (rows, cols, m), n, registers, gpu))
        })
        .collect()
}

/// Scores the model on `gpu` against the benchmark table `csv`.
pub fn check_model(csv: &str, gpu: &GpuModel) -> Result<ModelCheck, String> {
    let measurements = parse(csv)?;
    let mut groups: BTreeMap<(&str, Point), Vec<&Measurement>> = BTreeMap::new();
    // 2:4 is V:N:M with M = 4 for any V, so its space spans every V measured at M = 4.
    let mut nm24: BTreeMap<(usize, usize, usize), Vec<&Measurement>> = BTreeMap::new();
    for m in &measurements {
        groups.entry((&m.kind, m.point)).or_default().push(m);
        let (rows, cols, n, _, mm) = m.point;
        if m.kind == "vnm" && mm == 4 {
            nm24.entry((rows, cols, n)).or_default().push(m);
        }
    }
    let mut check = ModelCheck {
        vnm_points: 0,
        vnm_regret_10pct: vec![],
        vnm_regret_first: vec![],
        vnm_spearman: vec![],
        csr_regret_first: vec![],
        nm24_regret_first: vec![],
        wgmma_regret_10pct: vec![],
        wgmma_regret_first: vec![],
        wgmma_spearman: vec![],
    };
    let invalid = |kind: &str, rows, cols| {
        format!("{kind} {rows}x{cols}: a configuration is not a valid point of its kernel")
    };
    for ((kind, point), configs) in &groups {
        let (rows, cols, n, _, m) = *point;
        let meas: Vec<f64> = configs.iter().map(|c| c.median_us).collect();
        let pred: Option<Vec<f64>> = match *kind {
            "vnm" => predict_vnm(configs, (rows, cols, n, m), gpu),
            "csr_f32" => configs
                .iter()
                .map(|c| {
                    let cfg = CsrConfig::from_point(&as_point(&c.params)).ok()?;
                    // The benchmark runs CSR at the density of 2:m.
                    Some(csr_cycles(&cfg, rows, rows * cols * 2 / m.max(1), n, gpu))
                })
                .collect(),
            "wgmma" => configs
                .iter()
                .map(|c| {
                    let cfg = WgmmaConfig::from_point(&as_point(&c.params)).ok()?;
                    Some(wgmma_cycles(&cfg, (rows, cols, m), n, gpu))
                })
                .collect(),
            _ => continue,
        };
        let pred = pred.ok_or_else(|| invalid(kind, rows, cols))?;
        if pred.len() < 2 {
            continue;
        }
        let budget = (pred.len() as f64 * 0.1).round() as usize;
        let scores = [
            regret_at_budget(&pred, &meas, budget),
            regret_at_budget(&pred, &meas, 1),
            spearman(&pred, &meas),
        ];
        let lists = match *kind {
            "vnm" => {
                check.vnm_points += 1;
                Some([
                    &mut check.vnm_regret_10pct,
                    &mut check.vnm_regret_first,
                    &mut check.vnm_spearman,
                ])
            }
            "wgmma" => Some([
                &mut check.wgmma_regret_10pct,
                &mut check.wgmma_regret_first,
                &mut check.wgmma_spearman,
            ]),
            _ => None,
        };
        if let Some(lists) = lists {
            for (list, score) in lists.into_iter().zip(scores) {
                list.push(score);
            }
        } else {
            check
                .csr_regret_first
                .push(regret_at_budget(&pred, &meas, 1));
        }
    }
    for ((rows, cols, n), configs) in &nm24 {
        let heights = configs.iter().map(|c| c.point.3).collect::<BTreeSet<_>>();
        if heights.len() < 2 {
            continue;
        }
        let pred = predict_vnm(configs, (*rows, *cols, *n, 4), gpu)
            .ok_or_else(|| invalid("vnm", *rows, *cols))?;
        let meas: Vec<f64> = configs.iter().map(|c| c.median_us).collect();
        check
            .nm24_regret_first
            .push(regret_at_budget(&pred, &meas, 1));
    }
    Ok(check)
}

/// Mean, smallest and largest of some per-point figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Mean (NaN when empty).
    pub mean: f64,
    /// Smallest (+∞ when empty).
    pub min: f64,
    /// Largest (−∞ when empty).
    pub max: f64,
}

/// The [`Spread`] of `x`.
pub fn spread(x: &[f64]) -> Spread {
    Spread {
        mean: x.iter().sum::<f64>() / x.len() as f64,
        min: x.iter().cloned().fold(f64::INFINITY, f64::min),
        max: x.iter().cloned().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// One line of a ranking's scores: its regret at a 10 % budget and of its first choice (as
/// percentages), and its Spearman correlation.
fn ranking_line(
    f: &mut std::fmt::Formatter<'_>,
    label: &str,
    points: usize,
    (r10, first, rho): (&[f64], &[f64], &[f64]),
) -> std::fmt::Result {
    let (r10, first, rho) = (spread(r10), spread(first), spread(rho));
    write!(
        f,
        "{label}, {points} points: regret at a 10 % budget mean {:.2} % max {:.2} %; first \
         choice mean {:.2} % max {:.2} %; Spearman mean {:.2} min {:.2}",
        100.0 * r10.mean,
        100.0 * r10.max,
        100.0 * first.mean,
        100.0 * first.max,
        rho.mean,
        rho.min,
    )
}

impl std::fmt::Display for ModelCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        ranking_line(
            f,
            "V:N:M",
            self.vnm_points,
            (
                &self.vnm_regret_10pct,
                &self.vnm_regret_first,
                &self.vnm_spearman,
            ),
        )?;
        let csr = spread(&self.csr_regret_first);
        writeln!(
            f,
            "\nCSR, {} points: first choice mean {:.2} % max {:.2} %",
            self.csr_regret_first.len(),
            100.0 * csr.mean,
            100.0 * csr.max,
        )?;
        let nm24 = spread(&self.nm24_regret_first);
        write!(
            f,
            "2:4 with BM tuned, {} points: first choice mean {:.2} % max {:.2} %",
            self.nm24_regret_first.len(),
            100.0 * nm24.mean,
            100.0 * nm24.max,
        )?;
        if self.wgmma_regret_first.is_empty() {
            return Ok(());
        }
        writeln!(f)?;
        ranking_line(
            f,
            "Hopper wgmma (unfitted prior)",
            self.wgmma_regret_first.len(),
            (
                &self.wgmma_regret_10pct,
                &self.wgmma_regret_first,
                &self.wgmma_spearman,
            ),
        )
    }
}
