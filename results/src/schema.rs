//! Table schemas: which columns a table has, their types, and the order they are written in.
//!
//! A schema is the union of the rows' columns. A column's type comes from its non-null values;
//! `Int64` and `Float64` in one column widen to `Float64`, any other mix is a
//! [`ResultsError::TypeConflict`]. A column seen only as null has no type yet and is written as
//! nullable `Utf8` (the type of `error`, the usual all-null column).
//!
//! Every part file of a table must have the same schema, or polars and pyarrow refuse (or
//! silently drop columns of) the folder. Workers that see different rows therefore pass a
//! declared schema, merged from all workers or written by hand, as [`crate::TableMeta::schema`].

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema};
use serde::{Deserialize, Serialize};

use crate::error::ResultsError;
use crate::value::{ColumnType, Row};

/// Columns written first, in this order, after `key` and the parent `*_key` columns.
const LEADING: [&str; 3] = ["experiment", "status", "error"];

/// The columns of a table and their types (`None`: only nulls seen, written as `Utf8`).
///
/// Ordered and hashable so that the engine can union per-worker schemas inside a dataflow.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TableSchema {
    columns: BTreeMap<String, Option<ColumnType>>,
}

impl TableSchema {
    /// An empty schema.
    pub fn new() -> Self {
        Self::default()
    }

    /// The schema of `rows`: every column any row has, typed by its non-null values.
    pub fn infer(rows: &[Row]) -> Result<Self, ResultsError> {
        let mut schema = Self::new();
        for row in rows {
            for (name, value) in row {
                schema.add(name, value.column_type())?;
            }
        }
        Ok(schema)
    }

    /// Builder form of [`TableSchema::add`] for a typed column.
    pub fn with(mut self, name: &str, ty: ColumnType) -> Result<Self, ResultsError> {
        self.add(name, Some(ty))?;
        Ok(self)
    }

    /// Adds a column, or unifies its type with the one already there (`None` fits any type).
    pub fn add(&mut self, name: &str, ty: Option<ColumnType>) -> Result<(), ResultsError> {
        match self.columns.get_mut(name) {
            None => {
                self.columns.insert(name.to_owned(), ty);
            }
            Some(existing) => {
                if let (Some(first), Some(second)) = (*existing, ty) {
                    let unified =
                        first
                            .unify(second)
                            .ok_or_else(|| ResultsError::TypeConflict {
                                column: name.to_owned(),
                                first,
                                second,
                            })?;
                    *existing = Some(unified);
                } else if existing.is_none() {
                    *existing = ty;
                }
            }
        }
        Ok(())
    }

    /// Unifies every column of `other` into `self`.
    pub fn merge(&mut self, other: &TableSchema) -> Result<(), ResultsError> {
        for (name, ty) in &other.columns {
            self.add(name, *ty)?;
        }
        Ok(())
    }

    /// The type of a column: `None` if absent, `Some(None)` if only nulls were seen.
    pub fn get(&self, name: &str) -> Option<Option<ColumnType>> {
        self.columns.get(name).copied()
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// True when there are no columns.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// The columns in write order: `key`, the parent `*_key` columns sorted, `experiment`,
    /// `status`, `error`, then every other column sorted by name.
    pub fn ordered(&self) -> Vec<(&str, Option<ColumnType>)> {
        let mut columns: Vec<(&str, Option<ColumnType>)> =
            self.columns.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        columns.sort_by_key(|(name, _)| (order_group(name), *name));
        columns
    }

    /// The Arrow schema of the file, every field nullable.
    pub(crate) fn to_arrow(&self) -> Arc<Schema> {
        let fields: Vec<Field> = self
            .ordered()
            .into_iter()
            .map(|(name, ty)| Field::new(name, arrow_type(ty.unwrap_or(ColumnType::Str)), true))
            .collect();
        Arc::new(Schema::new(fields))
    }
}

/// The group a column name sorts in: 0 `key`, 1 parent keys, 2–4 the fixed names, 5 the rest.
fn order_group(name: &str) -> usize {
    if name == "key" {
        0
    } else if name.ends_with("_key") {
        1
    } else if let Some(i) = LEADING.iter().position(|l| *l == name) {
        2 + i
    } else {
        2 + LEADING.len()
    }
}

/// The Arrow type a column of `ty` is written as.
pub(crate) fn arrow_type(ty: ColumnType) -> DataType {
    match ty {
        ColumnType::Bool => DataType::Boolean,
        ColumnType::I64 => DataType::Int64,
        ColumnType::F64 => DataType::Float64,
        ColumnType::Str => DataType::Utf8,
        ColumnType::ListF64 => {
            DataType::List(Arc::new(Field::new("item", DataType::Float64, true)))
        }
        ColumnType::ListStr => DataType::List(Arc::new(Field::new("item", DataType::Utf8, true))),
    }
}
