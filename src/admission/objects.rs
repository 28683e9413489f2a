//! The request's objects as the rules need them: embedded objects decoded (a malformed one is a
//! 400), the namespace a CREATE may omit filled in, and facts borrowed.

use super::review::{Embedded, EmbeddedKind, Request};
use crate::model::{Meta, Pod, Pvc};
use crate::rules::{Decision, Fact};
use std::borrow::Cow;
use std::sync::Arc;

/// One embedded object; a missing or malformed object is the caller's mistake (400).
pub(super) fn object<'r, T: EmbeddedKind>(
    e: &'r Embedded<'_>,
    field: &'static str,
) -> Result<Cow<'r, T>, Decision> {
    e.get(field)
        .map_err(|e| Decision::bad_request(e.to_string()))
}

/// The pod a subresource request is about: the object's name/namespace, else the request's.
pub(super) fn name_of(meta: &Meta, req: &Request<'_>) -> (String, String) {
    let ns = if meta.namespace.is_empty() {
        req.namespace.as_deref().unwrap_or_default().to_string()
    } else {
        meta.namespace.clone()
    };
    let name = if meta.name.is_empty() {
        req.name.as_deref().unwrap_or_default().to_string()
    } else {
        meta.name.clone()
    };
    (ns, name)
}

/// Objects being created may omit their namespace; the request carries it.
pub(super) fn fill_namespace<T: Clone + HasMeta>(obj: &mut Cow<'_, T>, req: &Request<'_>) {
    if obj.meta().namespace.is_empty()
        && let Some(ns) = &req.namespace
    {
        obj.to_mut().meta_mut().namespace = ns.to_string();
    }
}

pub(super) trait HasMeta {
    fn meta(&self) -> &Meta;
    fn meta_mut(&mut self) -> &mut Meta;
}

impl HasMeta for Pod {
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut Meta {
        &mut self.metadata
    }
}

impl HasMeta for Pvc {
    fn meta(&self) -> &Meta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut Meta {
        &mut self.metadata
    }
}

pub(super) fn deref<T>(f: &Fact<Arc<T>>) -> Fact<&T> {
    f.as_ref().map(|a| a.as_ref())
}
