//! A reproduction's published numbers (`expected.toml` beside its experiment file) and the
//! measured values they are compared with.
//!
//! ```toml
//! paper = "VENOM (Castro et al., SC'23)"
//! figure = "Fig. 11"
//! source = "where the published numbers come from"
//! differs = "what differs here (device, weights, sizes)"
//! table = "layer_study"            # the table the metrics read
//!
//! [[metric]]
//! label = "2:8"
//! column = "retained_l1"
//! where = { "prune.pattern" = "nm", "prune.m" = 8 }
//! published = 0.4848               # optional: the paper's value
//! independent = 0.4840             # optional: an independent computation's value
//! tolerance = 0.02                 # optional: |measured − reference| allowed
//! ```
//!
//! The measured value is the mean of `column` over the table's successful rows that match
//! every `where` cell (none, or one that is NaN or infinite: not measured); the reference is
//! `published` where there is one, else `independent`.

use crate::input::{ok, Experiment};
use crate::ReportError;
use results::{Row, Value};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// An `expected.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    /// The paper.
    pub paper: String,
    /// The figure or table reproduced.
    pub figure: String,
    /// Where the published numbers were found.
    #[serde(default)]
    pub source: String,
    /// What differs here from the paper's setting.
    #[serde(default)]
    pub differs: String,
    /// The table the metrics read.
    pub table: String,
    /// The compared numbers.
    #[serde(default)]
    pub metric: Vec<Metric>,
    /// The file it was read from (for messages).
    #[serde(skip)]
    pub path: std::path::PathBuf,
}

/// One compared number.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metric {
    /// Its name in the table.
    pub label: String,
    /// The column measured.
    pub column: String,
    /// Cells a row must have to count.
    #[serde(rename = "where", default)]
    pub filter: BTreeMap<String, toml::Value>,
    /// The paper's value.
    pub published: Option<f64>,
    /// An independent computation's value.
    pub independent: Option<f64>,
    /// Allowed |measured − reference|.
    pub tolerance: Option<f64>,
}

/// A metric with its measurement.
#[derive(Debug, Clone)]
pub struct Compared {
    /// The metric.
    pub metric: Metric,
    /// Mean of the matching rows' values; `None` when no row matched.
    pub measured: Option<f64>,
    /// Rows that matched.
    pub rows: usize,
    /// Of those, rows whose value is NaN or infinite (any makes the metric not measured).
    pub non_finite: usize,
}

impl Compared {
    /// The published value, else the independent one.
    pub fn reference(&self) -> Option<f64> {
        self.metric.published.or(self.metric.independent)
    }

    /// measured − reference.
    pub fn difference(&self) -> Option<f64> {
        Some(self.measured? - self.reference()?)
    }

    /// `Some(true)` within the tolerance, `Some(false)` outside, `None` without a tolerance or
    /// a measurement. The bound is inclusive, with room for the last bits of a decimal
    /// difference (0.4239 − 0.4039 is 0.020000000000000018 in binary).
    pub fn within(&self) -> Option<bool> {
        let d = self.difference()?;
        let slack = 1e-12 * self.reference()?.abs().max(1.0);
        Some(d.abs() <= self.metric.tolerance? + slack)
    }
}

/// The table names `table` may take.
pub const TABLES: [&str; 8] = [
    "train",
    "prune",
    "kernel_tune",
    "evaluate",
    "layer_study",
    "pareto",
    "kernel_best",
    "search",
];

