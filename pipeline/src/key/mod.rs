//! Content keys of stage instances.
//!
//! A key is blake3 (in derive-key mode, so no other use of blake3 can collide with it) over an
//! explicit canonical encoding of: the stage name, the stage version, the stage's canonical
//! config and the keys of its inputs. The canonical config is an ordered list of named fields
//! ([`CanonConfig`]), never `derive(Hash)` or serde output, so that cosmetic edits of an
//! experiment file change no key and a change of scheme is always deliberate (golden tests pin
//! known keys).

mod canon;
mod digest;

pub use canon::{CanonConfig, CanonValue};
pub use digest::{AnyKey, Key};

use crate::stage::StageKind;

/// The blake3 derive-key context of stage keys. Changing it changes every key.
pub const KEY_CONTEXT: &str = "cotune 2026-11 stage key v1";

/// Computes the key of a stage instance.
pub fn stage_key<S: StageKind>(version: u32, config: &CanonConfig, inputs: &[AnyKey]) -> Key<S> {
    let mut h = blake3::Hasher::new_derive_key(KEY_CONTEXT);
    canon::write_str(&mut h, S::NAME);
    h.update(&version.to_le_bytes());
    config.encode_into(&mut h);
    h.update(&(inputs.len() as u64).to_le_bytes());
    for input in inputs {
        h.update(input.as_bytes());
    }
    Key::from_bytes(*h.finalize().as_bytes())
}
