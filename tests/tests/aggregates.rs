//! The aggregate tables the dataflow keeps: `kernel_best.parquet` holds one row per tuned
//! format and shape (unstructured and vector-wise formats of two sparsities are two formats),
//! each its tuning's fastest measured point.

use e2e::harness::{Workspace, ROB_EXPERIMENT};
use results::{Row, Value};
use std::collections::BTreeMap;

const BIN: &str = env!("CARGO_BIN_EXE_cotune-test");

/// The columns that name a tuned format on one shape, batch, backend and device.
const FORMAT: [&str; 10] = [
    "format.pattern",
    "format.n",
    "format.m",
    "format.v",
    "format.sparsity",
    "format.rows",
    "format.cols",
    "kernel_tune.batch_tokens",
    "kernel_tune.backend",
    "device",
];

fn format_of(r: &Row) -> String {
    FORMAT
        .iter()
        .map(|c| format!("{:?}", r.get(*c).unwrap_or(&Value::Null)))
        .collect::<Vec<_>>()
        .join("|")
}

// Regression: formats that differ only in sparsity shared one row, the faster one's.
#[test]
fn kernel_best_has_one_row_per_tuned_format_with_its_fastest_point() {
    let ws = Workspace::new();
    ws.write("exp.toml", ROB_EXPERIMENT);
    assert!(ws.run_logged(BIN, "s", "o", &[]).status.success());
    let dir = results::current(&ws.path("o"), "rob").unwrap();
    let tunes = results::read_table(&dir.join("kernel_tune")).unwrap();
    let mut fastest: BTreeMap<String, f64> = BTreeMap::new();
    for r in &tunes {
        let ok = r.get("status").and_then(Value::as_str) == Some("ok");
        let baseline = r.get("baseline").and_then(Value::as_bool) == Some(true);
        let t = r.get("latency_us_median").and_then(Value::as_f64);
        if let (true, false, Some(t)) = (ok, baseline, t) {
            let best = fastest.entry(format_of(r)).or_insert(f64::INFINITY);
            *best = best.min(t);
        }
    }
    let sparsities = |pattern: &str| {
        let mut s: Vec<String> = fastest
            .keys()
            .filter(|k| k.starts_with(&format!("Str({pattern:?})")))
            .map(|k| k.split('|').nth(4).unwrap().to_owned())
            .collect();
        s.sort();
        s.dedup();
        s.len()
    };
    assert!(sparsities("unstructured") >= 2 && sparsities("vector") >= 2);
    let best = results::read_table(&dir.join("kernel_best.parquet")).unwrap();
    let got: BTreeMap<String, f64> = best
        .iter()
        .map(|r| {
            let t = r.get("latency_us_median").and_then(Value::as_f64).unwrap();
            (format_of(r), t)
        })
        .collect();
    assert_eq!(got.len(), best.len(), "two rows of one format");
    assert_eq!(got, fastest);
}
