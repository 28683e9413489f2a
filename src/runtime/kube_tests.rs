//! Unit tests of `src/runtime/kube.rs`.

use super::kubeconfig_list;

const ONE: &str = "apiVersion: v1\nkind: Config\ncurrent-context: one\nclusters:\n- name: one\n  cluster: {server: https://one.example:6443}\ncontexts:\n- name: one\n  context: {cluster: one, user: one}\nusers:\n- name: one\n  user: {token: t1}\n";
const TWO: &str = "apiVersion: v1\nkind: Config\ncurrent-context: two\nclusters:\n- name: two\n  cluster: {server: https://two.example:6443}\ncontexts:\n- name: two\n  context: {cluster: two, user: two}\nusers:\n- name: two\n  user: {token: t2}\n";

#[test]
fn a_missing_file_in_the_list_is_skipped_as_kubectl_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (one, two) = (dir.path().join("one.yaml"), dir.path().join("two.yaml"));
    std::fs::write(&one, ONE).expect("write");
    std::fs::write(&two, TWO).expect("write");
    let missing = dir.path().join("missing.yaml");
    let list = std::env::join_paths([&missing, &one, &two]).expect("join");
    let kc = kubeconfig_list(&list).expect("read").expect("some");
    // The first file that sets current-context wins; both files' contexts are there.
    assert_eq!(kc.current_context.as_deref(), Some("one"));
    assert_eq!(kc.contexts.len(), 2);
    let none = std::env::join_paths([&missing]).expect("join");
    assert!(kubeconfig_list(&none).expect("read").is_none());
    // A file that exists but does not parse is an error naming it.
    std::fs::write(&two, "clusters: [").expect("write");
    let e = kubeconfig_list(&list).expect_err("bad file");
    assert!(format!("{e:#}").contains("two.yaml"), "{e:#}");
}
