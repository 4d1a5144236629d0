//! Table folders: per-worker parts, atomic replacement, pruning stale parts, run.json.

mod common;

use std::collections::BTreeMap;

use common::{dir_entries, row};
use results::{
    read_run_json, read_table, replace_table_part, run_json_path, table_dir, write_parquet,
    write_run_json, ColumnType, Row, RunSummary, StageCounts, TableMeta, TableSchema, Value,
};

fn meta() -> TableMeta {
    let schema = TableSchema::new()
        .with("key", ColumnType::Str)
        .unwrap()
        .with("accuracy", ColumnType::F64)
        .unwrap();
    TableMeta::new("quickstart", "0123abcd").with_schema(schema)
}

fn rows(worker: usize, n: usize) -> Vec<Row> {
    (0..n)
        .map(|i| {
            row([
                ("key", Value::Str(format!("w{worker}-{i}"))),
                ("accuracy", Value::F64(i as f64 / 8.0)),
            ])
        })
        .collect()
}

#[test]
fn replacing_a_part_leaves_only_the_new_rows_and_no_temporary_files() {
    let out = tempfile::tempdir().unwrap();
    let first =
        replace_table_part(out.path(), "quickstart", "prune", 0, &rows(0, 5), &meta()).unwrap();
    assert_eq!(first, out.path().join("quickstart/prune/part-000.parquet"));
    let again =
        replace_table_part(out.path(), "quickstart", "prune", 0, &rows(9, 2), &meta()).unwrap();
    assert_eq!(first, again);
    let dir = table_dir(out.path(), "quickstart", "prune").unwrap();
    assert_eq!(dir_entries(&dir), ["part-000.parquet"]);
    assert_eq!(read_table(&dir).unwrap(), rows(9, 2));
}

#[test]
fn a_failed_replacement_keeps_the_old_part() {
    let out = tempfile::tempdir().unwrap();
    let path =
        replace_table_part(out.path(), "quickstart", "prune", 3, &rows(3, 4), &meta()).unwrap();
    let bad = vec![row([("key", "x".into()), ("accuracy", "high".into())])];
    assert!(replace_table_part(out.path(), "quickstart", "prune", 3, &bad, &meta()).is_err());
    assert_eq!(read_table(&path).unwrap(), rows(3, 4));
    assert_eq!(dir_entries(path.parent().unwrap()), ["part-003.parquet"]);
}

#[test]
fn a_folder_reads_as_all_its_parts_in_worker_order() {
    let out = tempfile::tempdir().unwrap();
    for worker in [2, 0, 1] {
        replace_table_part(
            out.path(),
            "quickstart",
            "train",
            worker,
            &rows(worker, worker + 1),
            &meta(),
        )
        .unwrap();
    }
    // An empty part still has the declared columns and adds no rows.
    replace_table_part(out.path(), "quickstart", "train", 3, &[], &meta()).unwrap();
    let dir = table_dir(out.path(), "quickstart", "train").unwrap();
    // Files other tools must ignore: hidden, underscore, other extensions.
    std::fs::write(dir.join(".part-000.parquet.1-0.tmp"), b"half a file").unwrap();
    std::fs::write(dir.join("_SUCCESS"), b"").unwrap();
    let expected: Vec<Row> = (0..3).flat_map(|w| rows(w, w + 1)).collect();
    assert_eq!(read_table(&dir).unwrap(), expected);
}

#[test]
fn run_json_round_trips_and_is_written_atomically() {
    let out = tempfile::tempdir().unwrap();
    let path = run_json_path(out.path(), "quickstart").unwrap();
    let mut summary = RunSummary {
        experiment: "quickstart".into(),
        experiment_digest: "0123abcd".into(),
        cotune_version: results::COTUNE_VERSION.into(),
        started_at: "2026-11-29T21:00:00Z".into(),
        wall_s: 12.5,
        workers: 2,
        processes: 1,
        stages: BTreeMap::new(),
        extra: BTreeMap::new(),
    };
    summary.stages.insert(
        "prune".into(),
        StageCounts {
            executed: 10,
            cached: 20,
            failed: 1,
            duration_s: 3.25,
            busy: 2,
            cpu_wait_max: 0.375,
        },
    );
    summary
        .extra
        .insert("search".into(), serde_json::json!({"skipped": 4}));
    write_run_json(&path, &summary).unwrap();
    summary.wall_s = 13.0;
    write_run_json(&path, &summary).unwrap();
    assert_eq!(read_run_json(&path).unwrap(), summary);
    assert_eq!(dir_entries(path.parent().unwrap()), ["run.json"]);
}

/// A run.json written before the busy counts existed still reads, with none counted.
#[test]
fn an_older_run_json_without_busy_counts_reads() {
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("run.json");
    let stage = r#"{"executed": 1, "cached": 2, "failed": 0, "duration_s": 0.5}"#;
    let text = format!(
        r#"{{"experiment": "e", "experiment_digest": "ab", "cotune_version": "0.1.0",
            "started_at": "2026-12-01T00:00:00Z", "wall_s": 1.0, "workers": 1,
            "processes": 1, "stages": {{"kernel_tune": {stage}}}}}"#
    );
    std::fs::write(&path, text).unwrap();
    let read = read_run_json(&path).unwrap();
    let c = &read.stages["kernel_tune"];
    assert_eq!(
        (c.executed, c.cached, c.busy, c.cpu_wait_max),
        (1, 2, 0, 0.0)
    );
}

#[test]
fn a_file_written_over_a_folder_path_fails_cleanly() {
    // The target is an existing folder: the rename fails and the temporary file must go.
    let out = tempfile::tempdir().unwrap();
    let target = out.path().join("pareto.parquet");
    std::fs::create_dir(&target).unwrap();
    std::fs::write(target.join("keep"), b"x").unwrap();
    assert!(write_parquet(&target, &rows(0, 1), &meta()).is_err());
    assert_eq!(dir_entries(out.path()), ["pareto.parquet"]);
}
