//! The canonical encoding of a stage's config: an ordered list of named, tagged fields.

use std::fmt;

/// One canonical value. Floats are kept by bit pattern (with `-0.0` folded into `0.0`), so
/// `1e-3` and `0.001` are the same value and no float formatting ever reaches a key.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum CanonValue {
    /// Unsigned integer.
    U64(u64),
    /// Signed integer.
    I64(i64),
    /// A float, by its bits.
    F64Bits(u64),
    /// A boolean.
    Bool(bool),
    /// A string (enum variant names are strings too).
    Str(String),
    /// Raw bytes (digests).
    Bytes(Vec<u8>),
    /// A sequence; order matters.
    List(Vec<CanonValue>),
}

impl CanonValue {
    /// A float by bits, folding negative zero into zero.
    pub fn f64(x: f64) -> Self {
        let x = if x == 0.0 { 0.0 } else { x };
        CanonValue::F64Bits(x.to_bits())
    }

    fn tag(&self) -> u8 {
        match self {
            CanonValue::U64(_) => 1,
            CanonValue::I64(_) => 2,
            CanonValue::F64Bits(_) => 3,
            CanonValue::Bool(_) => 4,
            CanonValue::Str(_) => 5,
            CanonValue::Bytes(_) => 6,
            CanonValue::List(_) => 7,
        }
    }

    fn encode_into(&self, h: &mut blake3::Hasher) {
        h.update(&[self.tag()]);
        match self {
            CanonValue::U64(v) => {
                h.update(&v.to_le_bytes());
            }
            CanonValue::I64(v) => {
                h.update(&v.to_le_bytes());
            }
            CanonValue::F64Bits(v) => {
                h.update(&v.to_le_bytes());
            }
            CanonValue::Bool(v) => {
                h.update(&[*v as u8]);
            }
            CanonValue::Str(s) => write_str(h, s),
            CanonValue::Bytes(b) => {
                h.update(&(b.len() as u64).to_le_bytes());
                h.update(b);
            }
            CanonValue::List(items) => {
                h.update(&(items.len() as u64).to_le_bytes());
                for item in items {
                    item.encode_into(h);
                }
            }
        }
    }
}

impl fmt::Display for CanonValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CanonValue::U64(v) => write!(f, "{v}"),
            CanonValue::I64(v) => write!(f, "{v}"),
            CanonValue::F64Bits(b) => write!(f, "{}", f64::from_bits(*b)),
            CanonValue::Bool(v) => write!(f, "{v}"),
            CanonValue::Str(s) => write!(f, "{s}"),
            CanonValue::Bytes(b) => {
                for byte in b.iter().take(6) {
                    write!(f, "{byte:02x}")?;
                }
                Ok(())
            }
            CanonValue::List(items) => {
                write!(f, "[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{item}")?;
                }
                write!(f, "]")
            }
        }
    }
}

/// A stage's canonical config: fields in the order the stage declares them. Two configs are
/// the same exactly when their field lists are equal.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CanonConfig {
    fields: Vec<(String, CanonValue)>,
}

impl CanonConfig {
    /// An empty config.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a field (builder style).
    pub fn with(mut self, name: &str, value: CanonValue) -> Self {
        self.push(name, value);
        self
    }

    /// Appends a field.
    pub fn push(&mut self, name: &str, value: CanonValue) {
        self.fields.push((name.to_owned(), value));
    }

    /// The fields, in order.
    pub fn fields(&self) -> &[(String, CanonValue)] {
        &self.fields
    }

    pub(crate) fn encode_into(&self, h: &mut blake3::Hasher) {
        h.update(&(self.fields.len() as u64).to_le_bytes());
        for (name, value) in &self.fields {
            write_str(h, name);
            value.encode_into(h);
        }
    }
}

/// Writes a length-prefixed UTF-8 string.
pub(crate) fn write_str(h: &mut blake3::Hasher, s: &str) {
    h.update(&(s.len() as u64).to_le_bytes());
    h.update(s.as_bytes());
}
