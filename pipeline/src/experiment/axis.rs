//! `Axis<T>`: a field that takes one value or a list of values (a search axis).

use serde::de::{self, Deserialize, Deserializer, SeqAccess, Visitor};
use std::fmt;
use std::marker::PhantomData;
use toml::Spanned;

/// One value or a list of values, each with its span in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Axis<T> {
    /// The values in file order.
    pub values: Vec<Spanned<T>>,
}

impl<T> Axis<T> {
    /// The values with their spans, in file order.
    pub fn iter(&self) -> impl Iterator<Item = &Spanned<T>> {
        self.values.iter()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Axis<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Axis<T>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value or a list of values")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Axis<T>, A::Error> {
                let mut values = Vec::new();
                while let Some(v) = seq.next_element::<Spanned<T>>()? {
                    values.push(v);
                }
                if values.is_empty() {
                    return Err(de::Error::custom(
                        "an empty list gives no trials: give at least one value",
                    ));
                }
                Ok(Axis { values })
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Axis<T>, E> {
                one(de::value::BoolDeserializer::new(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Axis<T>, E> {
                one(de::value::I64Deserializer::new(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Axis<T>, E> {
                one(de::value::U64Deserializer::new(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Axis<T>, E> {
                one(de::value::F64Deserializer::new(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Axis<T>, E> {
                one(de::value::StrDeserializer::new(v))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Axis<T>, E> {
                one(de::value::StringDeserializer::new(v))
            }
        }
        fn one<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<Axis<T>, D::Error> {
            let v = T::deserialize(d)?;
            Ok(Axis {
                values: vec![Spanned::new(0..0, v)],
            })
        }
        d.deserialize_any(V(PhantomData))
    }
}
