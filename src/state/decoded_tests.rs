//! Unit tests of `src/state/decoded.rs`: one decode gives what the former three-pass path
//! (k8s-openapi → `Value` → model) gave, on every object the fixtures and the example state hold.

use super::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The former path, kept here as the reference.
fn via_openapi<K: Serialize + DeserializeOwned, T: DeserializeOwned>(v: &Value) -> T {
    let k: K = serde_json::from_value(v.clone()).expect("k8s-openapi decodes the object");
    serde_json::from_value(serde_json::to_value(k).expect("encode")).expect("model decodes")
}

fn once<T: Wire + DeserializeOwned>(v: &Value) -> Decoded<T> {
    serde_json::from_str(&v.to_string()).expect("decodes once")
}

fn same<T: Wire + DeserializeOwned + PartialEq + std::fmt::Debug>(v: &Value)
where
    T::Resource: Serialize + DeserializeOwned,
{
    let mut a: T = via_openapi::<T::Resource, T>(v);
    let mut b = once::<T>(v).into_inner();
    a.prune();
    b.prune();
    assert_eq!(a, b, "object {v}");
}

/// Every Pod, PVC, PV and Node in the review fixtures (objects and old objects) and the example
/// state file.
fn corpus() -> Vec<Value> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    let dir = root.join("tests/fixtures/reviews");
    for e in std::fs::read_dir(&dir).expect("fixtures") {
        let text = std::fs::read_to_string(e.expect("entry").path()).expect("read");
        let Ok(f) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        for key in ["object", "oldObject"] {
            let o = &f["body"]["request"][key];
            if o.get("kind").is_some() && o["metadata"].is_object() {
                out.push(o.clone());
            }
        }
    }
    let state = std::fs::read_to_string(root.join("manifests/examples/state.yaml")).expect("state");
    let state: Value = serde_yaml::from_str(&state).expect("yaml");
    out.extend(state["items"].as_array().expect("a List").iter().cloned());
    out
}

#[test]
fn one_decode_matches_the_former_path_on_every_fixture_object() {
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for v in corpus() {
        let kind = v["kind"].as_str().unwrap_or_default().to_string();
        // Malformed fixtures are refused by both paths; only well-formed objects compare.
        let k8s_ok = match kind.as_str() {
            "Pod" => serde_json::from_value::<k8s::Pod>(v.clone()).is_ok(),
            "PersistentVolumeClaim" => {
                serde_json::from_value::<k8s::PersistentVolumeClaim>(v.clone()).is_ok()
            }
            "PersistentVolume" => {
                serde_json::from_value::<k8s::PersistentVolume>(v.clone()).is_ok()
            }
            "Node" => serde_json::from_value::<k8s::Node>(v.clone()).is_ok(),
            _ => false,
        };
        if !k8s_ok {
            continue;
        }
        match kind.as_str() {
            "Pod" => same::<Pod>(&v),
            "PersistentVolumeClaim" => same::<Pvc>(&v),
            "PersistentVolume" => same::<Pv>(&v),
            _ => same::<Node>(&v),
        }
        *seen.entry(kind).or_default() += 1;
    }
    // The corpus must actually exercise every kind, or this test proves nothing.
    for kind in ["Pod", "PersistentVolumeClaim", "PersistentVolume", "Node"] {
        assert!(
            seen.get(kind).copied().unwrap_or(0) >= 3,
            "{kind}: {seen:?}"
        );
    }
}

#[test]
fn the_watcher_gets_the_resource_version_and_the_api_its_paths() {
    let d: Decoded<Pvc> = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "shop", "resourceVersion": "4711",
                     "annotations": {"other.io/x": "y"}, "managedFields": [{"manager": "m"}]},
        "spec": {"volumeName": "pv-1"}
    }))
    .expect("decodes");
    assert_eq!(d.meta().resource_version.as_deref(), Some("4711"));
    assert_eq!(d.meta().name.as_deref(), Some("data"));
    assert_eq!(d.meta().namespace.as_deref(), Some("shop"));
    assert_eq!(d.object.volume_name(), Some("pv-1"));
    // Other tools' annotations never reach the model.
    assert_eq!(d.object.metadata.annotations, None);
    assert_eq!(
        Decoded::<Pvc>::url_path(&(), Some("shop")),
        k8s::PersistentVolumeClaim::url_path(&(), Some("shop"))
    );
    assert_eq!(
        Decoded::<Pv>::url_path(&(), None),
        "/api/v1/persistentvolumes"
    );
    assert_eq!(Decoded::<Node>::kind(&()), "Node");
    assert_eq!(Decoded::<Pod>::plural(&()), "pods");
}

#[test]
fn a_list_page_decodes_items_straight_into_the_model() {
    let page: kube::core::ObjectList<Decoded<Pod>> = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PodList",
        "metadata": {"resourceVersion": "99", "continue": "abc"},
        "items": [
            {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "98"},
             "spec": {"nodeName": "n1", "volumes": [
                 {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
                 {"name": "t", "projected": {"sources": []}}]},
             "status": {"phase": "Running"}},
            {"metadata": {"name": "b", "namespace": "ns"}, "spec": {}}
        ]
    }))
    .expect("decodes");
    assert_eq!(page.metadata.resource_version.as_deref(), Some("99"));
    assert_eq!(page.items.len(), 2);
    assert_eq!(page.items[0].object.node_name(), Some("n1"));
    assert_eq!(page.items[1].meta().resource_version, None);
}

#[test]
fn a_field_of_the_wrong_type_is_an_error_naming_it() {
    let e = serde_json::from_value::<Decoded<Pod>>(json!({
        "metadata": {"name": "a", "namespace": "ns"},
        "spec": {"nodeName": 7}
    }))
    .expect_err("a number is not a node name");
    assert!(e.to_string().contains("invalid type: integer `7`"), "{e}");
}
