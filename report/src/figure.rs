//! Drawing one plot twice, as an SVG string (inlined in the page) and as a PNG file, from the
//! same code: a [`Plot`] draws on any plotters backend.

use crate::ReportError;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged, SegmentedCoord};
use plotters::coord::types::{RangedCoordf64, RangedCoordi32};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

/// The bundled font (DejaVu Sans, its licence beside it): PNG text without system fonts.
const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

/// A plot's drawing failed; the message is the backend's.
#[derive(Debug)]
pub struct DrawError(pub String);

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for DrawError {
    fn from(e: DrawingAreaErrorKind<E>) -> Self {
        DrawError(e.to_string())
    }
}

/// One figure of the report.
pub trait Plot {
    /// File stem of its PNG and SVG files.
    fn name(&self) -> String;
    /// Heading in the page.
    fn title(&self) -> String;
    /// One or two sentences under the plot: what it shows and how it was computed.
    fn caption(&self) -> String;
    /// Pixel size.
    fn size(&self) -> (u32, u32) {
        (860, 520)
    }
    /// Draws on `root` (already filled white).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static;
}

/// A drawn figure: the SVG inline, and where its files are.
#[derive(Debug, Clone)]
pub struct Figure {
    /// File stem.
    pub name: String,
    /// Heading.
    pub title: String,
    /// Caption.
    pub caption: String,
    /// The SVG document.
    pub svg: String,
    /// The PNG file.
    pub png: PathBuf,
    /// The SVG file.
    pub svg_file: PathBuf,
}

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The font is compiled in and known to parse (a test draws text with it).
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Draws `plot` as `<dir>/<name>.svg` and `<dir>/<name>.png`. A drawing error is returned as
/// text, for the page to show in the plot's place.
pub fn render<P: Plot>(plot: &P, dir: &Path) -> Result<Result<Figure, String>, ReportError> {
    register_font();
    let size = plot.size();
    let mut svg = String::new();
    if let Err(DrawError(e)) = draw_on(plot, SVGBackend::with_string(&mut svg, size)) {
        return Ok(Err(e));
    }
    let png = dir.join(format!("{}.png", plot.name()));
    if let Err(DrawError(e)) = draw_on(plot, BitMapBackend::new(&png, size)) {
        return Ok(Err(e));
    }
    let svg_file = dir.join(format!("{}.svg", plot.name()));
    std::fs::write(&svg_file, &svg).map_err(ReportError::io(&svg_file))?;
    Ok(Ok(Figure {
        name: plot.name(),
        title: plot.title(),
        caption: plot.caption(),
        svg,
        png,
        svg_file,
    }))
}

/// Draws `plot` on a white page of `backend`.
fn draw_on<P: Plot, DB: DrawingBackend>(plot: &P, backend: DB) -> Result<(), DrawError>
where
    DB::ErrorType: 'static,
{
    let root = backend.into_drawing_area();
    root.fill(&WHITE)?;
    plot.draw(&root)?;
    root.present()?;
    Ok(())
}

/// A chart of horizontal bars: `labels` top to bottom on the y axis, `x` across.
pub type BarChart<'a, DB> =
    ChartContext<'a, DB, Cartesian2d<RangedCoordf64, SegmentedCoord<RangedCoordi32>>>;

/// A [`BarChart`] titled `title` with its mesh drawn: bar `i` (0 at the top) spans
/// [`bar_rows`]`(i, labels.len())`.
pub fn bar_chart<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    labels: &[String],
    x: std::ops::Range<f64>,
    x_desc: &str,
    label_width: u32,
) -> Result<BarChart<'a, DB>, DrawError>
where
    DB::ErrorType: 'static,
{
    let n = labels.len();
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(label_width)
        .build_cartesian_2d(x, (0..n as i32 - 1).into_segmented())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .light_line_style(WHITE)
        .y_labels(n.max(1))
        .y_label_formatter(&|y| match y {
            SegmentValue::CenterOf(i) if (*i as usize) < n => labels[n - 1 - *i as usize].clone(),
            _ => String::new(),
        })
        .x_desc(x_desc)
        .draw()?;
    Ok(chart)
}

