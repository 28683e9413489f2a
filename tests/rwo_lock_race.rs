//! rules.md §2f, the race the lock exists for: two pods bound to two nodes at the same instant on
//! one free ReadWriteOnce claim, neither visible in any cache. One `volguard serve` (offline: the
//! lock lives in memory), 1,000 rounds, both binds of a round sent at once: exactly one allowed.

mod support;

use serde_json::{Value, json};
use support::serve::{Certs, Server, client};

const ROUNDS: usize = 1000;

fn state() -> Value {
    let mut items = vec![
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}}),
    ];
    for i in 0..ROUNDS {
        items.push(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": format!("data-{i}"), "namespace": "race"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound"}}));
        for side in ["a", "b"] {
            items.push(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("{side}-{i}"), "namespace": "race", "uid": format!("uid-{side}-{i}")},
                "spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": format!("data-{i}")}}]},
                "status": {"phase": "Pending"}}));
        }
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// The scheduler's bind of `pod` to `node`, as the apiserver sends it.
fn bind(uid: String, pod: &str, node: &str) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": "Binding"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "binding", "name": pod, "namespace": "race", "operation": "CREATE",
        "userInfo": {"username": "system:kube-scheduler", "groups": ["system:authenticated"]},
        "object": {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod, "namespace": "race"},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node}},
        "oldObject": null}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_binds_at_once_exactly_one_allowed() {
    let certs = Certs::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("state.json");
    std::fs::write(&path, state().to_string()).expect("write state");
    let server = Server::start(
        &certs.cert(),
        &certs.key(),
        &["--state", path.to_str().expect("path")],
    );
    let http = client(&certs.ca_pem);
    let url = server.url("/validate/rwo-single-node");
    let post = |body: Value| {
        let (http, url) = (http.clone(), url.clone());
        tokio::spawn(async move {
            let r: Value = http
                .post(&url)
                .json(&body)
                .send()
                .await
                .expect("send")
                .json()
                .await
                .expect("json");
            let resp = &r["response"];
            (
                resp["allowed"].as_bool().expect("allowed"),
                resp["auditAnnotations"]["row"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                resp["status"]["message"].as_str().unwrap_or("").to_string(),
            )
        })
    };
    let mut bad = Vec::new();
    let mut rows = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..ROUNDS {
        // Spawned together: the two requests race inside the server.
        let a = post(bind(format!("a-{i}"), &format!("a-{i}"), "node-a"));
        let b = post(bind(format!("b-{i}"), &format!("b-{i}"), "node-b"));
        let (a, b) = (a.await.expect("join"), b.await.expect("join"));
        for (_, row, _) in [&a, &b] {
            *rows.entry(row.clone()).or_default() += 1;
        }
        let allowed = usize::from(a.0) + usize::from(b.0);
        if allowed != 1 {
            bad.push(format!("round {i}: {allowed} allowed ({a:?}, {b:?})"));
        } else {
            let refused = if a.0 { &b } else { &a };
            assert!(
                refused.2.contains("locked to node"),
                "round {i}: refusal does not name the lock: {refused:?}"
            );
        }
    }
    let metrics = http
        .get(server.probe_url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let count = |result: &str| -> f64 {
        metrics
            .lines()
            .find(|l| l.starts_with(&format!("volguard_rwo_locks_total{{result=\"{result}\"}}")))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0)
    };
    println!(
        "{ROUNDS} rounds of two simultaneous binds: decisions by row {rows:?}; locks taken {}, lost swaps read again {}, refused {}",
        count("taken"),
        count("conflict_retried"),
        count("refused")
    );
    assert_eq!(count("taken"), ROUNDS as f64, "{metrics}");
    assert_eq!(count("refused"), ROUNDS as f64, "{metrics}");
    assert!(
        bad.is_empty(),
        "{} rounds broke the lock:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
