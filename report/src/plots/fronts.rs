//! The Pareto fronts of several experiments on one plane (grid against unified search, or
//! any experiments that share a task): accuracy against the latency each front compared.

use crate::figure::{accuracy_chart, colour, DrawError, Plot};
use crate::input::{num, text, Experiment};
use plotters::coord::Shift;
use plotters::prelude::*;
use results::Row;
use std::collections::BTreeMap;

/// The fronts plot.
pub struct Fronts {
    /// Experiment name → its front's (latency µs, accuracy).
    series: Vec<(String, Vec<(f64, f64)>)>,
}

impl Fronts {
    /// From each experiment's pareto.parquet; `Err(why)` when fewer than two have a front.
    ///
    /// Each front's rows are placed at the latency the experiments' evaluations give them
    /// *together* ([`results::measured_points`] over all of their rows): each experiment's own
    /// `front.latency_us` divides by the median dense latency of its own rows, so one
    /// measurement shown by two experiments would land 2–5 % apart (regression).
    pub fn new(experiments: &[Experiment]) -> Result<Fronts, String> {
        // Each evaluation once, however many experiments show it (a cached one is the same row).
        let mut seen = std::collections::BTreeSet::new();
        let pooled: Vec<&Row> = experiments
            .iter()
            .flat_map(|e| e.evaluate.iter().filter(|r| crate::input::ok(r)))
            .filter(|r| text(r, "key").is_none_or(|k| seen.insert(k)))
            .collect();
        let latency: BTreeMap<&str, f64> = pooled
            .iter()
            .zip(results::measured_points(&pooled))
            .filter_map(|(r, m)| text(r, "key").map(|k| (k, m.objectives.latency_us)))
            .collect();
        let series: Vec<(String, Vec<(f64, f64)>)> = experiments
            .iter()
            .map(|e| {
                let points: Vec<(f64, f64)> = e
                    .pareto
                    .iter()
                    .map(|r| {
                        let own = num(r, "front.latency_us");
                        let l = text(r, "key").and_then(|k| latency.get(k)).copied();
                        (l.unwrap_or(own), num(r, "accuracy"))
                    })
                    .filter(|(l, a)| l.is_finite() && *l > 0.0 && a.is_finite())
                    .collect();
                (e.name.clone(), points)
            })
            .filter(|(_, p)| !p.is_empty())
            .collect();
        if series.len() < 2 {
            return Err("fewer than two experiments with a Pareto front".into());
        }
        Ok(Fronts { series })
    }
}

impl Plot for Fronts {
    fn name(&self) -> String {
        "fronts".into()
    }
    fn title(&self) -> String {
        "Pareto fronts of the experiments".into()
    }
    fn caption(&self) -> String {
        "Each experiment's front (pareto.parquet), accuracy against the latency of its paired speedup: the median dense latency of all the \
         experiments' rows timed against the same dense model, over the row's speedup, so that a model measured once lands at one place in every front. Fronts of experiments on the same model and machine compare directly, \
         for example a grid search against a unified search of the same space; the third objective, weight bytes, is not drawn."
            .into()
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let all = || self.series.iter().flat_map(|(_, p)| p.iter());
        let mut chart =
            accuracy_chart(root, &self.title(), all().map(|p| p.0), all().map(|p| p.1))?;
        for (i, (name, points)) in self.series.iter().enumerate() {
            let c = colour(i);
            let lg: Vec<(f64, f64)> = points.iter().map(|&(l, a)| (l.log10(), a)).collect();
            // Points only: a line through a three-objective front would zig-zag in this plane.
            chart
                .draw_series(lg.iter().map(|&p| Circle::new(p, 5, c.mix(0.8).filled())))?
                .label(name.clone())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, c.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::Value;

    /// An evaluate row measured against dense model `d`.
    fn eval(key: &str, dense_us: f64, speedup: f64) -> Row {
        let mut r = Row::new();
        for (k, v) in [
            ("key", Value::Str(key.into())),
            ("status", Value::Str("ok".into())),
            ("dense_model", Value::Str("d".into())),
            ("accuracy", Value::F64(0.9)),
            ("dense_latency_us", Value::F64(dense_us)),
            ("latency_us_median", Value::F64(dense_us / speedup)),
            ("speedup_vs_dense", Value::F64(speedup)),
            ("speedup_ci_lo", Value::F64(speedup * 0.99)),
            ("speedup_ci_hi", Value::F64(speedup * 1.01)),
        ] {
            r.insert(k.into(), v);
        }
        r
    }

    /// Regression: each experiment's front divided by its own rows' median dense latency, so
    /// one cached measurement appeared at two latencies in two experiments' fronts.
    #[test]
    fn one_measurement_lands_at_one_latency_in_every_front() {
        let shared = eval("shared", 200.0, 2.0);
        // Every row on the front, at the latency its run gave it (as `aggregates` does).
        let experiment = |name: &str, others: &[Row]| {
            let mut e = Experiment {
                name: name.into(),
                ..Default::default()
            };
            e.evaluate = std::iter::once(&shared).chain(others).cloned().collect();
            let rows: Vec<&Row> = e.evaluate.iter().collect();
            for (r, m) in rows.iter().zip(results::measured_points(&rows)) {
                let mut front = (*r).clone();
                let l = Value::F64(m.objectives.latency_us);
                front.insert("front.latency_us".into(), l);
                e.pareto.push(front);
            }
            e
        };
        let a = experiment("a", &[eval("a1", 210.0, 1.5), eval("a2", 220.0, 1.2)]);
        let b = experiment("b", &[eval("b1", 150.0, 3.0)]);
        let fronts = Fronts::new(&[a, b]).unwrap();
        let at = |i: usize| fronts.series[i].1[0].0;
        assert_eq!(at(0), at(1));
        // Pooled, each evaluation once: the median of 200, 210, 220, 150 over the speedup.
        assert_eq!(at(0), 210.0 / 2.0);
    }
}
