//! The reader: a table folder (every part) or one file back into rows, and footer metadata.
//!
//! Each row read back holds every column of its file, `Value::Null` where the cell is null, so
//! a row written without some column comes back with that column as `Null`. Types map back
//! exactly (`Int64` → `I64`, `Float64` → `F64` bit for bit, …); a few types other tools write
//! (`Int32`, `Float32`, large and view strings, large lists) are read too.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::error::ResultsError;
use crate::value::{Row, Value};

/// The footer key under which arrow-rs stores its own schema; not cotune metadata.
const ARROW_SCHEMA_KEY: &str = "ARROW:schema";

/// The part files of a table folder, sorted by name: `*.parquet`, hidden (`.`) and `_` files
/// left out the way pyarrow does. A file path is returned as is.
pub fn table_files(path: &Path) -> Result<Vec<PathBuf>, ResultsError> {
    let meta = fs::metadata(path).map_err(ResultsError::io(path))?;
    if meta.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    for entry in fs::read_dir(path).map_err(ResultsError::io(path))? {
        let entry = entry.map_err(ResultsError::io(path))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let visible = !name.starts_with('.') && !name.starts_with('_');
        if visible && name.ends_with(".parquet") && entry.path().is_file() {
            files.push(entry.path());
        }
    }
    files.sort();
    Ok(files)
}

/// Reads every part of a table folder (in name order), or one file, into rows.
///
/// An empty folder is an empty table; a missing path is an [`ResultsError::Io`] error.
pub fn read_table(path: &Path) -> Result<Vec<Row>, ResultsError> {
    let mut rows = Vec::new();
    for file in table_files(path)? {
        read_file(&file, &mut rows)?;
    }
    Ok(rows)
}

fn open(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>, ResultsError> {
    let file = File::open(path).map_err(ResultsError::io(path))?;
    ParquetRecordBatchReaderBuilder::try_new(file).map_err(|source| ResultsError::Parquet {
        path: path.to_path_buf(),
        source,
    })
}

fn read_file(path: &Path, rows: &mut Vec<Row>) -> Result<(), ResultsError> {
    let reader = open(path)?
        .build()
        .map_err(|source| ResultsError::Parquet {
            path: path.to_path_buf(),
            source,
        })?;
    for batch in reader {
        let batch = batch.map_err(|source| ResultsError::Arrow {
            path: path.to_path_buf(),
            source,
        })?;
        let first = rows.len();
        rows.resize_with(first + batch.num_rows(), Row::new);
        let schema = batch.schema();
        for (field, array) in schema.fields().iter().zip(batch.columns()) {
            let values = column_values(array).ok_or_else(|| ResultsError::UnsupportedColumn {
                path: path.to_path_buf(),
                column: field.name().clone(),
                data_type: field.data_type().to_string(),
            })?;
            for (row, value) in rows[first..].iter_mut().zip(values) {
                row.insert(field.name().clone(), value);
            }
        }
    }
    Ok(())
}

/// The footer key-value metadata of a file, or of the first part of a table folder, without
/// arrow-rs's internal `ARROW:schema` entry.
pub fn read_metadata(path: &Path) -> Result<BTreeMap<String, String>, ResultsError> {
    let files = table_files(path)?;
    let first = files.first().ok_or_else(|| ResultsError::NoTable {
        path: path.to_path_buf(),
    })?;
    let builder = open(first)?;
    let pairs = builder.metadata().file_metadata().key_value_metadata();
    Ok(pairs
        .into_iter()
        .flatten()
        .filter(|kv| kv.key != ARROW_SCHEMA_KEY)
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect())
}

/// The Parquet `created_by` string of a file, or of the first part of a table folder.
pub fn read_created_by(path: &Path) -> Result<Option<String>, ResultsError> {
    let files = table_files(path)?;
    let first = files.first().ok_or_else(|| ResultsError::NoTable {
        path: path.to_path_buf(),
    })?;
    let builder = open(first)?;
    Ok(builder
        .metadata()
        .file_metadata()
        .created_by()
        .map(str::to_owned))
}

/// Converts one column, or `None` if its type has no `Value` counterpart.
fn column_values(array: &ArrayRef) -> Option<Vec<Value>> {
    let n = array.len();
    let cell = |i: usize, f: &dyn Fn(usize) -> Option<Value>| -> Option<Value> {
        if array.is_null(i) {
            Some(Value::Null)
        } else {
            f(i)
        }
    };
    let collect = |f: &dyn Fn(usize) -> Option<Value>| (0..n).map(|i| cell(i, f)).collect();
    match array.data_type() {
        DataType::Null => Some(vec![Value::Null; n]),
        DataType::Boolean => {
            let a = array.as_boolean();
            collect(&|i| Some(Value::Bool(a.value(i))))
        }
        DataType::Int64 => {
            let a = array.as_primitive::<Int64Type>();
            collect(&|i| Some(Value::I64(a.value(i))))
        }
        DataType::Int32 => {
            let a = array.as_primitive::<Int32Type>();
            collect(&|i| Some(Value::I64(i64::from(a.value(i)))))
        }
        DataType::Float64 => {
            let a = array.as_primitive::<Float64Type>();
            collect(&|i| Some(Value::F64(a.value(i))))
        }
        DataType::Float32 => {
            let a = array.as_primitive::<Float32Type>();
            collect(&|i| Some(Value::F64(f64::from(a.value(i)))))
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
            let strings = string_values(array)?;
            collect(&|i| Some(Value::Str(strings[i].clone()?)))
        }
        DataType::List(_) | DataType::LargeList(_) => {
            let items: Vec<Option<ArrayRef>> = match array.data_type() {
                DataType::List(_) => array.as_list::<i32>().iter().collect(),
                _ => array.as_list::<i64>().iter().collect(),
            };
            collect(&|i| list_value(items[i].as_ref()?))
        }
        _ => None,
    }
}

/// The strings of a string column of any offset width (`None` cells for nulls).
fn string_values(array: &ArrayRef) -> Option<Vec<Option<String>>> {
    let owned =
        |it: &mut dyn Iterator<Item = Option<&str>>| it.map(|s| s.map(str::to_owned)).collect();
    match array.data_type() {
        DataType::Utf8 => Some(owned(&mut array.as_string::<i32>().iter())),
        DataType::LargeUtf8 => Some(owned(&mut array.as_string::<i64>().iter())),
        DataType::Utf8View => Some(owned(&mut array.as_string_view().iter())),
        _ => None,
    }
}

/// A list cell as `ListF64` or `ListStr`; `None` for other item types or null items.
fn list_value(items: &ArrayRef) -> Option<Value> {
    if items.null_count() > 0 {
        return None;
    }
    match items.data_type() {
        DataType::Float64 => Some(Value::ListF64(
            items.as_primitive::<Float64Type>().values().to_vec(),
        )),
        DataType::Float32 => Some(Value::ListF64(
            items
                .as_primitive::<Float32Type>()
                .values()
                .iter()
                .map(|x| f64::from(*x))
                .collect(),
        )),
        _ => {
            let strings = string_values(items)?;
            strings
                .into_iter()
                .collect::<Option<Vec<_>>>()
                .map(Value::ListStr)
        }
    }
}
