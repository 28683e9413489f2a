//! Unit tests of `src/state/loader.rs`.

use super::*;

#[test]
fn yaml_list_and_multi_doc() {
    let store = Store::default();
    let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {name: data, namespace: ns}
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
---
apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ns}
spec: {nodeName: n1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: ns}
"#;
    let s = load_str(text, &store).expect("load");
    assert_eq!((s.pvcs, s.nodes, s.pods), (1, 1, 1));
    assert_eq!(s.skipped.get("ConfigMap"), Some(&1));
    assert!(store.pvcs.get("ns", "data").is_some());
    assert!(store.nodes.get("", "n1").is_some());
}

#[test]
fn json_list() {
    let store = Store::default();
    let s = load_str(
        r#"{"kind":"List","items":[{"kind":"PersistentVolume","metadata":{"name":"pv1"}}]}"#,
        &store,
    )
    .expect("load");
    assert_eq!(s.pvs, 1);
}

#[test]
fn errors_are_precise() {
    let store = Store::default();
    let e = load_str("{not json", &store).expect_err("bad json");
    assert!(e.to_string().contains("document 0"), "{e}");
    let e = load_str("kind: List\nitems:\n- metadata: {name: x}\n", &store).expect_err("no kind");
    assert!(e.to_string().contains("object 0 has no kind"), "{e}");
    let e = load_str("kind: Pod\nspec: {volumes: 3}\n", &store).expect_err("bad pod");
    assert!(e.to_string().contains("object 0 (Pod)"), "{e}");
    let e = load_file(Path::new("/nonexistent/state.yaml"), &store).expect_err("missing");
    assert!(e.to_string().contains("/nonexistent/state.yaml"), "{e}");
}
