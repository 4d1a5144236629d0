//! Explicit string tags for domain enums: the spelling an enum value has in experiment files,
//! content keys and result columns, written once next to each variant and independent of its
//! Rust name.
//!
//! A key must not change when someone renames a Rust variant, so no key or column is ever
//! built from `format!("{:?}")`. [`tagged_enum!`] declares an enum with a tag per variant and
//! derives from that one list: [`Tagged`] (`tag`, `from_tag`, `ALL`), `Display`, `FromStr`,
//! and serde (a tag in, a tag out; an unknown tag is an error listing the allowed ones).
//!
//! ```
//! keytag::tagged_enum! {
//!     /// How fast.
//!     pub enum Speed {
//!         /// Slowly.
//!         Slow = "slow",
//!         /// Quickly.
//!         Fast = "fast",
//!     }
//! }
//! use keytag::Tagged;
//! assert_eq!(Speed::Fast.tag(), "fast");
//! assert_eq!(Speed::from_tag("slow"), Some(Speed::Slow));
//! assert_eq!(Speed::tags(), ["slow", "fast"]);
//! assert_eq!("fast".parse::<Speed>().unwrap(), Speed::Fast);
//! assert!("medium".parse::<Speed>().unwrap_err().to_string().contains("`slow`, `fast`"));
//! ```
#![forbid(unsafe_code)]
#![forbid(missing_docs)]

#[doc(hidden)]
pub use serde as __serde;

/// An enum whose every value has a fixed string tag.
pub trait Tagged: Copy + Eq + 'static {
    /// Every value, in declaration order.
    const ALL: &'static [Self];

    /// The value's tag: what files, keys and columns spell it as.
    fn tag(self) -> &'static str;

    /// The value of a tag, if any has it.
    fn from_tag(tag: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.tag() == tag)
    }

    /// Every tag, in declaration order.
    fn tags() -> Vec<&'static str> {
        Self::ALL.iter().map(|v| v.tag()).collect()
    }
}

/// A tag that names no value of an enum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownTag {
    /// What was given.
    pub given: String,
    /// What is allowed.
    pub allowed: &'static [&'static str],
}

impl std::fmt::Display for UnknownTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown value `{}`, expected one of ", self.given)?;
        for (i, t) in self.allowed.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "`{t}`")?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownTag {}

/// Declares an enum of unit variants, each with its tag (`Variant = "tag"`), and derives
/// `Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash`, [`Tagged`], `Display` (the tag),
/// `FromStr` and serde from the tags. Attributes on the enum and on each variant are kept
/// (`#[derive(Default)]` with `#[default]` works).
#[macro_export]
macro_rules! tagged_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $tag:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every tag, in declaration order.
            pub const TAGS: &'static [&'static str] = &[$($tag),+];
        }

        impl $crate::Tagged for $name {
            const ALL: &'static [Self] = &[$($name::$variant),+];
            fn tag(self) -> &'static str {
                match self {
                    $($name::$variant => $tag),+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str($crate::Tagged::tag(*self))
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::UnknownTag;
            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                <$name as $crate::Tagged>::from_tag(s).ok_or_else(|| $crate::UnknownTag {
                    given: s.to_owned(),
                    allowed: $name::TAGS,
                })
            }
        }

        impl $crate::__serde::Serialize for $name {
            fn serialize<S: $crate::__serde::Serializer>(
                &self,
                s: S,
            ) -> ::std::result::Result<S::Ok, S::Error> {
                s.serialize_str($crate::Tagged::tag(*self))
            }
        }

        impl<'de> $crate::__serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__serde::Deserializer<'de>>(
                d: D,
            ) -> ::std::result::Result<Self, D::Error> {
                struct TagVisitor;
                impl<'de> $crate::__serde::de::Visitor<'de> for TagVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        write!(f, "one of {:?}", $name::TAGS)
                    }
                    fn visit_str<E: $crate::__serde::de::Error>(
                        self,
                        s: &str,
                    ) -> ::std::result::Result<$name, E> {
                        <$name as $crate::Tagged>::from_tag(s)
                            .ok_or_else(|| E::unknown_variant(s, $name::TAGS))
                    }
                }
                d.deserialize_str(TagVisitor)
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Tagged;

    tagged_enum! {
        /// A test enum whose Rust names differ from its tags.
        #[derive(Default)]
        enum Colour {
            /// Red.
            #[default]
            Red = "r",
            /// Green.
            Green = "g",
        }
    }

    #[test]
    fn tags_do_not_follow_rust_names() {
        assert_eq!(Colour::Red.tag(), "r");
        assert_eq!(Colour::default(), Colour::Red);
        assert_eq!(Colour::ALL, [Colour::Red, Colour::Green]);
        assert_eq!(format!("{}", Colour::Green), "g");
        assert_eq!(Colour::from_tag("Green"), None);
    }

    #[test]
    fn serde_uses_tags_and_lists_them_on_error() {
        assert_eq!(serde_json::to_string(&Colour::Green).unwrap(), "\"g\"");
        assert_eq!(
            serde_json::from_str::<Colour>("\"r\"").unwrap(),
            Colour::Red
        );
        let e = serde_json::from_str::<Colour>("\"blue\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("blue") && e.contains("`r`") && e.contains("`g`"),
            "{e}"
        );
    }
}
