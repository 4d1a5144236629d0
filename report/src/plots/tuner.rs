//! The kernel tuner: its cost model's predictions against the measured latencies, and the
//! regret a budget of a fraction of each tuning's configurations would have had.

use crate::figure::{colour, log_axis, log_label, DrawError, Plot};
use crate::input::{num, ok, text, Experiment};
use crate::regret::{budget_count, model_regret, random_regret};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;

/// Budgets (fractions of a tuning's measured configurations) the regret is shown at.
pub const BUDGETS: [f64; 7] = [0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0];

/// A tuning's measured configurations: (predicted cost s, the analytical model's alone s,
/// measured latency µs). Without a calibration the two predictions are equal.
pub type Tuning = Vec<(f64, f64, f64)>;

/// The measured, predicted, non-baseline configurations of each tuning (by `key`), with the
/// format's pattern; tunings of fewer than 4 configurations are left out.
pub fn tunings(exp: &Experiment) -> BTreeMap<String, (String, Tuning)> {
    let mut out: BTreeMap<String, (String, Tuning)> = BTreeMap::new();
    for r in exp.kernel_tune.iter().filter(|r| ok(r)) {
        let baseline = matches!(r.get("baseline"), Some(results::Value::Bool(true)));
        let (p, m) = (num(r, "predicted_cost_s"), num(r, "latency_us_median"));
        if baseline || !(p.is_finite() && m.is_finite() && m > 0.0) {
            continue;
        }
        // Rows written before calibration existed have no analytical column: theirs was it.
        let a = Some(num(r, "analytical_cost_s"))
            .filter(|a| a.is_finite())
            .unwrap_or(p);
        let (Some(key), pattern) = (text(r, "key"), text(r, "format.pattern").unwrap_or("?"))
        else {
            continue;
        };
        let e = out
            .entry(key.to_string())
            .or_insert_with(|| (pattern.to_string(), vec![]));
        e.1.push((p, a, m));
    }
    out.retain(|_, (_, t)| t.len() >= 4);
    out
}

/// Regret at one budget over all tunings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RegretRow {
    /// Fraction of each tuning's configurations measured.
    pub budget: f64,
    /// The ranking model's top k (calibrated where the tunings were): mean and worst.
    pub model: (f64, f64),
    /// The analytical model's top k alone: mean and worst.
    pub analytical: (f64, f64),
    /// k at random: mean (exact expectation).
    pub random: f64,
    /// The configurations measured at this budget, mean over the tunings (at least 1 each:
    /// small tunings reach the same k at several budgets).
    pub k: f64,
}

/// Whether any tuning ranked with a calibration (its predictions differ from the analytical).
pub fn calibrated(tunings: &BTreeMap<String, (String, Tuning)>) -> bool {
    tunings
        .values()
        .flat_map(|(_, t)| t)
        .any(|&(p, a, _)| p != a)
}

/// Regret per budget over all tunings.
pub fn regret_table(tunings: &BTreeMap<String, (String, Tuning)>) -> Vec<RegretRow> {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let summary = |v: Vec<f64>| (mean(&v), v.iter().copied().fold(0.0, f64::max));
    BUDGETS
        .iter()
        .map(|&budget| {
            let top = |pick: fn(&(f64, f64, f64)) -> f64| -> Vec<f64> {
                tunings
                    .values()
                    .map(|(_, t)| {
                        let pm: Vec<(f64, f64)> = t.iter().map(|x| (pick(x), x.2)).collect();
                        model_regret(&pm, budget_count(budget, t.len()))
                    })
                    .collect()
            };
            let random: Vec<f64> = tunings
                .values()
                .map(|(_, t)| {
                    let l: Vec<f64> = t.iter().map(|p| p.2).collect();
                    random_regret(&l, budget_count(budget, l.len()))
                })
                .collect();
            let k: Vec<f64> = tunings
                .values()
                .map(|(_, t)| budget_count(budget, t.len()) as f64)
                .collect();
            RegretRow {
                budget,
                k: mean(&k),
                model: summary(top(|x| x.0)),
                analytical: summary(top(|x| x.1)),
                random: mean(&random),
            }
        })
        .collect()
}

/// Whether the rows come from exhaustive tunings (then the regret is the strategies' own).
pub fn exhaustive(exp: &Experiment) -> bool {
    exp.kernel_tune
        .iter()
        .all(|r| text(r, "kernel_tune.strategy").is_none_or(|s| s == "exhaustive"))
}

/// Predicted against measured, coloured by pattern.
pub struct Calibration {
    by_pattern: BTreeMap<String, Vec<(f64, f64)>>,
}

impl Calibration {
    /// `Err(why)` when no tuning measured four configurations with predictions.
    pub fn new(exp: &Experiment) -> Result<Calibration, String> {
        let mut by_pattern: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for (pattern, t) in tunings(exp).into_values() {
            let pm = t.into_iter().map(|(p, _, m)| (p, m));
            by_pattern.entry(pattern).or_default().extend(pm);
        }
        if by_pattern.is_empty() {
            return Err(
                "no kernel tuning with four or more measured configurations and predicted costs"
                    .into(),
            );
        }
        Ok(Calibration { by_pattern })
    }
}

