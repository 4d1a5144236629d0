//! The self-contained page: inline SVG plots, tables whose numeric cells carry their exact
//! value (`data-value`, the shortest text that reads back to the same f64), no script and
//! nothing fetched.

use crate::expected::{Compared, Expected};
use crate::figure::Figure;
use crate::input::{num, point_label, text, Experiment};
use crate::plots::tuner;
use results::{Row, Value};
use std::fmt::Write;

/// Escapes text for HTML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A numeric cell: the exact value in `data-value`, rounded in the text.
fn num_cell(column: &str, v: f64) -> String {
    if v.is_finite() {
        format!(
            "<td class=\"n\" data-col=\"{}\" data-value=\"{v}\">{}</td>",
            escape(column),
            crate::figure::significant(v, 4)
        )
    } else {
        format!(
            "<td class=\"n\" data-col=\"{}\" data-value=\"\">–</td>",
            escape(column)
        )
    }
}

fn text_cell(column: &str, s: &str) -> String {
    format!("<td data-col=\"{}\">{}</td>", escape(column), escape(s))
}

/// A cell of a row's column as it is: numbers as [`num_cell`], text as text.
fn cell(row: &Row, column: &str) -> String {
    match row.get(column) {
        Some(Value::F64(_) | Value::I64(_)) => num_cell(column, num(row, column)),
        Some(Value::Str(s)) => text_cell(column, s),
        Some(Value::Bool(b)) => text_cell(column, if *b { "yes" } else { "no" }),
        // Lists (`formats_slower_than_dense`, per-layer values) as text, one item after another.
        Some(Value::ListStr(items)) => text_cell(column, &items.join("; ")),
        Some(Value::ListF64(items)) => {
            let each: Vec<String> = items
                .iter()
                .map(|&x| {
                    if x.is_finite() {
                        crate::figure::significant(x, 4)
                    } else {
                        "–".into()
                    }
                })
                .collect();
            text_cell(column, &each.join(", "))
        }
        _ => text_cell(column, ""),
    }
}

fn table_head(id: &str, columns: &[&str]) -> String {
    let mut s = format!("<table id=\"{id}\"><thead><tr>");
    for c in columns {
        let _ = write!(s, "<th>{}</th>", escape(c));
    }
    s.push_str("</tr></thead><tbody>\n");
    s
}

fn row_open(row: &Row) -> String {
    format!(
        "<tr data-key=\"{}\">",
        escape(text(row, "key").unwrap_or_default())
    )
}

