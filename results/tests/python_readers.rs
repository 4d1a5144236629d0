//! The tables read in one line by pandas, polars and duckdb, via `scripts/read_tables.py`.
//!
//! Needs `python3` with `pandas pyarrow polars duckdb`, so the tests are `#[ignore]`d: `.ci/run`
//! runs them with `--ignored` after installing those packages; without them they fail.
//! `COTUNE_SAMPLE_OUT=DIR` also leaves the sample output there for a look.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::row;
use results::{
    pareto_front, pareto_path, replace_table_part, run_json_path, write_parquet, write_run_json,
    ColumnType, Objectives, Row, RunSummary, StageCounts, TableMeta, TableSchema, Value,
};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/read_tables.py")
}

fn require_python() {
    let ok = Command::new("python3")
        .args(["-c", "import pandas, pyarrow, polars, duckdb"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "python3 with pandas, pyarrow, polars, duckdb is needed (pip install pandas pyarrow polars duckdb)"
    );
}

fn run_script(out: &Path) -> (i32, String) {
    let output = Command::new("python3")
        .arg(script())
        .arg(out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), text)
}

fn prune_row(i: usize) -> Row {
    let pattern = ["dense", "unstructured", "nm", "vnm"][i % 4];
    let mut r = row([
        ("key", Value::Str(format!("p{i:02}"))),
        ("train_key", "t0".into()),
        ("experiment", "quickstart".into()),
        ("status", if i == 5 { "failed" } else { "ok" }.into()),
        (
            "error",
            if i == 5 {
                Value::from("diverged")
            } else {
                Value::Null
            },
        ),
        ("prune.pattern", pattern.into()),
        (
            "accuracy",
            if i == 6 {
                f64::NAN
            } else {
                0.9 - i as f64 / 100.0
            }
            .into(),
        ),
        ("cached", i.is_multiple_of(2).into()),
        ("seed", 7.into()),
    ]);
    if pattern == "vnm" {
        r.insert("prune.v".into(), 64.into());
    }
    r
}

/// A small but realistic output folder: several parts per stage, an empty part, list
/// columns, nulls, NaN, a Pareto table and run.json.
fn write_sample(out: &Path) {
    let meta = TableMeta::new("quickstart", "0123abcd");
    let prune: Vec<Row> = (0..12).map(prune_row).collect();
    let mut schema = TableSchema::infer(&prune).unwrap();
    schema.add("prune.v", Some(ColumnType::I64)).unwrap();
    let prune_meta = meta.clone().with_schema(schema);
    // Worker 0 sees no vnm trial: the declared schema still gives it the `prune.v` column.
    let (w0, w1): (Vec<Row>, Vec<Row>) = prune
        .iter()
        .cloned()
        .partition(|r| r["prune.pattern"] != Value::from("vnm"));
    replace_table_part(out, "quickstart", "prune", 0, &w0, &prune_meta).unwrap();
    replace_table_part(out, "quickstart", "prune", 1, &w1, &prune_meta).unwrap();
    replace_table_part(out, "quickstart", "prune", 2, &[], &prune_meta).unwrap();

    let tune: Vec<Row> = (0..20)
        .map(|i| {
            row([
                ("key", Value::Str(format!("k{i}"))),
                ("experiment", "quickstart".into()),
                ("status", "ok".into()),
                (
                    "kernel.params",
                    Value::ListStr(vec![format!("bn={}", 32 << (i % 3)), "stages=2".into()]),
                ),
                (
                    "latency_us",
                    Value::ListF64(vec![10.0 + i as f64, 10.5, 11.0]),
                ),
                ("latency_us_median", Value::F64(10.5)),
                (
                    "predicted_us",
                    if i % 4 == 0 {
                        Value::Null
                    } else {
                        Value::F64(9.0)
                    },
                ),
            ])
        })
        .collect();
    replace_table_part(out, "quickstart", "kernel_tune", 0, &tune, &meta).unwrap();

    let points: Vec<Objectives> = prune
        .iter()
        .enumerate()
        .map(|(i, r)| Objectives {
            accuracy: r["accuracy"].as_f64().unwrap(),
            latency_us: 100.0 - 3.0 * i as f64,
            weight_bytes: 1e6 / (1 + i % 4) as f64,
        })
        .collect();
    let pareto: Vec<Row> = pareto_front(&points)
        .into_iter()
        .map(|i| prune[i].clone())
        .collect();
    write_parquet(&pareto_path(out, "quickstart").unwrap(), &pareto, &meta).unwrap();

    let mut summary = RunSummary {
        experiment: "quickstart".into(),
        wall_s: 1.5,
        ..Default::default()
    };
    summary.stages.insert(
        "prune".into(),
        StageCounts {
            executed: 11,
            cached: 0,
            failed: 1,
            duration_s: 1.0,
            ..Default::default()
        },
    );
    write_run_json(&run_json_path(out, "quickstart").unwrap(), &summary).unwrap();
}

#[test]
#[ignore = "needs python3 with pandas, pyarrow, polars and duckdb: .ci/run runs it with --ignored"]
fn pandas_polars_and_duckdb_read_every_table_alike() {
    require_python();
    let dir = tempfile::tempdir().unwrap();
    write_sample(dir.path());
    if let Ok(keep) = std::env::var("COTUNE_SAMPLE_OUT") {
        write_sample(Path::new(&keep));
    }
    let (code, text) = run_script(dir.path());
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("quickstart/prune/: 12 rows, 10 columns"),
        "{text}"
    );
    assert!(text.contains("quickstart/kernel_tune/: 20 rows"), "{text}");
    assert!(text.contains("3 tables read"), "{text}");
}

#[test]
#[ignore = "needs python3 with pandas, pyarrow, polars and duckdb: .ci/run runs it with --ignored"]
fn the_script_fails_on_parts_whose_schemas_differ() {
    require_python();
    // Without a declared schema each worker infers its own: the folder is no longer one table.
    let dir = tempfile::tempdir().unwrap();
    let meta = TableMeta::new("quickstart", "0123abcd");
    let a = vec![row([("key", "a".into()), ("accuracy", 0.5.into())])];
    let b = vec![row([("key", "b".into()), ("prune.v", 16.into())])];
    replace_table_part(dir.path(), "quickstart", "prune", 0, &a, &meta).unwrap();
    replace_table_part(dir.path(), "quickstart", "prune", 1, &b, &meta).unwrap();
    let (code, text) = run_script(dir.path());
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("FAIL quickstart/prune/"), "{text}");
}
