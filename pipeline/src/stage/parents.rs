//! Typed parents: what a stage's instances read, and their resolution into finished entries.

use super::error::RunError;
use super::{Planned, StageKind};
use crate::key::{AnyKey, Key};
use crate::plan::Node;
use crate::store::{EntryState, Store};
use results::{Row, Value};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// The typed parent keys of a stage's instances, in the order their key covers them.
///
/// Implemented for `()` (no inputs), `Key<A>` (one input), `Option<Key<A>>` (an input some
/// instances have) and `(Key<A>, Vec<Key<B>>)` (one input and a list of another stage's). The
/// first `Key` is the *primary* parent: rows inherit its config columns (and its primary's, up
/// the chain).
pub trait Parents: Clone + Debug + PartialEq + Send + Sync + 'static {
    /// The parents as finished entries.
    type Resolved;
    /// The stage of each slot, in order.
    fn stages() -> Vec<&'static str>;
    /// Every parent key with its stage, in key order (duplicates kept).
    fn keys(&self) -> Vec<(AnyKey, &'static str)>;
    /// The parent-key columns of a row: `<stage>_key` or `<stage>_keys`.
    fn columns(&self, row: &mut Row);
    /// The primary parent, if any.
    fn primary(&self) -> Option<AnyKey>;
    /// Reads every parent's entry from the store.
    fn resolve(&self, resolver: &Resolver) -> Result<Self::Resolved, RunError>;
}

impl Parents for () {
    type Resolved = ();
    fn stages() -> Vec<&'static str> {
        vec![]
    }
    fn keys(&self) -> Vec<(AnyKey, &'static str)> {
        vec![]
    }
    fn columns(&self, _row: &mut Row) {}
    fn primary(&self) -> Option<AnyKey> {
        None
    }
    fn resolve(&self, _resolver: &Resolver) -> Result<(), RunError> {
        Ok(())
    }
}

impl<A: StageKind> Parents for Key<A> {
    type Resolved = Done<A>;
    fn stages() -> Vec<&'static str> {
        vec![A::NAME]
    }
    fn keys(&self) -> Vec<(AnyKey, &'static str)> {
        vec![(self.any(), A::NAME)]
    }
    fn columns(&self, row: &mut Row) {
        row.insert(format!("{}_key", A::NAME), Value::Str(self.hex()));
    }
    fn primary(&self) -> Option<AnyKey> {
        Some(self.any())
    }
    fn resolve(&self, resolver: &Resolver) -> Result<Done<A>, RunError> {
        resolver.done(*self)
    }
}

/// An optional input is never primary: rows do not inherit the columns of an input that only
/// some rows have.
impl<A: StageKind> Parents for Option<Key<A>> {
    type Resolved = Option<Done<A>>;
    fn stages() -> Vec<&'static str> {
        vec![A::NAME]
    }
    fn keys(&self) -> Vec<(AnyKey, &'static str)> {
        self.iter().flat_map(Parents::keys).collect()
    }
    fn columns(&self, row: &mut Row) {
        let v = self.map_or(Value::Null, |k| Value::Str(k.hex()));
        row.insert(format!("{}_key", A::NAME), v);
    }
    fn primary(&self) -> Option<AnyKey> {
        None
    }
    fn resolve(&self, resolver: &Resolver) -> Result<Self::Resolved, RunError> {
        self.map(|k| resolver.done(k)).transpose()
    }
}

impl<A: StageKind, B: StageKind> Parents for (Key<A>, Vec<Key<B>>) {
    type Resolved = (Done<A>, Vec<Done<B>>);
    fn stages() -> Vec<&'static str> {
        vec![A::NAME, B::NAME]
    }
    fn keys(&self) -> Vec<(AnyKey, &'static str)> {
        let mut out = self.0.keys();
        out.extend(self.1.iter().map(|k| (k.any(), B::NAME)));
        out
    }
    fn columns(&self, row: &mut Row) {
        self.0.columns(row);
        row.insert(
            format!("{}_keys", B::NAME),
            Value::ListStr(self.1.iter().map(Key::hex).collect()),
        );
    }
    fn primary(&self) -> Option<AnyKey> {
        self.0.primary()
    }
    fn resolve(&self, resolver: &Resolver) -> Result<Self::Resolved, RunError> {
        let first = self.0.resolve(resolver)?;
        let rest = self
            .1
            .iter()
            .map(|k| resolver.done(*k))
            .collect::<Result<_, _>>()?;
        Ok((first, rest))
    }
}

/// A finished input: its trial, its entry's folder and metrics, and a way to its own inputs'
/// configs.
pub struct Done<K: StageKind> {
    /// Its key.
    pub key: Key<K>,
    planned: Arc<Planned<K>>,
    /// Its entry's folder in the store (artifacts are files in it).
    pub dir: PathBuf,
    /// Its entry's metrics row.
    pub metrics: Row,
    resolver: Resolver,
}

impl<K: StageKind> Done<K> {
    /// Its config.
    pub fn trial(&self) -> &K::Trial {
        &self.planned.trial
    }

    /// The path of one of its artifacts.
    pub fn artifact(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Its place in the plan, from which its inputs' configs are reached without reading their
    /// store entries (a prune needs its training's data set spec, not the training's files).
    pub fn upstream(&self) -> Upstream<K> {
        Upstream {
            planned: self.planned.clone(),
            resolver: self.resolver.clone(),
        }
    }
}

/// A planned instance seen without its store entry: its trial and its inputs' configs.
pub struct Upstream<K: StageKind> {
    planned: Arc<Planned<K>>,
    resolver: Resolver,
}

impl<K: StageKind> Upstream<K> {
    /// Its config.
    pub fn trial(&self) -> &K::Trial {
        &self.planned.trial
    }
}

impl<P: StageKind, K: StageKind<Parents = Key<P>>> Upstream<K> {
    /// Its one input, as planned.
    pub fn parent(&self) -> Result<Upstream<P>, RunError> {
        Ok(Upstream {
            planned: self.resolver.planned(self.planned.parents)?,
            resolver: self.resolver.clone(),
        })
    }
}

/// Finds planned instances and their store entries.
#[derive(Clone)]
pub struct Resolver {
    pub(crate) registry: Arc<RwLock<BTreeMap<AnyKey, Node>>>,
    pub(crate) store: Store,
}

impl Resolver {
    /// The planned instance of a key.
    pub(crate) fn planned<K: StageKind>(&self, key: Key<K>) -> Result<Arc<Planned<K>>, RunError> {
        let node = self
            .registry
            .read()
            .ok()
            .and_then(|r| r.get(&key.any()).cloned())
            .ok_or(RunError::NotPlanned { key: key.any() })?;
        node.planned::<K>().ok_or(RunError::WrongStage {
            key: key.any(),
            found: node.stage,
            expected: K::NAME,
        })
    }

    /// The finished entry of a key.
    pub(crate) fn done<K: StageKind>(&self, key: Key<K>) -> Result<Done<K>, RunError> {
        let planned = self.planned(key)?;
        let (stage, any) = (K::NAME, key.any());
        match self.store.read(&any) {
            EntryState::Valid(meta) => Ok(Done {
                key,
                planned,
                dir: self.store.entry_dir(&any),
                metrics: meta.metrics,
                resolver: self.clone(),
            }),
            EntryState::Missing => Err(RunError::InputMissing { stage, key: any }),
            EntryState::Damaged(why) => Err(RunError::InputDamaged {
                stage,
                key: any,
                why,
            }),
        }
    }
}
