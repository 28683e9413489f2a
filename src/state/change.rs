//! What the live view publishes: each change a watch applied to the store.

use crate::model::{Node, Pod, Pv, Pvc};
use std::sync::Arc;

/// A change seen by a watch, after it was applied to the store.
pub enum Change<T> {
    Applied {
        old: Option<Arc<T>>,
        new: Arc<T>,
    },
    Deleted(Arc<T>),
    /// A relist replaced the store (objects may have vanished without a delete event).
    Relisted,
}

/// A change the live view applied to its stores, published to subscribers (the controller).
#[derive(Clone)]
pub enum ViewChange {
    Pvc(Change<Pvc>),
    Pv(Change<Pv>),
    Pod(Change<Pod>),
    Node(Change<Node>),
}

impl<T> Clone for Change<T> {
    fn clone(&self) -> Self {
        match self {
            Change::Applied { old, new } => Change::Applied {
                old: old.clone(),
                new: new.clone(),
            },
            Change::Deleted(o) => Change::Deleted(o.clone()),
            Change::Relisted => Change::Relisted,
        }
    }
}
