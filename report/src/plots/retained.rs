//! Retained L1 per pruning point (VENOM Fig. 11's measure), from the layer study or prune rows.

use crate::figure::{bar_chart, bar_rows, colour, DrawError, Plot};
use crate::input::{model_labels, num, ok, point_label, Experiment};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;

/// The retained-L1 bars.
pub struct Retained {
    /// Label → mean retained L1 over its rows, in first-seen order.
    bars: Vec<(String, f64)>,
    source: &'static str,
}

/// (label, retained L1) per pruning point of the layer study (its `point_retained_l1`, else
/// the mean of its rows' `retained_l1`) or else per prune row, labelled by [`model_labels`]
/// (entries of one pattern that differ in config apart), sorted by retained L1, highest first.
pub fn retained_l1(exp: &Experiment) -> (Vec<(String, f64)>, &'static str) {
    let (rows, source) = if exp
        .layer_study
        .iter()
        .any(|r| num(r, "retained_l1").is_finite())
    {
        (&exp.layer_study, "layer_study")
    } else {
        (&exp.prune, "prune")
    };
    // Per entry (a study's tensor rows share its key), then per label: labels tell apart the
    // entries of one pattern that differ in their config (two trainings, say).
    let labels = model_labels(rows);
    let mut per_entry: BTreeMap<String, (String, f64, usize)> = BTreeMap::new();
    for r in rows.iter().filter(|r| ok(r)) {
        // A layer study's rows are its tensors: each carries its point's retained L1 over
        // them, weighted by each tensor's L1 (as a prune row weighs its layers).
        let point = num(r, "point_retained_l1");
        let x = if point.is_finite() {
            point
        } else {
            num(r, "retained_l1")
        };
        if x.is_finite() && crate::input::text(r, "prune.pattern") != Some("dense") {
            let key = crate::input::text(r, "key");
            let label = key
                .and_then(|k| labels.get(k).cloned())
                .unwrap_or_else(|| point_label(r));
            let e = per_entry
                .entry(key.map_or_else(|| label.clone(), str::to_string))
                .or_insert((label, 0.0, 0));
            e.1 += x;
            e.2 += 1;
        }
    }
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for (label, s, n) in per_entry.into_values() {
        let e = sums.entry(label).or_default();
        e.0 += s / n as f64;
        e.1 += 1;
    }
    let mut bars: Vec<(String, f64)> = sums
        .into_iter()
        .map(|(l, (s, n))| (l, s / n as f64))
        .collect();
    bars.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    (bars, source)
}

impl Retained {
    /// `Err(why)` when no row has a retained L1.
    pub fn new(exp: &Experiment) -> Result<Retained, String> {
        let (bars, source) = retained_l1(exp);
        if bars.is_empty() {
            return Err("no pruned row with retained_l1".into());
        }
        Ok(Retained { bars, source })
    }
}

impl Plot for Retained {
    fn name(&self) -> String {
        "retained_l1".into()
    }
    fn title(&self) -> String {
        "Retained L1 norm per pruning point".into()
    }
    fn caption(&self) -> String {
        format!(
            "‖W ⊙ mask‖₁ / ‖W‖₁ after pruning, before any fine-tuning (VENOM Fig. 11's measure), {}.",
            if self.source == "layer_study" {
                "over each point's tensors, weighted by their L1 norms (point_retained_l1)"
            } else {
                "per pruned model (a prune row, over its layers, weighted by their L1 norms; models of one pattern named by the config that tells them apart)"
            }
        )
    }
    fn size(&self) -> (u32, u32) {
        (860, 120 + 26 * self.bars.len() as u32)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let n = self.bars.len();
        let labels: Vec<String> = self.bars.iter().map(|b| b.0.clone()).collect();
        let mut chart = bar_chart(root, &self.title(), &labels, 0.0..1.0, "retained L1", 190)?;
        for (i, (_, v)) in self.bars.iter().enumerate() {
            let (y0, y1, centre) = bar_rows(i, n);
            let mut rect = Rectangle::new([(0.0, y0), (*v, y1)], colour(0).filled());
            rect.set_margin(4, 4, 0, 0);
            chart.draw_series(std::iter::once(rect))?;
            chart.draw_series(std::iter::once(Text::new(
                format!("{v:.3}"),
                (*v + 0.01, centre),
                ("sans-serif", 12),
            )))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use results::{Row, Value};

    /// A layer study's point is its `point_retained_l1` (weighted by L1), not the mean of its
    /// tensors' rows; prune rows are averaged.
    #[test]
    fn a_study_point_is_its_weighted_retained_l1() {
        let row = |pattern: &str, l1: f64, point: Option<f64>| -> Row {
            let mut r: Row = [
                ("status", Value::Str("ok".into())),
                ("prune.pattern", Value::Str(pattern.into())),
                ("prune.n", Value::I64(2)),
                ("prune.m", Value::I64(8)),
                ("retained_l1", Value::F64(l1)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            if let Some(p) = point {
                r.insert("point_retained_l1".into(), Value::F64(p));
            }
            r
        };
        let exp = Experiment {
            layer_study: vec![row("nm", 0.2, Some(0.5)), row("nm", 1.0, Some(0.5))],
            ..Default::default()
        };
        let (bars, source) = retained_l1(&exp);
        assert_eq!(source, "layer_study");
        assert_eq!(bars.len(), 1);
        assert_eq!(bars[0].1, 0.5);
        let exp = Experiment {
            prune: vec![row("nm", 0.25, None), row("nm", 0.75, None)],
            ..Default::default()
        };
        assert_eq!(retained_l1(&exp).0[0].1, 0.5);
    }
}
