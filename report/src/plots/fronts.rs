//! The Pareto fronts of several experiments on one plane (grid against unified search, or
//! any experiments that share a task): accuracy against the latency each front compared.

use crate::figure::{accuracy_chart, colour, DrawError, Plot};
use crate::input::{num, Experiment};
use plotters::coord::Shift;
use plotters::prelude::*;

/// The fronts plot.
pub struct Fronts {
    /// Experiment name → its front's (latency µs, accuracy).
    series: Vec<(String, Vec<(f64, f64)>)>,
}

impl Fronts {
    /// From each experiment's pareto.parquet; `Err(why)` when fewer than two have a front.
    pub fn new(experiments: &[Experiment]) -> Result<Fronts, String> {
        let series: Vec<(String, Vec<(f64, f64)>)> = experiments
            .iter()
            .map(|e| {
                let points: Vec<(f64, f64)> = e
                    .pareto
                    .iter()
                    .map(|r| (num(r, "front.latency_us"), num(r, "accuracy")))
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
        "Each experiment's front (pareto.parquet), accuracy against the latency its front compared (the median dense latency of its rows \
         over each row's paired speedup). Fronts of experiments on the same model and machine compare directly, \
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