/// The y extent of bar `i` of `n` (0 at the top) in a [`BarChart`], and its centre.
pub fn bar_rows(i: usize, n: usize) -> (SegmentValue<i32>, SegmentValue<i32>, SegmentValue<i32>) {
    let y = (n - 1 - i) as i32;
    (
        SegmentValue::Exact(y),
        SegmentValue::Exact(y + 1),
        SegmentValue::CenterOf(y),
    )
}

/// A chart of accuracy against latency on a [`log_axis`] (plot `log10` of the latencies),
/// sized to hold `latencies` and `accuracies`, with its mesh drawn.
pub type AccuracyChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<LogAxis, RangedCoordf64>>;

/// An [`AccuracyChart`] titled `title`.
pub fn accuracy_chart<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    latencies: impl Iterator<Item = f64> + Clone,
    accuracies: impl Iterator<Item = f64> + Clone,
) -> Result<AccuracyChart<'a, DB>, DrawError>
where
    DB::ErrorType: 'static,
{
    let x = log_axis(
        latencies.clone().fold(f64::INFINITY, f64::min),
        latencies.fold(0.0, f64::max),
    );
    let (y0, y1) = padded(
        accuracies.clone().fold(f64::INFINITY, f64::min),
        accuracies.fold(f64::NEG_INFINITY, f64::max),
        0.08,
    );
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x, y0..y1)?;
    chart
        .configure_mesh()
        .x_desc("latency (µs, log scale)")
        .y_desc("accuracy")
        .x_label_formatter(&log_label)
        .light_line_style(WHITE)
        .draw()?;
    Ok(chart)
}

/// The colour of series `i` (a fixed palette, then cycling).
pub fn colour(i: usize) -> RGBColor {
    const PALETTE: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    PALETTE[i % PALETTE.len()]
}

/// `[lo, hi]` widened by `pad` of its span (or around the value when it is one point), for an
/// axis.
pub fn padded(lo: f64, hi: f64, pad: f64) -> (f64, f64) {
    let span = hi - lo;
    if span > 0.0 {
        (lo - span * pad, hi + span * pad)
    } else {
        let d = lo.abs().max(1e-9) * 0.1;
        (lo - d, hi + d)
    }
}

/// A log axis that plotters labels well at any span (its own log axis leaves spans under a
/// decade unlabelled): the range of `log10` of `[lo, hi]`, widened a little, with ticks at
/// round values (1, 2, 5 × 10^k; more when the span is under a decade and a half). Plot
/// `log10` of the values on it and label the ticks with [`log_label`].
pub fn log_axis(lo: f64, hi: f64) -> LogAxis {
    let (lo, hi) = (lo.max(1e-12).log10(), hi.max(1e-12).log10());
    let (a, b) = if hi > lo {
        let pad = (hi - lo) * 0.06;
        (lo - pad, hi + pad)
    } else {
        (lo - 0.2, hi + 0.2)
    };
    let mantissas: &[f64] = if b - a < 0.6 {
        &[
            1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0,
        ]
    } else if b - a < 1.5 {
        &[1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0]
    } else {
        &[1.0, 2.0, 5.0]
    };
    let ticks: Vec<f64> = (a.floor() as i32..=b.ceil() as i32)
        .flat_map(|k| mantissas.iter().map(move |m| (m * 10f64.powi(k)).log10()))
        .filter(|t| (a..=b).contains(t))
        .collect();
    LogAxis { range: a..b, ticks }
}

/// A linear axis over `log10` values with its ticks at round values (see [`log_axis`]).
#[derive(Debug, Clone)]
pub struct LogAxis {
    range: std::ops::Range<f64>,
    ticks: Vec<f64>,
}

impl LogAxis {
    /// The `log10` range.
    pub fn bounds(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}

impl Ranged for LogAxis {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = (v - self.range.start) / (self.range.end - self.range.start);
        limit.0 + (f * (limit.1 - limit.0) as f64).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.clone()
    }
}

/// The tick label of a [`log_axis`] position: the value it stands for.
pub fn log_label(v: &f64) -> String {
    significant(10f64.powf(*v), 3)
}

/// `v` with `digits` significant digits (no exponent).
pub fn significant(v: f64, digits: usize) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let magnitude = v.abs().log10().floor() as i32;
    if !(-3..6).contains(&magnitude) {
        return format!("{v:.prec$e}", prec = digits.saturating_sub(1));
    }
    let decimals = (digits as i32 - 1 - magnitude).max(0) as usize;
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}
