//! Typed digests: a `Key<Train>` cannot be passed where a `Key<KernelTune>` is wanted.

use crate::stage::StageKind;
use std::fmt;
use std::marker::PhantomData;

/// A 32-byte key whose stage is erased (what the store and the dataflow records carry).
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct AnyKey([u8; 32]);

impl AnyKey {
    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Full lowercase hex (64 characters).
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The first 12 hex characters, for humans.
    pub fn short(&self) -> String {
        self.hex()[..12].to_owned()
    }

    /// Parses 64 hex characters.
    pub fn from_hex(s: &str) -> Option<Self> {
        if s.len() != 64 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(AnyKey(out))
    }

    /// Re-types the key (the caller asserts which stage it belongs to).
    pub fn typed<S: StageKind>(self) -> Key<S> {
        Key::from_bytes(self.0)
    }
}

impl fmt::Debug for AnyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.short())
    }
}

impl fmt::Display for AnyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.hex())
    }
}

/// The key of one instance of stage `S`.
pub struct Key<S> {
    bytes: [u8; 32],
    _stage: PhantomData<fn() -> S>,
}

impl<S: StageKind> Key<S> {
    /// Wraps raw bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Key {
            bytes,
            _stage: PhantomData,
        }
    }

    /// Erases the stage.
    pub fn any(&self) -> AnyKey {
        AnyKey(self.bytes)
    }

    /// Full lowercase hex.
    pub fn hex(&self) -> String {
        self.any().hex()
    }
}

impl<S> Clone for Key<S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S> Copy for Key<S> {}
impl<S> PartialEq for Key<S> {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}
impl<S> Eq for Key<S> {}
impl<S> PartialOrd for Key<S> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<S> Ord for Key<S> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.bytes.cmp(&other.bytes)
    }
}
impl<S> std::hash::Hash for Key<S> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes.hash(state)
    }
}
impl<S: StageKind> fmt::Debug for Key<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", S::NAME, self.any().short())
    }
}
impl<S: StageKind> fmt::Display for Key<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.hex())
    }
}
