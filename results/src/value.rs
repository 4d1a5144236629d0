//! Typed cells and rows: what the engine hands to the writer and gets back from the reader.
//!
//! `Value` has to live inside differential-dataflow records, so it is totally ordered and
//! hashable even though it holds `f64`: floats compare by [`f64::total_cmp`] and hash by their
//! bit pattern. Two floats are therefore equal exactly when their bits are equal: `NaN == NaN`
//! for the same payload, and `0.0 != -0.0`. This is the equality a content-addressed pipeline
//! wants (a bit-for-bit reproduction), not IEEE equality.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

/// One result row: column name → value. Names are dotted (`prune.pattern`, `latency_us_median`).
pub type Row = BTreeMap<String, Value>;

/// A typed cell of a result table.
///
/// Equality, order and hash treat floats by bit pattern (see the module docs). Serialised with
/// serde as a tagged enum; note that JSON cannot hold NaN or ±inf, binary formats can.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Value {
    /// A missing value (a Parquet null).
    Null,
    /// A boolean.
    Bool(bool),
    /// A 64-bit signed integer.
    I64(i64),
    /// A 64-bit float; any bit pattern round-trips through Parquet.
    F64(f64),
    /// A UTF-8 string.
    Str(String),
    /// A list of floats (written as `List<Float64>`).
    ListF64(Vec<f64>),
    /// A list of strings (written as `List<Utf8>`).
    ListStr(Vec<String>),
}

/// The Arrow/Parquet type of a column, as inferred from its non-null values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ColumnType {
    /// `Boolean`.
    Bool,
    /// `Int64`.
    I64,
    /// `Float64`.
    F64,
    /// `Utf8`.
    Str,
    /// `List<Float64>`.
    ListF64,
    /// `List<Utf8>`.
    ListStr,
}

impl ColumnType {
    /// The type a column takes when it holds values of both `self` and `other`: integers and
    /// floats widen to `F64`; any other pair of different types has no common type.
    pub fn unify(self, other: ColumnType) -> Option<ColumnType> {
        match (self, other) {
            (a, b) if a == b => Some(a),
            (ColumnType::I64, ColumnType::F64) | (ColumnType::F64, ColumnType::I64) => {
                Some(ColumnType::F64)
            }
            _ => None,
        }
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            ColumnType::Bool => "Boolean",
            ColumnType::I64 => "Int64",
            ColumnType::F64 => "Float64",
            ColumnType::Str => "Utf8",
            ColumnType::ListF64 => "List<Float64>",
            ColumnType::ListStr => "List<Utf8>",
        };
        f.write_str(name)
    }
}

impl Value {
    /// The column type this value needs, or `None` for `Null` (which fits any column).
    pub fn column_type(&self) -> Option<ColumnType> {
        match self {
            Value::Null => None,
            Value::Bool(_) => Some(ColumnType::Bool),
            Value::I64(_) => Some(ColumnType::I64),
            Value::F64(_) => Some(ColumnType::F64),
            Value::Str(_) => Some(ColumnType::Str),
            Value::ListF64(_) => Some(ColumnType::ListF64),
            Value::ListStr(_) => Some(ColumnType::ListStr),
        }
    }

    /// True for `Value::Null`.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The value as a float: `F64` as is, `I64` converted (large integers round). Else `None`.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::F64(x) => Some(*x),
            Value::I64(i) => Some(*i as f64),
            _ => None,
        }
    }

    /// The value as an integer, for `I64` only.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::I64(i) => Some(*i),
            _ => None,
        }
    }

    /// The value as a string slice, for `Str` only.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as a boolean, for `Bool` only.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Position of the variant in declaration order: the first key of the total order.
    fn rank(&self) -> u8 {
        match self {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::I64(_) => 2,
            Value::F64(_) => 3,
            Value::Str(_) => 4,
            Value::ListF64(_) => 5,
            Value::ListStr(_) => 6,
        }
    }
}

fn cmp_f64_slices(a: &[f64], b: &[f64]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.total_cmp(y) {
            Ordering::Equal => {}
            other => return other,
        }
    }
    a.len().cmp(&b.len())
}

impl Ord for Value {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            (Value::I64(a), Value::I64(b)) => a.cmp(b),
            (Value::F64(a), Value::F64(b)) => a.total_cmp(b),
            (Value::Str(a), Value::Str(b)) => a.cmp(b),
            (Value::ListF64(a), Value::ListF64(b)) => cmp_f64_slices(a, b),
            (Value::ListStr(a), Value::ListStr(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for Value {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Value {}

impl Hash for Value {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u8(self.rank());
        match self {
            Value::Null => {}
            Value::Bool(b) => b.hash(state),
            Value::I64(i) => i.hash(state),
            Value::F64(x) => x.to_bits().hash(state),
            Value::Str(s) => s.hash(state),
            Value::ListF64(xs) => {
                state.write_usize(xs.len());
                for x in xs {
                    x.to_bits().hash(state);
                }
            }
            Value::ListStr(xs) => xs.hash(state),
        }
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::I64(i)
    }
}

impl From<i32> for Value {
    fn from(i: i32) -> Self {
        Value::I64(i64::from(i))
    }
}

impl From<u32> for Value {
    fn from(i: u32) -> Self {
        Value::I64(i64::from(i))
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Self {
        Value::F64(x)
    }
}

impl From<f32> for Value {
    fn from(x: f32) -> Self {
        Value::F64(f64::from(x))
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl From<Vec<f64>> for Value {
    fn from(xs: Vec<f64>) -> Self {
        Value::ListF64(xs)
    }
}

impl From<Vec<String>> for Value {
    fn from(xs: Vec<String>) -> Self {
        Value::ListStr(xs)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

impl TryFrom<u64> for Value {
    type Error = std::num::TryFromIntError;
    fn try_from(i: u64) -> Result<Self, Self::Error> {
        i64::try_from(i).map(Value::I64)
    }
}

impl TryFrom<usize> for Value {
    type Error = std::num::TryFromIntError;
    fn try_from(i: usize) -> Result<Self, Self::Error> {
        i64::try_from(i).map(Value::I64)
    }
}
