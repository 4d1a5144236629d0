//! Finding an experiment's tables in an output folder and reading them, with their schema
//! version checked.

use crate::ReportError;
use results::{Row, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The stage tables a report reads (each a folder of Parquet parts).
pub const STAGE_TABLES: [&str; 7] = [
    "train",
    "prune",
    "calibrate",
    "kernel_tune",
    "evaluate",
    "layer_study",
    "checkpoint",
];
/// The aggregate tables a report reads (one file each).
pub const AGGREGATE_TABLES: [&str; 3] = ["pareto", "kernel_best", "search"];

/// One experiment's output, read whole.
#[derive(Debug, Default)]
pub struct Experiment {
    /// Its name (from run.json, else the folder's name).
    pub name: String,
    /// The folder it was read from.
    pub dir: PathBuf,
    /// run.json, where there is one.
    pub run: Option<results::RunSummary>,
    /// `train/` rows.
    pub train: Vec<Row>,
    /// `prune/` rows.
    pub prune: Vec<Row>,
    /// `calibrate/` rows (the cost model's calibrations on the device).
    pub calibrate: Vec<Row>,
    /// `kernel_tune/` rows.
    pub kernel_tune: Vec<Row>,
    /// `evaluate/` rows.
    pub evaluate: Vec<Row>,
    /// `layer_study/` rows.
    pub layer_study: Vec<Row>,
    /// `pareto.parquet` rows.
    pub pareto: Vec<Row>,
    /// `kernel_best.parquet` rows.
    pub kernel_best: Vec<Row>,
    /// `search.parquet` rows (unified search rounds).
    pub search: Vec<Row>,
    /// The evaluated models' labels by key ([`Experiment::model_label`]), made on first use.
    pub labels: std::sync::OnceLock<BTreeMap<String, String>>,
}

/// True if `dir` looks like one experiment's output: a run.json or a stage table folder.
pub fn is_experiment_dir(dir: &Path) -> bool {
    dir.join("run.json").is_file() || STAGE_TABLES.iter().any(|t| dir.join(t).is_dir())
}

/// The experiment folders under `dir`: `dir` itself if it is one, else its visible
/// subfolders that are (sorted by name). [`ReportError::NoTables`] if there is none.
pub fn experiment_dirs(dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    if !dir.is_dir() {
        return Err(ReportError::NoTables {
            path: dir.to_path_buf(),
        });
    }
    if is_experiment_dir(dir) {
        return Ok(vec![dir.to_path_buf()]);
    }
    let mut found = vec![];
    for entry in std::fs::read_dir(dir).map_err(ReportError::io(dir))? {
        let path = entry.map_err(ReportError::io(dir))?.path();
        // Hidden folders, and a folder of tables that a run moved aside from where its
        // experiment's link now goes (`<experiment>.old-*`: not an experiment of its own).
        let hidden = path.file_name().is_some_and(|n| {
            let n = n.to_string_lossy();
            n.starts_with('.') || results::is_moved_aside(&n)
        });
        if !hidden && path.is_dir() && is_experiment_dir(&path) {
            found.push(path);
        }
    }
    found.sort();
    if found.is_empty() {
        return Err(ReportError::NoTables {
            path: dir.to_path_buf(),
        });
    }
    Ok(found)
}

/// Reads a table (folder or file) if it exists and has parts; checks its schema version.
fn table(path: &Path) -> Result<Vec<Row>, ReportError> {
    if !path.exists() || results::table_files(path)?.is_empty() {
        return Ok(vec![]);
    }
    let meta = results::read_metadata(path)?;
    let version = meta.get(results::keys::SCHEMA_VERSION);
    if version.and_then(|v| v.parse::<u32>().ok()) != Some(results::SCHEMA_VERSION) {
        return Err(ReportError::UnknownSchema {
            path: results::table_files(path)?.remove(0),
            found: version.cloned().unwrap_or_else(|| "none".into()),
            supported: results::SCHEMA_VERSION,
        });
    }
    Ok(results::read_table(path)?)
}

/// Reads every table of the experiment output in `dir`.
pub fn read_experiment(dir: &Path) -> Result<Experiment, ReportError> {
    let run_path = dir.join("run.json");
    let run = if run_path.is_file() {
        Some(results::read_run_json(&run_path)?)
    } else {
        None
    };
    let folder_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let agg = |name: &str| table(&dir.join(format!("{name}.parquet")));
    Ok(Experiment {
        name: run.as_ref().map_or(folder_name, |r| r.experiment.clone()),
        dir: dir.to_path_buf(),
        train: table(&dir.join("train"))?,
        prune: table(&dir.join("prune"))?,
        calibrate: table(&dir.join("calibrate"))?,
        kernel_tune: table(&dir.join("kernel_tune"))?,
        evaluate: table(&dir.join("evaluate"))?,
        layer_study: table(&dir.join("layer_study"))?,
        pareto: agg("pareto")?,
        kernel_best: agg("kernel_best")?,
        search: agg("search")?,
        run,
        labels: Default::default(),
    })
}

/// A float cell (NaN when missing or not a number).
pub fn num(row: &Row, col: &str) -> f64 {
    row.get(col).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// A text cell.
pub fn text<'r>(row: &'r Row, col: &str) -> Option<&'r str> {
    row.get(col).and_then(Value::as_str)
}

