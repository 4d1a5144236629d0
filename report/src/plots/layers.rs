//! Per-layer latency of the front's models: each sparse GEMM, and everything else, stacked.

use crate::figure::{bar_chart, bar_rows, colour, DrawError, Plot};
use crate::input::{dense_run_layers, floats, is_config_column, num, strings, text, Experiment};
use plotters::coord::Shift;
use plotters::prelude::*;

/// One bar: a model's layers' latencies and its non-GEMM time (µs).
#[derive(Debug, Clone)]
pub struct Bar {
    /// The model.
    pub label: String,
    /// Each layer's GEMM latency.
    pub layers: Vec<f64>,
    /// The rest of the pass.
    pub rest: f64,
}

/// The per-layer bars.
pub struct Layers {
    bars: Vec<Bar>,
    /// The layers' names (`layer_names`; empty in rows from before 2026-12-06).
    names: Vec<String>,
}

impl Layers {
    /// The front's rows (pareto.parquet) and, first, the dense model the first was measured
    /// against. `Err(why)` when the rows carry no per-layer latencies.
    pub fn new(exp: &Experiment) -> Result<Layers, String> {
        let mut rows: Vec<&results::Row> = exp
            .pareto
            .iter()
            .filter(|r| !floats(r, "layer_latency_us").is_empty())
            .collect();
        if rows.is_empty() {
            return Err("no front row with per-layer latencies (layer_latency_us)".into());
        }
        rows.sort_by(|a, b| num(a, "front.latency_us").total_cmp(&num(b, "front.latency_us")));
        let rest = |r: &results::Row| {
            let x = num(r, "non_gemm_us");
            if x.is_finite() {
                x
            } else {
                0.0
            }
        };
        let mut bars = vec![];
        let dense = floats(rows[0], "layer_dense_latency_us");
        if !dense.is_empty() {
            // The rest of the dense pass is the dense model's own evaluation's (its "sparse"
            // pass is the dense model), not the first front model's sparse pass: the dense
            // evaluation of the same training, architecture and backend.
            let dense_row = exp.evaluate.iter().find(|r| {
                crate::input::ok(r)
                    && text(r, "prune.pattern") == Some("dense")
                    && text(r, "dense_model").is_some()
                    && text(r, "dense_model") == text(rows[0], "dense_model")
                    && same_model_config(r, rows[0])
            });
            let (label, rest) = match dense_row.map(|d| num(d, "non_gemm_us")) {
                Some(x) if x.is_finite() => ("dense (reference)", x),
                _ => ("dense (reference, GEMMs only)", 0.0),
            };
            bars.push(Bar {
                label: label.into(),
                layers: dense.to_vec(),
                rest,
            });
        }
        bars.extend(rows.iter().take(12).map(|r| ran(exp, r, rest(r))));
        let names = strings(rows[0], "layer_names").to_vec();
        Ok(Layers { bars, names })
    }
}

/// Whether `a` and `b` share their data set, model, training, seed and evaluate backend (the
/// config columns outside `prune.*`).
fn same_model_config(a: &results::Row, b: &results::Row) -> bool {
    a.keys()
        .chain(b.keys())
        .filter(|c| is_config_column(c) && !c.starts_with("prune."))
        .all(|c| a.get(c) == b.get(c))
}

/// A front model's bar: each layer as it ran in the pass, its sparse kernel's latency or, for a
/// layer run dense (`[evaluate] dense_where_faster`), its dense kernel's, named in the label.
fn ran(exp: &Experiment, r: &results::Row, rest: f64) -> Bar {
    let dense_run = dense_run_layers(r);
    let names = strings(r, "layer_names");
    let dense = floats(r, "layer_dense_latency_us");
    let layers = floats(r, "layer_latency_us")
        .iter()
        .enumerate()
        .map(|(j, &l)| match (names.get(j), dense.get(j)) {
            (Some(name), Some(&d)) if dense_run.contains(name) => d,
            _ => l,
        })
        .collect();
    let mut label = exp.model_label(r);
    // Named while they fit the label's room, counted past that (a transformer's).
    match dense_run.len() {
        0 => {}
        1..=3 => label = format!("{label} ({} dense)", dense_run.join(", ")),
        k => label = format!("{label} ({k} layers dense)"),
    }
    Bar {
        label,
        layers,
        rest,
    }
}

