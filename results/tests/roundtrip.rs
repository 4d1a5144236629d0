//! Writing rows and reading them back: exact values, schema inference, column order, footer.

mod common;

use common::{column_names, column_types, dir_entries, row};
use results::{
    read_created_by, read_metadata, read_table, write_parquet, ColumnType, ResultsError, Row,
    TableMeta, TableSchema, Value, SCHEMA_VERSION,
};

fn meta() -> TableMeta {
    TableMeta::new("quickstart", "0123abcd")
}

/// Floats whose bit patterns a lossy path would change.
fn awkward_floats() -> Vec<f64> {
    vec![
        f64::NAN,
        -f64::NAN,
        f64::from_bits(0x7ff8_0000_dead_beef), // NaN with a payload
        f64::from_bits(0x7ff0_0000_0000_0001), // signalling NaN
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        f64::MIN_POSITIVE / 4.0, // subnormal
        f64::MAX,
        f64::MIN,
        0.1,
    ]
}

fn every_variant_rows() -> Vec<Row> {
    let floats = awkward_floats();
    let mut rows = Vec::new();
    for (i, &x) in floats.iter().enumerate() {
        let i = i as i64;
        rows.push(row([
            ("key", Value::Str(format!("k{i}"))),
            ("flag", Value::Bool(i % 3 == 0)),
            (
                "count",
                Value::I64([i64::MIN, i64::MAX, 0, -1][i as usize % 4]),
            ),
            ("x", Value::F64(x)),
            (
                "name",
                Value::Str(["", "é ∑ 🚀", "a\0b", "plain"][i as usize % 4].to_owned()),
            ),
            ("xs", Value::ListF64(floats[..i as usize % 5].to_vec())),
            ("tags", Value::ListStr(vec![String::new(); i as usize % 3])),
        ]));
    }
    // Nulls in every column, including the list columns.
    rows.push(row([
        ("key", Value::Str("nulls".into())),
        ("flag", Value::Null),
        ("count", Value::Null),
        ("x", Value::Null),
        ("name", Value::Null),
        ("xs", Value::Null),
        ("tags", Value::Null),
    ]));
    rows
}

#[test]
fn every_variant_round_trips_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let rows = every_variant_rows();
    write_parquet(&path, &rows, &meta()).unwrap();
    let back = read_table(&path).unwrap();
    assert_eq!(back, rows); // Value equality compares floats by bits.
    for (a, b) in rows.iter().zip(&back) {
        let (Value::F64(x), Value::F64(y)) = (&a["x"], &b["x"]) else {
            continue;
        };
        assert_eq!(x.to_bits(), y.to_bits());
    }
    assert_eq!(
        column_types(&path),
        [
            ("key", "Utf8"),
            ("count", "Int64"),
            ("flag", "Boolean"),
            ("name", "Utf8"),
            ("tags", "List(Utf8)"),
            ("x", "Float64"),
            ("xs", "List(Float64)"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
}

#[test]
fn a_missing_cell_reads_back_as_null() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let rows = vec![
        row([("key", "a".into()), ("accuracy", 0.5.into())]),
        row([("key", "b".into()), ("error", "diverged".into())]),
    ];
    write_parquet(&path, &rows, &meta()).unwrap();
    let back = read_table(&path).unwrap();
    let expected = vec![
        row([
            ("key", "a".into()),
            ("accuracy", 0.5.into()),
            ("error", Value::Null),
        ]),
        row([
            ("key", "b".into()),
            ("accuracy", Value::Null),
            ("error", "diverged".into()),
        ]),
    ];
    assert_eq!(back, expected);
}

#[test]
fn an_all_null_column_is_written_as_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let rows = vec![row([("key", "a".into()), ("error", Value::Null)])];
    write_parquet(&path, &rows, &meta()).unwrap();
    assert_eq!(
        column_types(&path)[1],
        ("error".to_owned(), "Utf8".to_owned())
    );
    assert_eq!(read_table(&path).unwrap(), rows);
}

#[test]
fn integers_and_floats_in_one_column_widen_to_float64() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let rows = vec![
        row([("v", Value::I64(3))]),
        row([("v", Value::F64(0.5))]),
        row([("v", Value::I64(-(1 << 53)))]),
    ];
    write_parquet(&path, &rows, &meta()).unwrap();
    let back: Vec<Value> = read_table(&path)
        .unwrap()
        .into_iter()
        .map(|r| r["v"].clone())
        .collect();
    assert_eq!(back, [3.0, 0.5, -(2f64.powi(53))].map(Value::F64));
}

