//! Result tables of cotune: the Parquet schema, an atomic writer, a reader, and the aggregates
//! computed over rows (the Pareto front).
//!
//! The engine hands over rows as ordered maps of typed cells ([`Row`], [`Value`]); each timely
//! worker writes its own part of each stage table into the step's [`Generation`], which is
//! then published whole ([`replace_table_part`] writes one part in place), and readers
//! (pandas, polars, duckdb, or [`read_table`]) see the folder `<out>/<experiment>/<stage>/` as
//! one table. Every file carries the experiment digest, cotune version and
//! [`SCHEMA_VERSION`] in its footer.
//!
//! ```
//! use results::{read_table, write_parquet, Row, TableMeta, Value};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("prune.parquet");
//! let row: Row = [("key".to_owned(), Value::from("ab12")), ("sparsity".to_owned(), 0.75.into())]
//!     .into_iter()
//!     .collect();
//! write_parquet(&path, &[row.clone()], &TableMeta::new("quickstart", "d1g3st")).unwrap();
//! assert_eq!(read_table(&path).unwrap(), vec![row]);
//! ```

#![forbid(missing_docs)]
#![forbid(unsafe_code)]

mod atomic;
mod error;
mod generation;
mod measured;
mod pareto;
mod read;
mod run;
mod schema;
mod table;
mod value;
mod write;

pub use error::ResultsError;
pub use generation::{check_writable, current, generations_dir, is_moved_aside, Generation};
pub use measured::{dense_drift, measured_points, session_spread};
pub use pareto::{pareto_front, pareto_front_with_ties, MeasuredPoint, Objectives};
pub use read::{read_created_by, read_metadata, read_table, table_files};
pub use run::{read_run_json, write_run_json, RunSummary, StageCounts};
pub use schema::TableSchema;
pub use table::{
    experiment_dir, pareto_path, part_file_name, replace_table_part, run_json_path, table_dir,
};
pub use value::{ColumnType, Row, Value};
pub use write::{
    keys, write_parquet, writer_properties, TableMeta, COTUNE_VERSION, SCHEMA_VERSION,
};