/// A list-of-floats cell (empty when missing).
pub fn floats<'r>(row: &'r Row, col: &str) -> &'r [f64] {
    match row.get(col) {
        Some(Value::ListF64(v)) => v,
        _ => &[],
    }
}

/// A list-of-strings cell (empty when missing).
pub fn strings<'r>(row: &'r Row, col: &str) -> &'r [String] {
    match row.get(col) {
        Some(Value::ListStr(v)) => v,
        _ => &[],
    }
}

/// The layers an evaluation ran through their dense kernel (`[evaluate] dense_where_faster`)
/// at its largest batch, the one its `speedup_vs_dense` and `layer_*` lists are measured at:
/// `dense_layers_b{B}` for the largest B (empty without the option, or in rows from before it).
pub fn dense_run_layers(row: &Row) -> &[String] {
    row.keys()
        .filter_map(|k| Some((k.strip_prefix("dense_layers_b")?.parse::<u64>().ok()?, k)))
        .max_by_key(|(b, _)| *b)
        .map_or(&[], |(_, k)| strings(row, k))
}

/// True for a row whose `status` is `ok`.
pub fn ok(row: &Row) -> bool {
    text(row, "status") == Some("ok")
}

/// A short name of the row's pruning point: `2:8`, `64:2:8`, `unstructured 75 %`, `16×1 75 %`,
/// `dense`, `per-layer [vnm 64:2:8, dense]`, and the method where it is not magnitude.
pub fn point_label(row: &Row) -> String {
    let pattern = text(row, "prune.pattern")
        .or_else(|| text(row, "format.pattern"))
        .unwrap_or("?");
    let int = |c: &str| {
        let x = num(row, &format!("prune.{c}"));
        let x = if x.is_finite() {
            x
        } else {
            num(row, &format!("format.{c}"))
        };
        x.is_finite().then_some(x as i64)
    };
    // A kernel row has no pruning: its format's (measured) sparsity.
    let sparsity = Some(num(row, "prune.sparsity"))
        .filter(|s| s.is_finite())
        .unwrap_or_else(|| num(row, "format.sparsity"));
    let pct = |s: f64| format!("{:.0} %", s * 100.0);
    let mut label = match (pattern, int("n"), int("m"), int("v")) {
        ("nm", Some(n), Some(m), _) => format!("{n}:{m}"),
        ("vnm", Some(n), Some(m), Some(v)) => format!("{v}:{n}:{m}"),
        ("vector", _, _, Some(v)) if sparsity.is_finite() => format!("{v}×1 {}", pct(sparsity)),
        ("unstructured", ..) if sparsity.is_finite() => format!("unstructured {}", pct(sparsity)),
        ("csr", ..) => {
            let s = num(row, "format.sparsity");
            if s.is_finite() {
                format!("csr {}", pct(s))
            } else {
                "csr".into()
            }
        }
        // Each layer's own pattern (`fc0=vnm 64:2:8`), named as the run names it.
        ("per-layer", ..) => match row.get("prune.layer_patterns") {
            Some(Value::ListStr(layers)) => {
                let each: Vec<&str> = layers
                    .iter()
                    .map(|l| l.split_once('=').map_or(l.as_str(), |(_, p)| p))
                    .collect();
                format!("per-layer [{}]", each.join(", "))
            }
            _ => "per-layer".into(),
        },
        (p, ..) => p.to_string(),
    };
    if let Some(m) = text(row, "prune.method").filter(|m| *m != "magnitude") {
        label.push_str(&format!(" · {m}"));
    }
    label
}

impl Experiment {
    /// The label of the evaluated model `row` (an evaluate or pareto row): its
    /// [`point_label`], told apart from the experiment's other models ([`model_labels`]).
    pub fn model_label(&self, row: &Row) -> String {
        let labels = self.labels.get_or_init(|| model_labels(&self.evaluate));
        text(row, "key")
            .and_then(|k| labels.get(k).cloned())
            .unwrap_or_else(|| point_label(row))
    }
}

/// The config columns that can tell two models of one [`point_label`] apart.
const CONFIG_PREFIXES: [&str; 5] = ["dataset.", "model.", "train.", "prune.", "evaluate."];

/// Whether `column` is one of the experiment's config columns (`train.lr`, `seed`, …).
pub fn is_config_column(column: &str) -> bool {
    CONFIG_PREFIXES.iter().any(|p| column.starts_with(p)) || column == "seed"
}

