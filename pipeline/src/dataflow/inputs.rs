//! The dataflow's inputs: the plan's edges, and the generation each epoch's tables go to.

use crate::plan::Edge;
use differential_dataflow::input::InputSession;
use std::collections::BTreeSet;

/// The inputs of the dataflow: the plan's edges, and the generation its tables go to.
pub struct Inputs {
    pub(super) edges: InputSession<u64, Edge, isize>,
    pub(super) generation: InputSession<u64, String, isize>,
    pub(super) current: Option<String>,
}

impl Inputs {
    /// Names the generation this epoch's tables are written to (every worker learns it).
    pub fn set_generation(&mut self, token: &str) {
        if let Some(old) = self.current.replace(token.to_owned()) {
            self.generation.remove(old);
        }
        self.generation.insert(token.to_owned());
    }

    /// Feeds the difference between two plans' edges (insertions and retractions).
    pub fn feed(&mut self, old: &BTreeSet<Edge>, new: &BTreeSet<Edge>) {
        for x in old.difference(new) {
            self.edges.remove(*x);
        }
        for x in new.difference(old) {
            self.edges.insert(*x);
        }
    }

    /// Moves the inputs to `epoch` and flushes.
    pub fn advance_to(&mut self, epoch: u64) {
        self.edges.advance_to(epoch);
        self.generation.advance_to(epoch);
        self.edges.flush();
        self.generation.flush();
    }
}

/// The generation token of each epoch, as every worker received it.
#[derive(Clone, Default)]
pub struct Generations {
    pub(super) tokens: std::rc::Rc<std::cell::RefCell<std::collections::BTreeMap<u64, String>>>,
}

impl Generations {
    /// The token fed at time `time`, if any.
    pub fn at(&self, time: u64) -> Option<String> {
        self.tokens.borrow().get(&time).cloned()
    }
}
