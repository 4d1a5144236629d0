//! Tables (CSV with a header row, Parquet): named numeric feature columns and an integer label
//! column. Both are read into columns of `f64`, then checked and assembled the same way.

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;

use crate::split::{class_count, split, standardize, Samples};
use crate::{Dataset, DatasetError, TableSpec};

/// A table read into memory: column names in file order and one `f64` vector per column.
struct Table {
    names: Vec<String>,
    columns: Vec<Vec<f64>>,
}

impl Table {
    fn column(&self, path: &Path, name: &str) -> Result<&[f64], DatasetError> {
        match self.names.iter().position(|n| n == name) {
            Some(i) => Ok(&self.columns[i]),
            None => Err(DatasetError::MissingColumn {
                path: path.to_owned(),
                column: name.to_owned(),
                columns: self.names.clone(),
            }),
        }
    }
}

fn read_csv(path: &Path) -> Result<Table, DatasetError> {
    let mut reader = csv::Reader::from_path(path).map_err(|e| csv_error(path, e))?;
    let names: Vec<String> = reader
        .headers()
        .map_err(|e| csv_error(path, e))?
        .iter()
        .map(str::to_owned)
        .collect();
    let mut columns = vec![Vec::new(); names.len()];
    for (row, record) in reader.records().enumerate() {
        let record = record.map_err(|e| csv_error(path, e))?;
        for ((col, field), name) in columns.iter_mut().zip(record.iter()).zip(&names) {
            let v: f64 = field.trim().parse().map_err(|_| {
                DatasetError::bad(
                    path,
                    format!(
                        "row {}: column {name:?}: {field:?} is not a number",
                        row + 1
                    ),
                )
            })?;
            col.push(v);
        }
    }
    Ok(Table { names, columns })
}

fn csv_error(path: &Path, e: csv::Error) -> DatasetError {
    match e.into_kind() {
        csv::ErrorKind::Io(source) => DatasetError::Io {
            path: path.to_path_buf(),
            source,
        },
        csv::ErrorKind::UnequalLengths {
            pos,
            expected_len,
            len,
        } => DatasetError::bad(
            path,
            format!(
                "line {}: {len} fields where the header has {expected_len}",
                pos.map_or(0, |p| p.line())
            ),
        ),
        csv::ErrorKind::Utf8 { pos, .. } => DatasetError::bad(
            path,
            format!(
                "line {}: not UTF-8 text (is this a CSV file?)",
                pos.map_or(0, |p| p.line())
            ),
        ),
        kind => DatasetError::bad(path, format!("not a readable CSV file: {kind:?}")),
    }
}

/// Appends a numeric Arrow array to a column of `f64`; nulls and other types are errors.
fn push_arrow(
    path: &Path,
    name: &str,
    array: &ArrayRef,
    out: &mut Vec<f64>,
) -> Result<(), DatasetError> {
    if array.null_count() > 0 {
        return Err(DatasetError::bad(
            path,
            format!("column {name:?} has {} null values", array.null_count()),
        ));
    }
    macro_rules! extend {
        ($t:ty) => {
            out.extend(
                array
                    .as_primitive::<$t>()
                    .values()
                    .iter()
                    .map(|&v| v as f64),
            )
        };
    }
    match array.data_type() {
        DataType::Float32 => extend!(Float32Type),
        DataType::Float64 => extend!(Float64Type),
        DataType::Int8 => extend!(Int8Type),
        DataType::Int16 => extend!(Int16Type),
        DataType::Int32 => extend!(Int32Type),
        DataType::Int64 => extend!(Int64Type),
        DataType::UInt8 => extend!(UInt8Type),
        DataType::UInt16 => extend!(UInt16Type),
        DataType::UInt32 => extend!(UInt32Type),
        DataType::UInt64 => extend!(UInt64Type),
        other => {
            return Err(DatasetError::bad(
                path,
                format!("column {name:?} has type {other}, expected a number"),
            ));
        }
    }
    Ok(())
}

