//! Speedup over dense against M for the 2:M patterns, per shape, with the ideal M/2 beside.

use crate::figure::{colour, log_axis, log_label, DrawError, Plot};
use crate::input::{num, ok, text, Experiment};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::collections::BTreeMap;

/// The speedup-against-M plot.
pub struct SpeedupM {
    /// Series name → (M, speedup) sorted by M.
    series: BTreeMap<String, Vec<(f64, f64)>>,
}

/// The best kernels of 2:M formats: kernel_best.parquet, else the kernel_tune rows marked best.
pub fn two_m_rows(exp: &Experiment) -> Vec<&results::Row> {
    let best: Vec<&results::Row> = if exp.kernel_best.is_empty() {
        exp.kernel_tune
            .iter()
            .filter(|r| matches!(r.get("is_best"), Some(results::Value::Bool(true))))
            .collect()
    } else {
        exp.kernel_best.iter().collect()
    };
    best.into_iter()
        .filter(|r| ok(r) && matches!(text(r, "format.pattern"), Some("nm" | "vnm")))
        .filter(|r| num(r, "format.n") == 2.0 && num(r, "speedup_vs_dense").is_finite())
        .collect()
}

/// `rows×cols`, `V:2:M` or `2:M`, and the batch when the table has several.
pub fn series_name(r: &results::Row, batches: usize) -> String {
    let shape = format!("{}×{}", num(r, "format.rows"), num(r, "format.cols"));
    let format = match text(r, "format.pattern") {
        Some("vnm") => format!("{}:2:M", num(r, "format.v")),
        _ => "2:M".into(),
    };
    let backend = text(r, "kernel_tune.backend").unwrap_or("cpu");
    let mut name = format!("{shape} {format} {backend}");
    if batches > 1 {
        name.push_str(&format!(" b{}", num(r, "kernel_tune.batch_tokens")));
    }
    name
}

impl SpeedupM {
    /// `Err(why)` when the experiment tuned no 2:M format.
    pub fn new(exp: &Experiment) -> Result<SpeedupM, String> {
        let rows = two_m_rows(exp);
        let batches = rows
            .iter()
            .map(|r| num(r, "kernel_tune.batch_tokens").to_bits())
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for r in &rows {
            series
                .entry(series_name(r, batches))
                .or_default()
                .push((num(r, "format.m"), num(r, "speedup_vs_dense")));
        }
        series.retain(|_, v| v.len() >= 2);
        if series.is_empty() {
            return Err("no 2:M format tuned at two or more M on one shape".into());
        }
        for v in series.values_mut() {
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        Ok(SpeedupM { series })
    }
}

impl Plot for SpeedupM {
    fn name(&self) -> String {
        "speedup_vs_m".into()
    }
    fn title(&self) -> String {
        "Kernel speedup over dense against M (2:M)".into()
    }
    fn caption(&self) -> String {
        "The best tuned kernel of each 2:M format over the best dense kernel measured in the same tuning, per layer shape; \
         the dashed line is the ideal M/2 (the inverse of the fraction of multiply-adds kept, 2/M), the grey line dense = 1."
            .into()
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let all = || self.series.values().flatten();
        let m0 = all().map(|p| p.0).fold(f64::INFINITY, f64::min);
        let m1 = all().map(|p| p.0).fold(0.0, f64::max);
        let s0 = all().map(|p| p.1).fold(1.0, f64::min);
        let s1 = all().map(|p| p.1).fold(m1 / 2.0, f64::max);
        let (x, y) = (log_axis(m0, m1), log_axis(s0, s1));
        let lg = |(m, s): (f64, f64)| (m.log10(), s.log10());
        let mut chart = ChartBuilder::on(root)
            .caption(self.title(), ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(x.clone(), y)?;
        let (x0, x1) = (x.bounds().start, x.bounds().end);
        chart
            .configure_mesh()
            .x_desc("M (log scale)")
            .y_desc("speedup over dense (log scale)")
            .x_label_formatter(&log_label)
            .y_label_formatter(&log_label)
            .light_line_style(WHITE)
            .draw()?;
        let grid: Vec<f64> = (0..=64)
            .map(|i| 10f64.powf(x0 + (x1 - x0) * i as f64 / 64.0))
            .collect();
        chart
            .draw_series(DashedLineSeries::new(
                grid.iter().map(|&m| lg((m, m / 2.0))),
                6,
                4,
                BLACK.stroke_width(1),
            ))?
            .label("ideal M/2")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
        chart
            .draw_series(LineSeries::new(
                grid.iter().map(|&m| lg((m, 1.0))),
                RGBColor(150, 150, 150).stroke_width(1),
            ))?
            .label("dense = 1")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RGBColor(150, 150, 150)));
        for (i, (name, points)) in self.series.iter().enumerate() {
            let c = colour(i);
            chart
                .draw_series(LineSeries::new(
                    points.iter().map(|&p| lg(p)),
                    c.stroke_width(2),
                ))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
            chart.draw_series(points.iter().map(|&p| Circle::new(lg(p), 3, c.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()?;
        Ok(())
    }
}