#[test]
fn a_type_conflict_names_the_column_and_both_types_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let rows = vec![
        row([("key", "a".into()), ("prune.v", Value::I64(16))]),
        row([("key", "b".into()), ("prune.v", Value::Str("16".into()))]),
    ];
    let err = write_parquet(&path, &rows, &meta()).unwrap_err();
    match &err {
        ResultsError::TypeConflict {
            column,
            first,
            second,
        } => {
            assert_eq!(column, "prune.v");
            assert_eq!((*first, *second), (ColumnType::I64, ColumnType::Str));
        }
        other => panic!("expected a type conflict, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "column `prune.v` holds both Int64 and Utf8 values"
    );
    assert!(dir_entries(dir.path()).is_empty());
}

#[test]
fn rows_that_contradict_the_declared_schema_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let schema = TableSchema::new()
        .with("accuracy", ColumnType::F64)
        .unwrap();
    let rows = vec![row([("accuracy", Value::Bool(true))])];
    let err = write_parquet(&path, &rows, &meta().with_schema(schema)).unwrap_err();
    assert!(matches!(err, ResultsError::TypeConflict { ref column, .. } if column == "accuracy"));
    assert!(dir_entries(dir.path()).is_empty());
}

#[test]
fn columns_are_ordered_key_parents_fixed_then_sorted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let rows = vec![row([
        ("zeta", 1.into()),
        ("status", "ok".into()),
        ("accuracy", 0.9.into()),
        ("train_key", "t".into()),
        ("error", Value::Null),
        ("experiment", "quickstart".into()),
        ("dataset_key", "d".into()),
        ("key", "k".into()),
        ("prune.pattern", "vnm".into()),
        ("keyed", 2.into()),
    ])];
    write_parquet(&path, &rows, &meta()).unwrap();
    assert_eq!(
        column_names(&path),
        [
            "key",
            "dataset_key",
            "train_key",
            "experiment",
            "status",
            "error",
            "accuracy",
            "keyed",
            "prune.pattern",
            "zeta"
        ]
    );
}

#[test]
fn the_footer_carries_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    let mut meta = meta();
    meta.extra.insert("host".into(), "ci-1".into());
    meta.extra
        .insert("experiment".into(), "an extra key cannot override".into());
    write_parquet(&path, &[row([("key", "a".into())])], &meta).unwrap();
    let kv = read_metadata(&path).unwrap();
    let expected: Vec<(String, String)> = [
        ("cotune_version", env!("CARGO_PKG_VERSION").to_owned()),
        ("experiment", "quickstart".to_owned()),
        ("experiment_digest", "0123abcd".to_owned()),
        ("host", "ci-1".to_owned()),
        ("schema_version", SCHEMA_VERSION.to_string()),
    ]
    .map(|(k, v)| (k.to_owned(), v))
    .into();
    assert_eq!(kv.into_iter().collect::<Vec<_>>(), expected);
    assert_eq!(
        read_created_by(&path).unwrap().as_deref(),
        Some(format!("cotune version {}", env!("CARGO_PKG_VERSION")).as_str())
    );
}

#[test]
fn files_are_zstd_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.parquet");
    write_parquet(&path, &every_variant_rows(), &meta()).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    use parquet::file::reader::FileReader;
    let group = reader.metadata().row_group(0);
    for column in group.columns() {
        assert!(
            matches!(column.compression(), parquet::basic::Compression::ZSTD(_)),
            "{:?}",
            column.column_path()
        );
    }
}

#[test]
fn an_empty_table_is_a_valid_file_with_the_declared_columns() {
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("bare.parquet");
    write_parquet(&bare, &[], &meta()).unwrap();
    assert_eq!(column_names(&bare), ["key"]);
    assert_eq!(read_table(&bare).unwrap(), Vec::<Row>::new());

    let declared = dir.path().join("declared.parquet");
    let schema = TableSchema::new()
        .with("key", ColumnType::Str)
        .unwrap()
        .with("latency_us", ColumnType::ListF64)
        .unwrap()
        .with("accuracy", ColumnType::F64)
        .unwrap();
    write_parquet(&declared, &[], &meta().with_schema(schema)).unwrap();
    assert_eq!(
        column_types(&declared),
        [
            ("key", "Utf8"),
            ("accuracy", "Float64"),
            ("latency_us", "List(Float64)")
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(read_table(&declared).unwrap(), Vec::<Row>::new());
    assert_eq!(
        read_metadata(&declared).unwrap()["experiment"],
        "quickstart"
    );
}
