//! Accuracy against latency, every successful evaluation, the Pareto front highlighted.

use crate::figure::{accuracy_chart, DrawError, Plot};
use crate::input::{num, text, Experiment};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;

/// One trial as the plot shows it.
#[derive(Debug, Clone)]
pub struct Point {
    /// Its pruning point.
    pub label: String,
    /// Accuracy.
    pub accuracy: f64,
    /// Latency the front compares (µs), with its interval.
    pub latency: (f64, f64, f64),
    /// Weight bytes.
    pub bytes: f64,
    /// On the front; and there a possible tie.
    pub front: Option<bool>,
}

/// The Pareto-front plot.
pub struct Pareto {
    points: Vec<Point>,
}

impl Pareto {
    /// From the evaluate rows and pareto.parquet; `Err(why)` when there is nothing to plot.
    pub fn new(exp: &Experiment) -> Result<Pareto, String> {
        let rows: Vec<&results::Row> = exp
            .evaluate
            .iter()
            .filter(|r| crate::input::ok(r))
            .collect();
        let front: BTreeMap<&str, bool> = exp
            .pareto
            .iter()
            .filter_map(|r| {
                let tie = matches!(r.get("front.tie"), Some(results::Value::Bool(true)));
                text(r, "key").map(|k| (k, tie))
            })
            .collect();
        let measured = results::measured_points(&rows);
        let points: Vec<Point> = rows
            .iter()
            .zip(&measured)
            .map(|(r, m)| Point {
                label: exp.model_label(r),
                accuracy: m.objectives.accuracy,
                latency: (m.objectives.latency_us, m.latency_lo, m.latency_hi),
                bytes: num(r, "weight_bytes"),
                front: text(r, "key").and_then(|k| front.get(k).copied()),
            })
            .filter(|p| p.accuracy.is_finite() && p.latency.0.is_finite() && p.latency.0 > 0.0)
            .collect();
        if points.is_empty() {
            return Err("no successful evaluate rows with accuracy and latency".into());
        }
        Ok(Pareto { points })
    }
}

impl Plot for Pareto {
    fn name(&self) -> String {
        "pareto".into()
    }
    fn title(&self) -> String {
        "Accuracy against latency: the Pareto front".into()
    }
    fn caption(&self) -> String {
        "Every successful evaluation (grey), the front (red, labelled; orange where another trial may dominate it within the measured spread). \
         Latency is the one the front compares: the median dense latency of the rows measured against the same dense model over the row's paired speedup, \
         the bar its 95 % interval. Point size grows with weight bytes."
            .into()
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        // The axis holds every point's interval as well as the point.
        let latencies = self
            .points
            .iter()
            .flat_map(|p| [p.latency.0, p.latency.1, p.latency.2])
            .filter(|l| l.is_finite() && *l > 0.0);
        let accuracies = self.points.iter().map(|p| p.accuracy);
        let max_bytes = self.points.iter().map(|p| p.bytes).fold(1.0, f64::max);
        let mut chart = accuracy_chart(root, &self.title(), latencies, accuracies)?;
        let lg = f64::log10;
        let radius = |p: &Point| {
            let r = if p.bytes.is_finite() {
                (p.bytes / max_bytes).sqrt()
            } else {
                0.5
            };
            (3.0 + 6.0 * r) as i32
        };
        let grey = RGBColor(150, 150, 150);
        let colour = |p: &Point| match p.front {
            Some(true) => RGBColor(255, 140, 0),
            Some(false) => RGBColor(214, 39, 40),
            None => grey,
        };
        for p in &self.points {
            let (l, a, b) = p.latency;
            if a.is_finite() && b.is_finite() && b > a {
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(lg(a), p.accuracy), (lg(b), p.accuracy)],
                    colour(p).mix(0.6).stroke_width(1),
                )))?;
            }
            let style = if p.front.is_some() {
                colour(p).filled()
            } else {
                grey.stroke_width(1)
            };
            chart.draw_series(std::iter::once(Circle::new(
                (lg(l), p.accuracy),
                radius(p),
                style,
            )))?;
        }
        // Labels only: the front is over three objectives (weight bytes too), so a line
        // through it in this plane would zig-zag.
        let front = self.points.iter().filter(|p| p.front.is_some());
        for p in front {
            let at = EmptyElement::at((lg(p.latency.0), p.accuracy));
            let label = Text::new(
                p.label.clone(),
                (8, -14),
                ("sans-serif", 13).into_font().color(&BLACK),
            );
            chart.draw_series(std::iter::once(at + label))?;
        }
        Ok(())
    }
}
