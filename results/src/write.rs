//! The Parquet writer: rows → one Arrow batch → one ZSTD-compressed file, replaced atomically,
//! with cotune's provenance in the footer.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, ListBuilder, StringBuilder,
};
use arrow_array::{ArrayRef, RecordBatch};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};

use crate::atomic::write_atomically;
use crate::error::ResultsError;
use crate::schema::TableSchema;
use crate::value::{ColumnType, Row, Value};

/// Version of the table layout (column naming, types, metadata keys). Bumped by hand when a
/// reader of the old layout would misread the new one.
pub const SCHEMA_VERSION: u32 = 1;

/// The cotune version every crate of the workspace shares.
pub const COTUNE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Rows per Parquet row group: large enough that a table is usually one group.
const ROW_GROUP_ROWS: usize = 64 * 1024;

/// Footer key-value metadata names written for every table.
pub mod keys {
    /// The experiment name.
    pub const EXPERIMENT: &str = "experiment";
    /// The digest of the experiment file's canonical form.
    pub const EXPERIMENT_DIGEST: &str = "experiment_digest";
    /// The cotune version that wrote the file.
    pub const COTUNE_VERSION: &str = "cotune_version";
    /// [`crate::SCHEMA_VERSION`] at write time.
    pub const SCHEMA_VERSION: &str = "schema_version";
}

/// What a table file records about where it came from, and the columns it must have.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableMeta {
    /// The experiment name.
    pub experiment: String,
    /// The digest of the experiment (hex).
    pub experiment_digest: String,
    /// The cotune version; also written as the Parquet `created_by`.
    pub cotune_version: String,
    /// The table layout version, normally [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// More footer key-value pairs; a key equal to one of [`keys`] is ignored.
    pub extra: BTreeMap<String, String>,
    /// Columns the file has even when no row holds them (an empty table still gets them):
    /// merged with the rows' own schema. Give every worker the same one so that all parts of
    /// a table share a schema.
    pub schema: TableSchema,
}

impl TableMeta {
    /// Metadata for `experiment` with this build's version, [`SCHEMA_VERSION`], no extra pairs
    /// and no declared columns.
    pub fn new(experiment: impl Into<String>, experiment_digest: impl Into<String>) -> Self {
        Self {
            experiment: experiment.into(),
            experiment_digest: experiment_digest.into(),
            cotune_version: COTUNE_VERSION.to_owned(),
            schema_version: SCHEMA_VERSION,
            extra: BTreeMap::new(),
            schema: TableSchema::new(),
        }
    }

    /// The same metadata with `schema` as the declared columns.
    pub fn with_schema(mut self, schema: TableSchema) -> Self {
        self.schema = schema;
        self
    }

    /// The footer key-value pairs: the fixed [`keys`], then `extra` in key order.
    pub fn key_values(&self) -> Vec<(String, String)> {
        let fixed = [
            (keys::EXPERIMENT, self.experiment.clone()),
            (keys::EXPERIMENT_DIGEST, self.experiment_digest.clone()),
            (keys::COTUNE_VERSION, self.cotune_version.clone()),
            (keys::SCHEMA_VERSION, self.schema_version.to_string()),
        ];
        let mut pairs: Vec<(String, String)> = fixed
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        for (k, v) in &self.extra {
            if !fixed.iter().any(|(f, _)| f == k) {
                pairs.push((k.clone(), v.clone()));
            }
        }
        pairs
    }
}

/// The writer defaults in one place: ZSTD, `created_by`, footer metadata, row-group size.
pub fn writer_properties(meta: &TableMeta) -> WriterProperties {
    let kv = meta
        .key_values()
        .into_iter()
        .map(|(k, v)| KeyValue::new(k, v))
        .collect();
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_created_by(format!("cotune version {}", meta.cotune_version))
        .set_key_value_metadata(Some(kv))
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .build()
}