fn read_parquet(path: &Path) -> Result<Table, DatasetError> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let file = std::fs::File::open(path).map_err(|source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |e: &dyn std::fmt::Display| {
        DatasetError::bad(path, format!("not a readable Parquet file: {e}"))
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| bad(&e))?;
    let names: Vec<String> = builder
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let mut columns = vec![Vec::new(); names.len()];
    for batch in builder.build().map_err(|e| bad(&e))? {
        let batch = batch.map_err(|e| bad(&e))?;
        for ((col, array), name) in columns.iter_mut().zip(batch.columns()).zip(&names) {
            push_arrow(path, name, array, col)?;
        }
    }
    Ok(Table { names, columns })
}

/// Loads a CSV source.
pub(crate) fn load_csv(spec: &TableSpec) -> Result<Dataset, DatasetError> {
    load(spec, read_csv)
}

/// Loads a Parquet source.
pub(crate) fn load_parquet(spec: &TableSpec) -> Result<Dataset, DatasetError> {
    load(spec, read_parquet)
}

/// Loads a table source, reading its file with `read` ([`read_csv`] or [`read_parquet`]).
fn load(
    spec: &TableSpec,
    read: fn(&Path) -> Result<Table, DatasetError>,
) -> Result<Dataset, DatasetError> {
    let TableSpec {
        path,
        label,
        features,
        n_classes,
        standardize: do_standardize,
        test_fraction,
        split_seed,
    } = spec;
    let table = read(path)?;
    let labels_f = table.column(path, label)?;
    let mut y = Vec::with_capacity(labels_f.len());
    for (row, &v) in labels_f.iter().enumerate() {
        if !(v >= 0.0 && v.fract() == 0.0 && v <= u32::MAX as f64) {
            return Err(DatasetError::bad(
                path,
                format!("row {}: label {v} in column {label:?} is out of range (expected an integer >= 0)", row + 1),
            ));
        }
        y.push(v as u32);
    }
    let feature_names: Vec<String> = match features {
        Some(f) => f.clone(),
        None => table
            .names
            .iter()
            .filter(|n| *n != label)
            .cloned()
            .collect(),
    };
    if feature_names.is_empty() {
        return Err(DatasetError::bad(path, "no feature columns"));
    }
    let cols = feature_names
        .iter()
        .map(|n| table.column(path, n))
        .collect::<Result<Vec<_>, _>>()?;
    let n = y.len();
    if n.saturating_mul(cols.len()) > crate::VALUES_MAX {
        return Err(DatasetError::bad(
            path,
            format!(
                "{n} rows of {} features hold more than {} values, the most a data set may hold",
                cols.len(),
                crate::VALUES_MAX
            ),
        ));
    }
    let mut x = Vec::with_capacity(n * cols.len());
    for row in 0..n {
        for (col, name) in cols.iter().zip(&feature_names) {
            let v = col[row];
            if !v.is_finite() {
                return Err(DatasetError::bad(
                    path,
                    format!("row {}: feature {name:?} is {v}", row + 1),
                ));
            }
            x.push(v as f32);
        }
    }
    let k = class_count(path, &y, *n_classes)?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "table".into());
    let samples = Samples {
        name,
        n_features: cols.len(),
        n_classes: k,
        x,
        y,
        image_shape: None,
    };
    let mut d = split(samples, *test_fraction, *split_seed)?;
    if *do_standardize {
        standardize(&mut d);
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DatasetSpec;
    use std::sync::Arc;

    fn csv_spec(path: &Path, features: Option<Vec<String>>, standardize: bool) -> DatasetSpec {
        DatasetSpec::Csv(TableSpec {
            features,
            standardize,
            test_fraction: 0.25,
            split_seed: 1,
            ..TableSpec::new(path, "y")
        })
    }

    #[test]
    fn csv_selects_columns_and_keeps_rows_together() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.csv");
        // Feature a = 10·row, b = -row, label = row % 3: every row is recognisable after the split.
        let mut text = String::from("a,y,b\n");
        for r in 0..8 {
            text += &format!("{},{},{}\n", 10 * r, r % 3, -r);
        }
        std::fs::write(&p, text).unwrap();
        let d = crate::load(&csv_spec(&p, Some(vec!["b".into(), "a".into()]), false)).unwrap();
        assert_eq!(
            (d.n_train(), d.n_test(), d.n_features, d.n_classes),
            (6, 2, 2, 3)
        );
        for (row, &y) in d
            .train_x
            .chunks_exact(2)
            .chain(d.test_x.chunks_exact(2))
            .zip(d.train_y.iter().chain(&d.test_y))
        {
            let r = -row[0];
            assert_eq!(row[1], 10.0 * r);
            assert_eq!(y, r as u32 % 3);
        }
        let s = crate::load(&csv_spec(&p, None, true)).unwrap();
        let mean0: f32 = s.train_x.chunks_exact(2).map(|r| r[0]).sum::<f32>() / 6.0;
        assert!(mean0.abs() < 1e-6);
    }

    #[test]
    fn bad_csv_files_say_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.csv");
        let err = |text: &str, spec: DatasetSpec| {
            std::fs::write(&p, text).unwrap();
            crate::load(&spec).unwrap_err().to_string()
        };
        let e = err("a,y\n1,0\nNaN,1\n3,0\n4,1\n", csv_spec(&p, None, false));
        assert!(
            e.contains("bad.csv") && e.contains("row 2") && e.contains("NaN"),
            "{e}"
        );
        let e = err("a,y\n1,0\n2,-1\n3,0\n4,1\n", csv_spec(&p, None, false));
        assert!(e.contains("label -1") && e.contains("out of range"), "{e}");
        let e = err(
            "a,y\n1,0\n2,1\n3,0\n4,1\n",
            csv_spec(&p, Some(vec!["c".into()]), false),
        );
        assert!(e.contains("missing column \"c\""), "{e}");
        let e = err("a,z\n1,0\n", csv_spec(&p, None, false));
        assert!(e.contains("missing column \"y\""), "{e}");
        let e = err("a,y\n1,0\nx,1\n", csv_spec(&p, None, false));
        assert!(e.contains("\"x\" is not a number"), "{e}");
    }

    #[test]
    fn parquet_reads_mixed_numeric_columns_and_rejects_nulls() {
        use arrow_array::{Float32Array, Int64Array, RecordBatch};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.parquet");
        // Snappy, the default of pandas, pyarrow and Spark (it was refused as a disabled
        // feature).
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .build();
        let write = |f: ArrayRef| {
            let labels: ArrayRef = Arc::new(Int64Array::from(vec![0, 1, 1, 0]));
            let batch = RecordBatch::try_from_iter([("f", f), ("label", labels)]).unwrap();
            let file = std::fs::File::create(&p).unwrap();
            let mut w =
                parquet::arrow::ArrowWriter::try_new(file, batch.schema(), Some(props.clone()))
                    .unwrap();
            w.write(&batch).unwrap();
            w.close().unwrap();
        };
        let spec = DatasetSpec::Parquet(TableSpec {
            n_classes: Some(2),
            standardize: false,
            test_fraction: 0.25,
            ..TableSpec::new(&p, "label")
        });
        write(Arc::new(Float32Array::from(vec![0.5, 1.5, 2.5, 3.5])));
        let d = crate::load(&spec).unwrap();
        assert_eq!(
            (d.n_features, d.n_classes, d.n_train(), d.n_test()),
            (1, 2, 3, 1)
        );
        let mut all: Vec<f32> = d.train_x.iter().chain(&d.test_x).copied().collect();
        all.sort_by(f32::total_cmp);
        assert_eq!(all, vec![0.5, 1.5, 2.5, 3.5]);

        write(Arc::new(Float32Array::from(vec![
            Some(0.5),
            None,
            Some(2.5),
            Some(3.5),
        ])));
        let e = crate::load(&spec).unwrap_err().to_string();
        assert!(e.contains("t.parquet") && e.contains("null"), "{e}");

        std::fs::write(&p, b"not parquet").unwrap();
        let e = crate::load(&spec).unwrap_err().to_string();
        assert!(e.contains("not a readable Parquet file"), "{e}");
    }
}