/// The trials: every evaluate row.
fn trials(exp: &Experiment) -> String {
    let front: std::collections::BTreeMap<&str, (bool, f64)> = exp
        .pareto
        .iter()
        .filter_map(|r| {
            let tie = matches!(r.get("front.tie"), Some(Value::Bool(true)));
            Some((text(r, "key")?, (tie, num(r, "front.latency_us"))))
        })
        .collect();
    let mut cols = vec![
        "point",
        "status",
        "accuracy",
        "speedup_vs_dense",
        "speedup_ci_lo",
        "speedup_ci_hi",
        "latency_us_median",
        "dense_latency_us",
        "front.latency_us",
        "weight_bytes",
        "front",
    ];
    // Only where some evaluation ran layers dense (`[evaluate] dense_where_faster`).
    let ran_dense = exp
        .evaluate
        .iter()
        .any(|r| !crate::input::dense_run_layers(r).is_empty());
    if ran_dense {
        cols.push("ran dense");
    }
    let mut s = table_head("trials", &cols);
    let mut rows: Vec<&Row> = exp.evaluate.iter().collect();
    // Successful trials by accuracy, best first; failed ones (no accuracy) last.
    let accuracy = |r: &Row| {
        let a = num(r, "accuracy");
        if a.is_finite() {
            a
        } else {
            f64::NEG_INFINITY
        }
    };
    rows.sort_by(|a, b| accuracy(b).total_cmp(&accuracy(a)));
    for r in rows {
        let f = text(r, "key").and_then(|k| front.get(k));
        s.push_str(&row_open(r));
        s.push_str(&text_cell("point", &exp.model_label(r)));
        let status = match text(r, "error").filter(|e| !e.is_empty()) {
            Some(e) => format!("{}: {e}", text(r, "status").unwrap_or("?")),
            None => text(r, "status").unwrap_or("?").to_string(),
        };
        s.push_str(&text_cell("status", &status));
        for c in &cols[2..8] {
            s.push_str(&cell(r, c));
        }
        s.push_str(&num_cell("front.latency_us", f.map_or(f64::NAN, |f| f.1)));
        s.push_str(&cell(r, "weight_bytes"));
        let mark = match f {
            Some((true, _)) => "tie",
            Some((false, _)) => "yes",
            None => "",
        };
        s.push_str(&text_cell("front", mark));
        if ran_dense {
            let names = crate::input::dense_run_layers(r).join(", ");
            s.push_str(&text_cell("ran dense", &names));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table>\n");
    s.push_str(&measurement_notes(exp));
    s
}

/// How far the trials' measurements can be trusted against each other: the run's session
/// spread (by which the front widened its intervals) and how far apart the dense passes of one
/// dense model read (`results::dense_drift`), as the printed front says them.
fn measurement_notes(exp: &Experiment) -> String {
    let ok: Vec<&Row> = exp
        .evaluate
        .iter()
        .filter(|r| crate::input::ok(r))
        .collect();
    let spread = exp
        .pareto
        .iter()
        .find_map(|r| r.get("front.session_spread").and_then(Value::as_f64))
        .unwrap_or(0.0);
    let drift = results::dense_drift(&ok);
    let mut s = String::new();
    if spread > 0.0 {
        let _ = writeln!(
            s,
            "<p class=\"note\">Session spread {:.1} %: two models that ran the same kernels read \
             that far apart in their evaluations; the front widens every interval by it.</p>",
            100.0 * spread
        );
    }
    if drift > 0.0 {
        let _ = writeln!(
            s,
            "<p class=\"note\">Dense drift {:.1} %: the dense model's pass, timed anew with each \
             evaluation (<code>dense_latency_us</code>), read that far apart across these rows \
             (rows cached from earlier runs included). Speedups are paired with it and cancel \
             the drift to first order; past ~25 % compare them with care.</p>",
            100.0 * drift
        );
    }
    s
}

/// The ideal speedup of a format over dense: the inverse of the fraction of multiply-adds it
/// keeps (M/N for N:M and V:N:M).
fn ideal(r: &Row) -> f64 {
    match text(r, "format.pattern") {
        Some("nm" | "vnm") => num(r, "format.m") / num(r, "format.n"),
        Some("dense") => 1.0,
        _ => 1.0 / (1.0 - num(r, "format.sparsity")),
    }
}

/// The best kernel per format and shape, with its fraction of the ideal speedup.
fn kernels(exp: &Experiment) -> String {
    let cols = [
        "format",
        "format.rows",
        "format.cols",
        "kernel_tune.batch_tokens",
        "kernel_tune.backend",
        "kernel",
        "params",
        "latency_us_median",
        "speedup_vs_dense",
        "ideal",
        "of ideal",
    ];
    let mut s = table_head("kernels", &cols);
    let mut rows: Vec<&Row> = exp.kernel_best.iter().collect();
    rows.sort_by(|a, b| {
        let k = |r: &Row| {
            (
                num(r, "format.rows") as i64,
                num(r, "format.cols") as i64,
                point_label(r),
            )
        };
        k(a).cmp(&k(b))
    });
    for r in rows {
        s.push_str(&row_open(r));
        s.push_str(&text_cell("format", &point_label(r)));
        for c in &cols[1..9] {
            s.push_str(&cell(r, c));
        }
        let i = ideal(r);
        s.push_str(&num_cell("ideal", i));
        s.push_str(&num_cell("of ideal", num(r, "speedup_vs_dense") / i));
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table>\n");
    s
}

fn regret(exp: &Experiment) -> String {
    let t = tuner::tunings(exp);
    if t.is_empty() {
        return String::new();
    }
    let mut cols = vec![
        "budget",
        "k (mean)",
        "model mean",
        "model worst",
        "random mean",
    ];
    let calibrated = tuner::calibrated(&t);
    if calibrated {
        cols.extend(["analytical mean", "analytical worst"]);
    }
    let mut s = String::new();
    if calibrated {
        s.push_str("<p>The model ranked with its calibration on this device; the analytical columns rank the same measurements without it.</p>");
    }
    if !tuner::exhaustive(exp) {
        s.push_str("<p>These tunings were not exhaustive: regret is against the best configuration each measured, and k counts those configurations (a budget that rounds to the same k gives the same row).</p>");
    }
    s.push_str(&table_head("regret", &cols));
    for r in tuner::regret_table(&t) {
        s.push_str("<tr>");
        s.push_str(&num_cell("budget", r.budget));
        s.push_str(&num_cell("k (mean)", r.k));
        s.push_str(&num_cell("model mean", r.model.0));
        s.push_str(&num_cell("model worst", r.model.1));
        s.push_str(&num_cell("random mean", r.random));
        if calibrated {
            s.push_str(&num_cell("analytical mean", r.analytical.0));
            s.push_str(&num_cell("analytical worst", r.analytical.1));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table>\n");
    s
}

/// The calibrations the tunings used, once each: what they measured and what they cost.
fn calibrations(exp: &Experiment) -> String {
    if exp.calibrate.is_empty() {
        return String::new();
    }
    let cols = [
        "calibrate.family",
        "device",
        "status",
        "samples",
        "terms",
        "kernel_s",
        "duration_s",
        "cached",
        "spearman_analytical",
        "spearman_calibrated",
    ];
    let mut s = String::from(
        "<p>Each kernel family's cost model, calibrated once per device on a fixed sample and kept in the store; \
         <code>duration_s</code> is what the calibration cost when it ran (a cached one cost nothing this run). \
         The Spearman columns are the mean rank correlation of each model with the sample's measurements.</p>",
    );
    s.push_str(&table_head("calibrations", &cols));
    for r in &exp.calibrate {
        s.push_str(&row_open(r));
        for c in cols {
            s.push_str(&cell(r, c));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table>\n");
    s
}

fn retained(exp: &Experiment) -> String {
    let (bars, source) = crate::plots::retained::retained_l1(exp);
    if bars.is_empty() {
        return String::new();
    }
    let mut s = format!("<p>From the {source} rows.</p>");
    s.push_str(&table_head("retained", &["point", "retained_l1"]));
    for (label, v) in bars {
        s.push_str("<tr>");
        s.push_str(&text_cell("point", &label));
        s.push_str(&num_cell("retained_l1", v));
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table>\n");
    s
}

fn expected(e: &Expected, compared: &[Compared]) -> String {
    let mut s = format!(
        "<p><b>{}</b>, {}. {}</p><p>{}</p>",
        escape(&e.paper),
        escape(&e.figure),
        escape(&e.source),
        escape(&e.differs)
    );
    let cols = [
        "metric",
        "column",
        "rows",
        "measured",
        "published",
        "independent",
        "difference",
        "tolerance",
        "verdict",
    ];
    s.push_str(&table_head("expected", &cols));
    for c in compared {
        s.push_str("<tr>");
        s.push_str(&text_cell("metric", &c.metric.label));
        s.push_str(&text_cell("column", &c.metric.column));
        s.push_str(&num_cell("rows", c.rows as f64));
        s.push_str(&num_cell("measured", c.measured.unwrap_or(f64::NAN)));
        s.push_str(&num_cell(
            "published",
            c.metric.published.unwrap_or(f64::NAN),
        ));
        s.push_str(&num_cell(
            "independent",
            c.metric.independent.unwrap_or(f64::NAN),
        ));
        s.push_str(&num_cell("difference", c.difference().unwrap_or(f64::NAN)));
        s.push_str(&num_cell(
            "tolerance",
            c.metric.tolerance.unwrap_or(f64::NAN),
        ));
        let verdict = match (c.measured, c.within()) {
            (None, _) => "not measured",
            (_, Some(true)) => "within",
            (_, Some(false)) => "OUTSIDE",
            (_, None) => "",
        };
        s.push_str(&format!(
            "<td data-col=\"verdict\" class=\"{}\">{verdict}</td>",
            if verdict == "OUTSIDE" { "bad" } else { "" }
        ));
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table>\n");
    s
}

fn search(exp: &Experiment) -> String {
    if exp.search.is_empty() {
        return String::new();
    }
    let mut columns: Vec<&str> = exp.search[0].keys().map(String::as_str).collect();
    columns.retain(|c| !matches!(*c, "experiment" | "cotune_version"));
    let mut s = table_head("search", &columns);
    for r in &exp.search {
        s.push_str("<tr>");
        for c in &columns {
            s.push_str(&cell(r, c));
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody></table>\n");
    s
}

const STYLE: &str = "body{font-family:sans-serif;max-width:1100px;margin:1em auto;padding:0 1em;color:#222}\
figure{margin:1.5em 0}figcaption{font-size:.9em;color:#444;max-width:860px}\
table{border-collapse:collapse;font-size:.85em;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;padding:2px 6px}\
th{background:#f0f0f0}td.n{text-align:right;font-variant-numeric:tabular-nums}td.bad{color:#b00;font-weight:bold}\
.note{color:#8a5a00}";

/// The page for `exp`: its figures, what was skipped and why, and the tables.
pub fn page(
    exp: &Experiment,
    figures: &[Figure],
    skipped: &[(String, String)],
    expected_: Option<(&Expected, &[Compared])>,
) -> String {
    let mut s = String::new();
    let title = format!("cotune report: {}", exp.name);
    let _ = write!(
        s,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    if let Some(run) = &exp.run {
        let _ = writeln!(
            s,
            "<p>Experiment <code>{}</code> (digest <code>{}</code>), cotune {}, run started {}.</p>",
            escape(&run.experiment),
            escape(&run.experiment_digest[..run.experiment_digest.len().min(16)]),
            escape(&run.cotune_version),
            escape(&run.started_at)
        );
    }
    let machine: std::collections::BTreeSet<String> = exp
        .evaluate
        .iter()
        .chain(&exp.kernel_tune)
        // The dense library's rows (`isa = library`) ran on the same machine.
        .filter(|r| text(r, "isa") != Some("library"))
        .filter_map(|r| {
            Some(format!(
                "{} ({}, ISA {})",
                text(r, "host")?,
                text(r, "device").unwrap_or("?"),
                text(r, "isa").unwrap_or("?")
            ))
        })
        .collect();
    if !machine.is_empty() {
        let list: Vec<String> = machine.iter().map(|m| escape(m)).collect();
        let _ = writeln!(s, "<p>Measured on: {}.</p>", list.join("; "));
    }
    if let Some((e, c)) = expected_ {
        let _ = write!(s, "<h2>Measured against published</h2>\n{}", expected(e, c));
    }
    for f in figures {
        s.push_str(&figure_html(f));
    }
    if !skipped.is_empty() {
        s.push_str("<h2>Plots not drawn</h2><ul>\n");
        for (title, why) in skipped {
            let _ = writeln!(
                s,
                "<li class=\"note\">{}: {}</li>",
                escape(title),
                escape(why)
            );
        }
        s.push_str("</ul>\n");
    }
    let sections = [
        (
            "Trials (evaluate)",
            if exp.evaluate.is_empty() {
                String::new()
            } else {
                trials(exp)
            },
        ),
        (
            "Best kernels",
            if exp.kernel_best.is_empty() {
                String::new()
            } else {
                kernels(exp)
            },
        ),
        ("Cost-model calibrations", calibrations(exp)),
        ("Tuner regret by budget", regret(exp)),
        ("Retained L1", retained(exp)),
        ("Search rounds", search(exp)),
    ];
    for (heading, body) in sections {
        if !body.is_empty() {
            let _ = write!(s, "<h2>{}</h2>\n{body}", escape(heading));
        }
    }
    s.push_str("</body></html>\n");
    s
}

/// A figure: its heading, the SVG inline, the caption and links to its files.
fn figure_html(f: &Figure) -> String {
    format!(
        "<figure id=\"{}\"><h2>{}</h2>\n{}\n<figcaption>{} Files: <a href=\"{}.png\">PNG</a>, <a href=\"{}.svg\">SVG</a>.</figcaption></figure>\n",
        escape(&f.name),
        escape(&f.title),
        f.svg.trim_start_matches(|c| c != '<'),
        escape(&f.caption),
        escape(&f.name),
        escape(&f.name)
    )
}

/// The index of several experiments' reports: a link to each, and their fronts on one plot.
pub fn index_page(reports: &[(String, String)], fronts: Result<&Figure, &str>) -> String {
    let mut s = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>cotune reports</title><style>{STYLE}</style></head><body>\n<h1>cotune reports</h1>\n<ul>\n"
    );
    for (name, link) in reports {
        let _ = writeln!(
            s,
            "<li><a href=\"{}\">{}</a></li>",
            escape(link),
            escape(name)
        );
    }
    s.push_str("</ul>\n");
    match fronts {
        Ok(f) => s.push_str(&figure_html(f)),
        Err(why) => {
            let _ = writeln!(s, "<p class=\"note\">Fronts not drawn: {}</p>", escape(why));
        }
    }
    s.push_str("</body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: list columns (`search.parquet`'s `formats_slower_than_dense`) showed as empty
    /// cells.
    #[test]
    fn list_cells_show_their_items() {
        let r: Row = [
            (
                "a".to_string(),
                Value::ListStr(vec!["fc1 <csr>".into(), "fc2".into()]),
            ),
            ("b".to_string(), Value::ListF64(vec![1.23456, f64::NAN])),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            cell(&r, "a"),
            "<td data-col=\"a\">fc1 &lt;csr&gt;; fc2</td>"
        );
        assert_eq!(cell(&r, "b"), "<td data-col=\"b\">1.235, –</td>");
    }
}