impl Plot for Layers {
    fn name(&self) -> String {
        "layer_latency".into()
    }
    fn title(&self) -> String {
        "Where the front's models spend their time".into()
    }
    fn caption(&self) -> String {
        "Per model on the front (fastest first, at most 12), each prunable layer's GEMM latency as tuned (with its fused bias and \
         ReLU), then the rest of the pass (non_gemm_us: im2col, pooling, norms, attention, activations other than ReLU) in grey. \
         The first bar is the dense model's layers, timed beside the fastest front model's, and the rest of the dense model's own pass. A layer that \
         ran dense ([evaluate] dense_where_faster) is drawn at its dense kernel's latency and named in its model's label."
            .into()
    }
    fn size(&self) -> (u32, u32) {
        (860, 120 + 34 * self.bars.len() as u32)
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let total = |b: &Bar| b.layers.iter().sum::<f64>() + b.rest;
        // Room on the right for the legend (lower right: the dense bar, often the longest, is on top).
        let x1 = self.bars.iter().map(total).fold(1e-9, f64::max) * 1.6;
        let n = self.bars.len();
        let labels: Vec<String> = self.bars.iter().map(|b| b.label.clone()).collect();
        let mut chart = bar_chart(root, &self.title(), &labels, 0.0..x1, "latency (µs)", 170)?;
        let max_layers = self.bars.iter().map(|b| b.layers.len()).max().unwrap_or(0);
        for (i, bar) in self.bars.iter().enumerate() {
            let (y0, y1, _) = bar_rows(i, n);
            let mut x = 0.0;
            let segments = bar
                .layers
                .iter()
                .enumerate()
                .map(|(j, &l)| (l, colour(j)))
                .chain(std::iter::once((bar.rest, RGBColor(190, 190, 190))));
            for (w, c) in segments {
                if w > 0.0 && w.is_finite() {
                    let mut rect =
                        Rectangle::new([(x, y0.clone()), (x + w, y1.clone())], c.filled());
                    rect.set_margin(5, 5, 0, 0);
                    chart.draw_series(std::iter::once(rect))?;
                    x += w;
                }
            }
        }
        let anchor = || EmptyElement::at((0.0, SegmentValue::Exact(0)));
        // One legend entry per layer while the palette has a colour for each; past that the
        // colours repeat and one entry says so.
        let named = if max_layers <= 10 { max_layers } else { 0 };
        for j in 0..named {
            let c = colour(j);
            chart
                .draw_series(std::iter::once(anchor()))?
                .label(match self.names.get(j) {
                    Some(name) => name.clone(),
                    None => format!("layer {}", j + 1),
                })
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        if named == 0 {
            chart
                .draw_series(std::iter::once(anchor()))?
                .label(format!("layers 1 … {max_layers} (colours repeat)"))
                .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour(0).filled()));
        }
        chart
            .draw_series(std::iter::once(anchor()))?
            .label("rest of the pass")
            .legend(|(x, y)| {
                Rectangle::new(
                    [(x, y - 5), (x + 12, y + 5)],
                    RGBColor(190, 190, 190).filled(),
                )
            });
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

    #[test]
    fn a_layer_run_dense_is_drawn_at_its_dense_latency_and_named() {
        let list = |v: &[f64]| Value::ListF64(v.to_vec());
        let names = |v: &[&str]| Value::ListStr(v.iter().map(|s| s.to_string()).collect());
        let mut r: results::Row = [
            ("prune.pattern", Value::Str("nm".into())),
            ("prune.n", Value::I64(2)),
            ("prune.m", Value::I64(4)),
            ("layer_names", names(&["fc0", "fc1", "head"])),
            ("layer_latency_us", list(&[10.0, 20.0, 30.0])),
            ("layer_dense_latency_us", list(&[15.0, 25.0, 12.0])),
            ("dense_layers_b1", names(&["fc0", "fc1"])),
            ("dense_layers_b256", names(&["head"])),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let bar = ran(&Experiment::default(), &r, 5.0);
        assert_eq!(
            bar.layers,
            [10.0, 20.0, 12.0],
            "at the largest batch, head ran dense"
        );
        assert_eq!(bar.label, "2:4 (head dense)");
        assert_eq!(bar.rest, 5.0);
        r.insert(
            "dense_layers_b256".into(),
            names(&["fc0", "fc1", "head", "x"]),
        );
        assert_eq!(
            ran(&Experiment::default(), &r, 5.0).label,
            "2:4 (4 layers dense)"
        );
        r.insert("dense_layers_b256".into(), names(&[]));
        let bar = ran(&Experiment::default(), &r, 5.0);
        assert_eq!(bar.layers, [10.0, 20.0, 30.0]);
        assert_eq!(bar.label, "2:4");
    }
    /// The dense bar's rest of the pass is the dense model's own (it was the first front
    /// model's sparse pass's), and without a dense evaluation the bar says it has none.
    #[test]
    fn the_dense_bar_carries_the_dense_models_own_rest() {
        let row = |pattern: &str, key: &str, rest: f64, backend: &str| -> results::Row {
            [
                ("key", Value::Str(key.into())),
                ("evaluate.backend", Value::Str(backend.into())),
                ("status", Value::Str("ok".into())),
                ("prune.pattern", Value::Str(pattern.into())),
                ("dense_model", Value::Str("chain".into())),
                ("non_gemm_us", Value::F64(rest)),
                ("front.latency_us", Value::F64(1.0)),
                ("layer_latency_us", Value::ListF64(vec![1.0, 2.0])),
                ("layer_dense_latency_us", Value::ListF64(vec![3.0, 4.0])),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect()
        };
        let sparse = row("vector", "s", 5.0, "cpu");
        // The dense model on another backend (whose rest is not timed) is not the reference.
        let mut exp = Experiment {
            evaluate: vec![
                row("dense", "g", f64::NAN, "cuda"),
                sparse.clone(),
                row("dense", "d", 7.0, "cpu"),
            ],
            pareto: vec![sparse],
            ..Default::default()
        };
        let bars = Layers::new(&exp).unwrap().bars;
        assert_eq!(
            (bars[0].label.as_str(), bars[0].rest),
            ("dense (reference)", 7.0)
        );
        assert_eq!(bars[0].layers, [3.0, 4.0]);
        assert_eq!(bars[1].rest, 5.0);
        exp.evaluate.pop();
        let bars = Layers::new(&exp).unwrap().bars;
        assert_eq!(
            (bars[0].label.as_str(), bars[0].rest),
            ("dense (reference, GEMMs only)", 0.0)
        );
    }
}