/// Writes `rows` to one Parquet file at `path`, atomically (temporary name in the same folder, fsync, rename: a
/// failed write leaves nothing visible and the old file, if any, intact).
///
/// The schema is `meta.schema` merged with the rows' columns (see [`TableSchema`]); a row
/// without a column writes null there. A table with no column at all gets `key: Utf8`, so
/// that readers always find a valid file. Rows are written in the order given.
pub fn write_parquet(path: &Path, rows: &[Row], meta: &TableMeta) -> Result<(), ResultsError> {
    let mut schema = meta.schema.clone();
    schema.merge(&TableSchema::infer(rows)?)?;
    if schema.is_empty() {
        schema.add("key", Some(ColumnType::Str))?;
    }
    let arrow_schema = schema.to_arrow();
    let columns = schema
        .ordered()
        .into_iter()
        .map(|(name, ty)| build_column(name, ty.unwrap_or(ColumnType::Str), rows))
        .collect::<Result<Vec<_>, _>>()?;
    let arrow_err = |source| ResultsError::Arrow {
        path: path.to_path_buf(),
        source,
    };
    let batch = RecordBatch::try_new(arrow_schema.clone(), columns).map_err(arrow_err)?;
    let parquet_err = |source| ResultsError::Parquet {
        path: path.to_path_buf(),
        source,
    };
    write_atomically(path, |file| {
        let props = writer_properties(meta);
        let mut writer =
            ArrowWriter::try_new(file, arrow_schema, Some(props)).map_err(parquet_err)?;
        if batch.num_rows() > 0 {
            writer.write(&batch).map_err(parquet_err)?;
        }
        writer.into_inner().map_err(parquet_err)
    })
}

/// One column's array; `ty` is the unified type, so every non-null value fits it.
fn build_column(name: &str, ty: ColumnType, rows: &[Row]) -> Result<ArrayRef, ResultsError> {
    let cells = rows.iter().map(|row| row.get(name).unwrap_or(&Value::Null));
    let mismatch = |v: &Value| ResultsError::TypeConflict {
        column: name.to_owned(),
        first: ty,
        // Null never mismatches, so a type is always there.
        second: v.column_type().unwrap_or(ty),
    };
    let array: ArrayRef = match ty {
        ColumnType::Bool => {
            let mut b = BooleanBuilder::with_capacity(rows.len());
            for v in cells {
                match v {
                    Value::Null => b.append_null(),
                    Value::Bool(x) => b.append_value(*x),
                    other => return Err(mismatch(other)),
                }
            }
            Arc::new(b.finish())
        }
        ColumnType::I64 => {
            let mut b = Int64Builder::with_capacity(rows.len());
            for v in cells {
                match v {
                    Value::Null => b.append_null(),
                    Value::I64(x) => b.append_value(*x),
                    other => return Err(mismatch(other)),
                }
            }
            Arc::new(b.finish())
        }
        ColumnType::F64 => {
            let mut b = Float64Builder::with_capacity(rows.len());
            for v in cells {
                match v {
                    Value::Null => b.append_null(),
                    Value::F64(x) => b.append_value(*x),
                    // The documented widening of a mixed integer/float column.
                    Value::I64(x) => b.append_value(*x as f64),
                    other => return Err(mismatch(other)),
                }
            }
            Arc::new(b.finish())
        }
        ColumnType::Str => {
            let mut b = StringBuilder::new();
            for v in cells {
                match v {
                    Value::Null => b.append_null(),
                    Value::Str(x) => b.append_value(x),
                    other => return Err(mismatch(other)),
                }
            }
            Arc::new(b.finish())
        }
        ColumnType::ListF64 => {
            let mut b = ListBuilder::new(Float64Builder::new());
            for v in cells {
                match v {
                    Value::Null => b.append_null(),
                    Value::ListF64(xs) => {
                        b.values().append_slice(xs);
                        b.append(true);
                    }
                    other => return Err(mismatch(other)),
                }
            }
            Arc::new(b.finish())
        }
        ColumnType::ListStr => {
            let mut b = ListBuilder::new(StringBuilder::new());
            for v in cells {
                match v {
                    Value::Null => b.append_null(),
                    Value::ListStr(xs) => {
                        for x in xs {
                            b.values().append_value(x);
                        }
                        b.append(true);
                    }
                    other => return Err(mismatch(other)),
                }
            }
            Arc::new(b.finish())
        }
    };
    Ok(array)
}