/// A config value as a label shows it.
fn config_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".into(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::I64(i)) => i.to_string(),
        Some(Value::F64(x)) => format!("{x}"),
        Some(Value::Str(s)) => s.clone(),
        Some(Value::ListF64(v)) => format!("{v:?}"),
        Some(Value::ListStr(v)) => format!("[{}]", v.join(", ")),
    }
}

/// Each row's `key` → a label naming it alone among `rows`: its [`point_label`], and where
/// several rows share that label (two learning rates, say), the config values that tell them
/// apart (`2:4 (train.lr=0.01)`), or the key's first digits where none does.
pub fn model_labels(rows: &[Row]) -> BTreeMap<String, String> {
    let mut groups: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for r in rows.iter().filter(|r| text(r, "key").is_some()) {
        groups.entry(point_label(r)).or_default().push(r);
    }
    let mut out = BTreeMap::new();
    for (label, group) in groups {
        let columns: BTreeSet<&String> = group
            .iter()
            .flat_map(|r| r.keys())
            .filter(|c| is_config_column(c))
            .collect();
        let differ: Vec<&String> = columns
            .into_iter()
            .filter(|c| {
                let values: BTreeSet<String> =
                    group.iter().map(|r| config_text(r.get(*c))).collect();
                values.len() > 1
            })
            .collect();
        let mut named: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
        for r in &group {
            let Some(key) = text(r, "key") else { continue };
            let name = if differ.is_empty() {
                label.clone()
            } else {
                let extra: Vec<String> = differ
                    .iter()
                    .map(|c| format!("{c}={}", config_text(r.get(*c))))
                    .collect();
                format!("{label} ({})", extra.join(", "))
            };
            named.entry(name).or_default().insert(key);
        }
        for (name, keys) in named {
            for key in &keys {
                let name = if keys.len() > 1 {
                    format!("{name} #{}", key.chars().take(6).collect::<String>())
                } else {
                    name.clone()
                };
                out.insert(key.to_string(), name);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cols: &[(&str, Value)]) -> Row {
        cols.iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    /// Two models of one pattern (two learning rates) were two rows of one label in the trials
    /// table and one point name on the plots; identical configs fall back to their keys.
    #[test]
    fn models_of_one_label_are_told_apart_by_their_config() {
        let model = |key: &str, lr: f64, pattern: &str| {
            row(&[
                ("key", Value::Str(key.into())),
                ("prune.pattern", Value::Str(pattern.into())),
                ("train.lr", Value::F64(lr)),
                ("train.epochs", Value::I64(3)),
                ("accuracy", Value::F64(lr)),
            ])
        };
        let rows = [
            model("aaaaaaaa", 0.01, "dense"),
            model("bbbbbbbb", 0.001, "dense"),
            model("cccccccc", 0.01, "unstructured"),
            model("dddddddd", 0.01, "vector"),
            model("eeeeeeee", 0.01, "vector"),
        ];
        let l = model_labels(&rows);
        assert_eq!(l["aaaaaaaa"], "dense (train.lr=0.01)");
        assert_eq!(l["bbbbbbbb"], "dense (train.lr=0.001)");
        assert_eq!(l["cccccccc"], "unstructured", "alone: as before");
        assert_eq!(l["dddddddd"], "vector #dddddd");
        assert_eq!(l["eeeeeeee"], "vector #eeeeee");
    }

    /// Regression: a unified search's per-layer points were labelled with their base pattern
    /// (three different models all read `64×1 75 % · obs`).
    #[test]
    fn per_layer_points_are_labelled_by_their_layers() {
        let r = row(&[
            ("prune.pattern", Value::Str("per-layer".into())),
            (
                "prune.layer_patterns",
                Value::ListStr(vec!["fc0=vnm 64:2:8".into(), "fc1=dense".into()]),
            ),
            ("prune.method", Value::Str("obs".into())),
        ]);
        assert_eq!(point_label(&r), "per-layer [vnm 64:2:8, dense] · obs");
        let uniform = row(&[
            ("prune.pattern", Value::Str("vnm".into())),
            ("prune.n", Value::I64(2)),
            ("prune.m", Value::I64(8)),
            ("prune.v", Value::I64(64)),
        ]);
        assert_eq!(point_label(&uniform), "64:2:8");
    }

    /// Regression: the best-kernels table labelled every unstructured and vector-wise kernel
    /// by its pattern alone; a kernel row has no pruning, so its format's sparsity and V name it.
    #[test]
    fn kernel_rows_are_labelled_by_their_formats_sparsity() {
        let kernel = |pattern: &str, v: Value| {
            row(&[
                ("format.pattern", Value::Str(pattern.into())),
                ("format.v", v),
                ("format.sparsity", Value::F64(0.875)),
            ])
        };
        assert_eq!(
            point_label(&kernel("unstructured", Value::Null)),
            "unstructured 88 %"
        );
        assert_eq!(point_label(&kernel("vector", Value::I64(8))), "8×1 88 %");
    }
}