impl Expected {
    /// Reads and checks `path`.
    pub fn read(path: &Path) -> Result<Expected, ReportError> {
        let bad = |what: String| ReportError::Expected {
            path: path.to_path_buf(),
            what,
        };
        let bytes = std::fs::read(path).map_err(ReportError::io(path))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            bad(format!(
                "not UTF-8 text (byte {})",
                e.utf8_error().valid_up_to()
            ))
        })?;
        let mut e: Expected = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
        e.path = path.to_path_buf();
        if !TABLES.contains(&e.table.as_str()) {
            return Err(bad(format!(
                "table = {:?}: expected one of {}",
                e.table,
                TABLES.join(", ")
            )));
        }
        if e.metric.is_empty() {
            return Err(bad("no [[metric]]: nothing to compare".into()));
        }
        let mut labels = std::collections::BTreeSet::new();
        for m in &e.metric {
            if m.label.trim().is_empty() {
                return Err(bad(format!(
                    "a metric of column {:?} has an empty `label`",
                    m.column
                )));
            }
            if !labels.insert(m.label.as_str()) {
                return Err(bad(format!(
                    "metric {:?} is there twice: each label names one metric",
                    m.label
                )));
            }
            if let Some((c, v)) = m.filter.iter().find(|(_, v)| {
                !matches!(
                    v,
                    toml::Value::String(_)
                        | toml::Value::Integer(_)
                        | toml::Value::Float(_)
                        | toml::Value::Boolean(_)
                )
            }) {
                return Err(bad(format!(
                    "metric {:?}: `where` {c:?} = {v}: expected a string, number or boolean (one value a row's cell must equal)",
                    m.label
                )));
            }
            if m.published.is_none() && m.independent.is_none() {
                return Err(bad(format!(
                    "metric {:?}: needs `published` or `independent`",
                    m.label
                )));
            }
            for (name, x) in [("published", m.published), ("independent", m.independent)] {
                if x.is_some_and(|x| !x.is_finite()) {
                    return Err(bad(format!(
                        "metric {:?}: `{name}` is not a number",
                        m.label
                    )));
                }
            }
            if m.tolerance.is_some_and(|t| !(t >= 0.0 && t.is_finite())) {
                return Err(bad(format!(
                    "metric {:?}: `tolerance` must be a number ≥ 0",
                    m.label
                )));
            }
        }
        Ok(e)
    }

    /// Checks that each metric's `column` and `where` columns are columns of its table, and
    /// that `column` holds numbers, where the table has rows (an empty table measures nothing,
    /// which [`Self::compare`] reports as not measured).
    pub fn check_columns(&self, exp: &Experiment) -> Result<(), ReportError> {
        let rows = self.rows(exp);
        if rows.is_empty() {
            return Ok(());
        }
        let columns: std::collections::BTreeSet<&str> = rows
            .iter()
            .flat_map(|r| r.keys().map(String::as_str))
            .collect();
        let bad = |what: String| ReportError::Expected {
            path: self.path.clone(),
            what,
        };
        let missing = |label: &str, role: &str, c: &str| {
            bad(format!(
                "metric {label:?}: {role} {c:?} is not a column of table {:?} (its columns: {})",
                self.table,
                columns.iter().copied().collect::<Vec<_>>().join(", ")
            ))
        };
        for m in &self.metric {
            if !columns.contains(m.column.as_str()) {
                return Err(missing(&m.label, "column", &m.column));
            }
            let numeric = rows
                .iter()
                .any(|r| matches!(r.get(&m.column), Some(Value::F64(_) | Value::I64(_))));
            let present = rows
                .iter()
                .any(|r| !matches!(r.get(&m.column), None | Some(Value::Null)));
            if present && !numeric {
                let numbers: std::collections::BTreeSet<&str> = rows
                    .iter()
                    .flat_map(|r| r.iter())
                    .filter(|(_, v)| matches!(v, Value::F64(_) | Value::I64(_)))
                    .map(|(c, _)| c.as_str())
                    .collect();
                return Err(bad(format!(
                    "metric {:?}: column {:?} of table {:?} holds no numbers (its numeric columns: {})",
                    m.label,
                    m.column,
                    self.table,
                    numbers.into_iter().collect::<Vec<_>>().join(", ")
                )));
            }
            if let Some(c) = m.filter.keys().find(|c| !columns.contains(c.as_str())) {
                return Err(missing(&m.label, "`where` column", c));
            }
            // A value of another type than the column's never matches a row: a bad file,
            // not an experiment that measured nothing.
            for (c, want) in &m.filter {
                let kinds: std::collections::BTreeSet<&str> = rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .filter_map(|v| match v {
                        Value::F64(_) | Value::I64(_) => Some("a number"),
                        Value::Str(_) => Some("a string"),
                        Value::Bool(_) => Some("a boolean"),
                        _ => None,
                    })
                    .collect();
                let wanted = match want {
                    toml::Value::String(_) => "a string",
                    toml::Value::Boolean(_) => "a boolean",
                    _ => "a number",
                };
                if !kinds.is_empty() && !kinds.contains(wanted) {
                    return Err(bad(format!(
                        "metric {:?}: `where` {c:?} = {want} is {wanted}, but the column holds {}",
                        m.label,
                        kinds.into_iter().collect::<Vec<_>>().join(" and ")
                    )));
                }
            }
        }
        Ok(())
    }

    fn rows<'e>(&self, exp: &'e Experiment) -> &'e [Row] {
        match self.table.as_str() {
            "train" => &exp.train,
            "prune" => &exp.prune,
            "kernel_tune" => &exp.kernel_tune,
            "evaluate" => &exp.evaluate,
            "layer_study" => &exp.layer_study,
            "pareto" => &exp.pareto,
            "kernel_best" => &exp.kernel_best,
            _ => &exp.search,
        }
    }

    /// Each metric measured on `exp`.
    pub fn compare(&self, exp: &Experiment) -> Vec<Compared> {
        let rows = self.rows(exp);
        self.metric
            .iter()
            .map(|m| {
                let values: Vec<f64> = rows
                    .iter()
                    .filter(|r| ok(r) || !r.contains_key("status"))
                    .filter(|r| m.filter.iter().all(|(c, want)| matches(r.get(c), want)))
                    .filter_map(|r| r.get(&m.column).and_then(Value::as_f64))
                    .collect();
                // A NaN or infinite value is no measurement, and no mean is one with it.
                let non_finite = values.iter().filter(|x| !x.is_finite()).count();
                Compared {
                    metric: m.clone(),
                    measured: (!values.is_empty() && non_finite == 0)
                        .then(|| values.iter().sum::<f64>() / values.len() as f64),
                    rows: values.len(),
                    non_finite,
                }
            })
            .collect()
    }
}

/// Whether a cell equals a TOML value (numbers within 1e-9 of each other).
fn matches(cell: Option<&Value>, want: &toml::Value) -> bool {
    let Some(cell) = cell else {
        return false;
    };
    match want {
        toml::Value::String(s) => cell.as_str() == Some(s.as_str()),
        toml::Value::Boolean(b) => cell.as_bool() == Some(*b),
        toml::Value::Integer(i) => cell.as_f64().is_some_and(|x| (x - *i as f64).abs() < 1e-9),
        toml::Value::Float(f) => cell.as_f64().is_some_and(|x| (x - f).abs() < 1e-9),
        _ => false,
    }
}
