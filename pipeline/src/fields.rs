//! A trial's fields, declared once: what its key covers and what its result rows show.
//!
//! Each trial type writes one [`crate::stage::Trial::describe`], visiting its fields in key
//! order. A field goes to the key, to the columns, or to both (under a key name and a column
//! name), so the key encoding and the columns cannot drift apart. The same `describe` is run
//! twice: once into a [`CanonConfig`], once into a [`Row`].

use crate::key::{CanonConfig, CanonValue};
use keytag::Tagged;
use results::{Row, Value};

/// A value that has both a canonical (key) form and a column form.
pub trait FieldValue {
    /// The value in a key.
    fn canon(&self) -> CanonValue;
    /// The value in a result column.
    fn column(&self) -> Value;
}

impl FieldValue for u64 {
    fn canon(&self) -> CanonValue {
        CanonValue::U64(*self)
    }
    fn column(&self) -> Value {
        Value::I64(*self as i64)
    }
}

impl FieldValue for usize {
    fn canon(&self) -> CanonValue {
        CanonValue::U64(*self as u64)
    }
    fn column(&self) -> Value {
        Value::I64(*self as i64)
    }
}

impl FieldValue for f64 {
    fn canon(&self) -> CanonValue {
        CanonValue::f64(*self)
    }
    fn column(&self) -> Value {
        Value::F64(*self)
    }
}

impl FieldValue for str {
    fn canon(&self) -> CanonValue {
        CanonValue::Str(self.to_owned())
    }
    fn column(&self) -> Value {
        Value::Str(self.to_owned())
    }
}

impl FieldValue for String {
    fn canon(&self) -> CanonValue {
        self.as_str().canon()
    }
    fn column(&self) -> Value {
        self.as_str().column()
    }
}

/// An absent value is an empty list in a key (so that "absent" and any present value differ)
/// and a null in a column.
impl<T: FieldValue> FieldValue for Option<T> {
    fn canon(&self) -> CanonValue {
        CanonValue::List(self.iter().map(FieldValue::canon).collect())
    }
    fn column(&self) -> Value {
        self.as_ref().map_or(Value::Null, FieldValue::column)
    }
}

/// A tagged enum value: its tag in keys and columns (never its Rust spelling).
pub struct Tag<T: Tagged>(pub T);

impl<T: Tagged> FieldValue for Tag<T> {
    fn canon(&self) -> CanonValue {
        CanonValue::Str(self.0.tag().to_owned())
    }
    fn column(&self) -> Value {
        Value::Str(self.0.tag().to_owned())
    }
}

enum Sink<'a> {
    Key(&'a mut CanonConfig),
    Columns(&'a mut Row),
}

/// Where a trial's `describe` writes: a key's canonical config, or a row's columns.
pub struct Fields<'a> {
    sink: Sink<'a>,
}

impl<'a> Fields<'a> {
    /// Fields that go into a canonical config (column declarations are skipped).
    pub fn key(config: &'a mut CanonConfig) -> Self {
        Fields {
            sink: Sink::Key(config),
        }
    }

    /// Fields that go into a row (key-only declarations are skipped).
    pub fn columns(row: &'a mut Row) -> Self {
        Fields {
            sink: Sink::Columns(row),
        }
    }

    /// A field in the key (as `key`) and in the rows (as `column`).
    pub fn both(&mut self, key: &str, column: &str, value: &(impl FieldValue + ?Sized)) {
        match &mut self.sink {
            Sink::Key(c) => c.push(key, value.canon()),
            Sink::Columns(r) => {
                r.insert(column.to_owned(), value.column());
            }
        }
    }

    /// A field only the key covers.
    pub fn key_only(&mut self, key: &str, value: impl FnOnce() -> CanonValue) {
        if let Sink::Key(c) = &mut self.sink {
            c.push(key, value());
        }
    }

    /// A column the key does not cover (derived from key fields, or shown differently).
    pub fn column_only(&mut self, column: &str, value: impl FnOnce() -> Value) {
        if let Sink::Columns(r) = &mut self.sink {
            r.insert(column.to_owned(), value());
        }
    }
}

/// A list of integers in a key.
pub fn canon_u64s(values: impl IntoIterator<Item = u64>) -> CanonValue {
    CanonValue::List(values.into_iter().map(CanonValue::U64).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn describe(f: &mut Fields) {
        f.both("lr", "train.lr", &1e-3);
        f.both("v", "prune.v", &None::<u64>);
        f.key_only("digest", || CanonValue::Bytes(vec![1, 2]));
        f.column_only("shown", || Value::Bool(true));
    }

    #[test]
    fn one_description_feeds_key_and_columns() {
        let mut c = CanonConfig::new();
        describe(&mut Fields::key(&mut c));
        let names: Vec<&str> = c.fields().iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["lr", "v", "digest"]);
        assert_eq!(c.fields()[1].1, CanonValue::List(vec![]));
        let mut r = Row::new();
        describe(&mut Fields::columns(&mut r));
        let cols: Vec<&str> = r.keys().map(String::as_str).collect();
        assert_eq!(cols, ["prune.v", "shown", "train.lr"]);
        assert_eq!(r["prune.v"], Value::Null);
    }
}