impl Plot for Calibration {
    fn name(&self) -> String {
        "tuner_calibration".into()
    }
    fn title(&self) -> String {
        "Kernel tuner: predicted cost against measured latency".into()
    }
    fn caption(&self) -> String {
        "One point per measured configuration (dense baselines left out): the cost model's predicted seconds (calibrated on the device where the \
         tunings were) against the measured median latency, log–log, by format. A model that ranks well keeps each format's points on a rising line."
            .into()
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let all = || self.by_pattern.values().flatten();
        let x = log_axis(
            all().map(|p| p.0 * 1e6).fold(f64::INFINITY, f64::min),
            all().map(|p| p.0 * 1e6).fold(0.0, f64::max),
        );
        let y = log_axis(
            all().map(|p| p.1).fold(f64::INFINITY, f64::min),
            all().map(|p| p.1).fold(0.0, f64::max),
        );
        let mut chart = ChartBuilder::on(root)
            .caption(self.title(), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x, y)?;
        chart
            .configure_mesh()
            .x_desc("predicted cost (µs, log scale)")
            .y_desc("measured latency (µs, log scale)")
            .x_label_formatter(&log_label)
            .y_label_formatter(&log_label)
            .light_line_style(WHITE)
            .draw()?;
        for (i, (pattern, points)) in self.by_pattern.iter().enumerate() {
            let c = colour(i);
            chart
                .draw_series(points.iter().map(|&(p, m)| {
                    Circle::new(((p * 1e6).log10(), m.log10()), 3, c.mix(0.7).filled())
                }))?
                .label(pattern.clone())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, c.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}

/// Which column of a [`RegretRow`] a line draws.
type Pick = fn(&RegretRow) -> f64;

/// Regret against budget for the model and random strategies.
pub struct Regret {
    table: Vec<RegretRow>,
    tunings: usize,
    exhaustive: bool,
    calibrated: bool,
}

impl Regret {
    /// `Err(why)` when no tuning measured four configurations with predictions.
    pub fn new(exp: &Experiment) -> Result<Regret, String> {
        let t = tunings(exp);
        if t.is_empty() {
            return Err(
                "no kernel tuning with four or more measured configurations and predicted costs"
                    .into(),
            );
        }
        Ok(Regret {
            table: regret_table(&t),
            tunings: t.len(),
            exhaustive: exhaustive(exp),
            calibrated: calibrated(&t),
        })
    }
}

impl Plot for Regret {
    fn name(&self) -> String {
        "tuner_regret".into()
    }
    fn title(&self) -> String {
        "Kernel tuner: regret against budget".into()
    }
    fn caption(&self) -> String {
        let mut c = format!(
            "Over {} tunings: measuring only the cost model's top k configurations (mean and worst), or k drawn at random (exact expectation), \
             k a fraction of each tuning's measured configurations (at least one); regret = best found / best measured − 1, so 0 at 100 %.",
            self.tunings
        );
        if self.calibrated {
            c.push_str(
                " The tunings ranked with the cost model calibrated on this device; the analytical model's lines are the same ranking without its calibration.",
            );
        }
        if !self.exhaustive {
            c.push_str(
                " These tunings were not exhaustive: the configurations they measured were already chosen by their strategy, \
                 so the regret is relative to the best of those and understates the true one (run experiments/repro/tuner-regret for the real curve).",
            );
        }
        c
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let pct = |x: f64| x * 100.0;
        let y1 = self
            .table
            .iter()
            .map(|r| {
                let a = if self.calibrated { r.analytical.1 } else { 0.0 };
                r.model.1.max(r.random).max(a)
            })
            .fold(0.01, f64::max);
        let mut chart = ChartBuilder::on(root)
            .caption(self.title(), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(log_axis(BUDGETS[0] * 100.0, 100.0), 0.0..pct(y1) * 1.1)?;
        chart
            .configure_mesh()
            .x_desc("budget (% of the configurations, log scale)")
            .y_desc("regret (%)")
            .x_label_formatter(&log_label)
            .light_line_style(WHITE)
            .draw()?;
        let model = if self.calibrated {
            "calibrated model"
        } else {
            "model"
        };
        let mut lines: Vec<(String, Pick, RGBColor)> = vec![
            (format!("{model}, mean"), |r| r.model.0, colour(0)),
            (format!("{model}, worst"), |r| r.model.1, colour(3)),
            ("random, mean".into(), |r| r.random, colour(7)),
        ];
        if self.calibrated {
            lines.push((
                "analytical model, mean".into(),
                |r| r.analytical.0,
                colour(1),
            ));
            lines.push((
                "analytical model, worst".into(),
                |r| r.analytical.1,
                colour(4),
            ));
        }
        for (name, pick, c) in lines {
            let points: Vec<(f64, f64)> = self
                .table
                .iter()
                .map(|r| (pct(r.budget).log10(), pct(pick(r))))
                .collect();
            chart
                .draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(2)))?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, c.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A calibrated tuning's regret is read from its ranking cost, the analytical columns from
    /// its analytical cost, on the same measurements; uncalibrated tunings are not "calibrated".
    #[test]
    fn the_calibrated_and_the_analytical_rankings_are_scored_apart() {
        // Measured 1..4 µs; the calibrated cost ranks the fastest first, the analytical last.
        let t: Tuning = vec![
            (1.0, 4.0, 1.0),
            (2.0, 3.0, 2.0),
            (3.0, 2.0, 3.0),
            (4.0, 1.0, 4.0),
        ];
        let tunings: BTreeMap<String, (String, Tuning)> =
            [("k".to_string(), ("vnm".to_string(), t.clone()))].into();
        assert!(calibrated(&tunings));
        let first = regret_table(&tunings)[0];
        assert_eq!(first.model, (0.0, 0.0));
        assert_eq!(first.analytical, (3.0, 3.0));
        let plain: Tuning = t.iter().map(|&(p, _, m)| (p, p, m)).collect();
        let uncalibrated: BTreeMap<String, (String, Tuning)> =
            [("k".to_string(), ("vnm".to_string(), plain))].into();
        assert!(!calibrated(&uncalibrated));
        assert_eq!(regret_table(&uncalibrated)[0].analytical, (0.0, 0.0));
    }
}
