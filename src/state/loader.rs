//! `--state FILE`: a Kubernetes `List` (JSON or YAML, as `kubectl get pvc,pv,nodes,pods -A -o yaml`
//! prints it) or multi-document YAML, loaded into a [`Store`].

use super::Store;
use crate::error::StateError;
use crate::model::{Node, Pod, Pv, Pvc, from_json};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// What a load found, for the startup log line: nothing is dropped silently.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct LoadSummary {
    pub pvcs: usize,
    pub pvs: usize,
    pub nodes: usize,
    pub pods: usize,
    pub fences: usize,
    /// Objects of kinds volguard does not read, by kind.
    pub skipped: BTreeMap<String, usize>,
}

pub(super) fn load_file(path: &Path, store: &Store) -> Result<LoadSummary, StateError> {
    let text = std::fs::read_to_string(path).map_err(|source| StateError::Read {
        path: path.display().to_string(),
        source,
    })?;
    load_str(&text, store).map_err(|e| e.in_file(path))
}

pub fn load_str(text: &str, store: &Store) -> Result<LoadSummary, StateError> {
    let summary = load_objects(text, store)?;
    let pods = store.pods.all();
    store.claims.rebuild(pods.iter().map(|p| p.as_ref()));
    Ok(summary)
}

fn load_objects(text: &str, store: &Store) -> Result<LoadSummary, StateError> {
    let mut summary = LoadSummary::default();
    let mut index = 0usize;
    if text.trim_start().starts_with('{') {
        // JSON: objects stay raw until decoded straight into their pruned type, so a 100k-object
        // List never becomes a tree of `Value`s (the startup cost at that size).
        let doc: RawDoc<'_> = serde_json::from_str(text).map_err(|e| StateError::Parse {
            document: 0,
            message: e.to_string(),
        })?;
        match doc.items {
            Some(items) if doc.kind.as_deref().is_some_and(|k| k.ends_with("List")) => {
                for item in items {
                    add_raw(item.get(), index, store, &mut summary)?;
                    index += 1;
                }
            }
            _ => add_raw(text, 0, store, &mut summary)?,
        }
        return Ok(summary);
    }
    for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let v = Value::deserialize(doc).map_err(|e| StateError::Parse {
            document: i,
            message: e.to_string(),
        })?;
        if v.is_null() {
            continue;
        }
        for item in flatten(v) {
            // YAML is for hand-written and kubectl-sized files: one JSON round trip per object
            // keeps a single decoding path.
            let raw = serde_json::to_string(&item).map_err(|e| StateError::Object {
                index,
                kind: String::new(),
                message: e.to_string(),
            })?;
            add_raw(&raw, index, store, &mut summary)?;
            index += 1;
        }
    }
    Ok(summary)
}

#[derive(Deserialize)]
struct RawDoc<'a> {
    #[serde(default)]
    kind: Option<String>,
    #[serde(borrow, default)]
    items: Option<Vec<&'a serde_json::value::RawValue>>,
}

#[derive(Deserialize)]
struct KindOnly {
    #[serde(default)]
    kind: Option<String>,
}

fn add_raw(raw: &str, index: usize, store: &Store, s: &mut LoadSummary) -> Result<(), StateError> {
    let kind = serde_json::from_str::<KindOnly>(raw)
        .ok()
        .and_then(|k| k.kind)
        .ok_or(StateError::MissingKind { index })?;
    let bad = |message: String| StateError::Object {
        index,
        kind: kind.clone(),
        message,
    };
    match kind.as_str() {
        "PersistentVolumeClaim" => {
            store.pvcs.apply(from_json::<Pvc>(raw).map_err(bad)?);
            s.pvcs += 1;
        }
        "PersistentVolume" => {
            store.pvs.apply(from_json::<Pv>(raw).map_err(bad)?);
            s.pvs += 1;
        }
        "Node" => {
            store.nodes.apply(from_json::<Node>(raw).map_err(bad)?);
            s.nodes += 1;
        }
        "Pod" => {
            store.pods.apply(from_json::<Pod>(raw).map_err(bad)?);
            s.pods += 1;
        }
        crate::model::fence::KIND => {
            store
                .fences
                .apply(from_json::<crate::model::fence::NodeFence>(raw).map_err(bad)?);
            s.fences += 1;
        }
        _ => *s.skipped.entry(kind).or_default() += 1,
    }
    Ok(())
}

/// A `List` (any `*List` kind with `items`) becomes its items; anything else is one object.
fn flatten(doc: Value) -> Vec<Value> {
    match doc {
        Value::Object(mut m)
            if m.get("kind")
                .and_then(Value::as_str)
                .is_some_and(|k| k.ends_with("List"))
                && m.get("items").is_some_and(Value::is_array) =>
        {
            match m.remove("items") {
                Some(Value::Array(items)) => items,
                _ => Vec::new(),
            }
        }
        other => vec![other],
    }
}

#[cfg(test)]
#[path = "loader_tests.rs"]
mod tests;
