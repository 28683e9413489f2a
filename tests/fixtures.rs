//! Offline fixture tests: every file in tests/fixtures/reviews is POSTed over HTTPS to the real
//! `volguard serve` (state from manifests/examples/state.yaml) and its outcome checked: HTTP status,
//! allowed, code, message, warnings, and the object after applying the returned patch.

mod common;

use base64::Engine;
use common::{Certs, Server, client, repo};
use serde_json::Value;

struct Outcome {
    name: String,
    problems: Vec<String>,
}

async fn run_fixture(
    http: &reqwest::Client,
    servers: &Servers,
    name: &str,
    fx: &Value,
) -> Vec<String> {
    let server = match fx["server"].as_str() {
        None => &servers.default,
        Some("warn") => &servers.warn,
        Some("rwo-off") => &servers.rwo_off,
        Some(other) => return vec![format!("unknown fixture server {other:?}")],
    };
    let mut problems = Vec::new();
    let path = fx["path"].as_str().unwrap_or("/validate");
    let method = fx["method"].as_str().unwrap_or("POST");
    let ct = fx["content_type"].as_str().unwrap_or("application/json");
    let mut req = http.request(method.parse().expect("method"), server.url(path));
    if method == "POST" {
        req = req.header("Content-Type", ct);
    }
    if let Some(size) = fx["raw_body_size"].as_u64() {
        let body = vec![b' '; size as usize];
        if fx["chunked"].as_bool() == Some(true) {
            let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
                body.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
            req = req.body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)));
        } else {
            req = req.body(body);
        }
    } else if let Some(raw) = fx["raw_body"].as_str() {
        req = req.body(raw.to_string());
    } else if !fx["body"].is_null() {
        req = req.body(serde_json::to_vec(&fx["body"]).expect("body"));
    }
    let resp = match req.send().await {
        Ok(r) => r,
        Err(e) => return vec![format!("request failed: {e}")],
    };
    let expect = &fx["expect"];
    let want_status = expect["http_status"].as_u64().unwrap_or(200) as u16;
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    if status != want_status {
        problems.push(format!(
            "HTTP status {status}, want {want_status}; body {text}"
        ));
        return problems;
    }
    let body: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return vec![format!("response is not JSON ({e}): {text}")],
    };
    if want_status != 200 {
        let err = body["error"].as_str().unwrap_or_default();
        match expect["error_contains"].as_str() {
            Some(want) if !want.is_empty() => {
                if !err.contains(want) {
                    problems.push(format!("error {err:?} lacks {want:?}"));
                }
            }
            _ => problems.push("expect.error_contains is required for an HTTP error".into()),
        }
        return problems;
    }
    let r = &body["response"];
    if body["apiVersion"] != "admission.k8s.io/v1" || body["kind"] != "AdmissionReview" {
        problems.push(format!("not an AdmissionReview v1: {body}"));
    }
    if r["uid"] != fx["body"]["request"]["uid"] {
        problems.push(format!("uid {} not echoed", r["uid"]));
    }
    if let Some(a) = expect["allowed"].as_bool()
        && r["allowed"].as_bool() != Some(a)
    {
        problems.push(format!("allowed={}, want {a}; response {r}", r["allowed"]));
    }
    if let Some(code) = expect["code"].as_u64()
        && r["status"]["code"].as_u64() != Some(code)
    {
        problems.push(format!("status.code={}, want {code}", r["status"]["code"]));
    }
    // Which rule (webhook) and row decided, from the response's auditAnnotations.
    match expect["row"].as_str() {
        Some(want) if r["auditAnnotations"]["row"].as_str() != Some(want) => {
            problems.push(format!(
                "decided by row {}, want {want}",
                r["auditAnnotations"]["row"]
            ))
        }
        Some(_) => {}
        None => problems.push("expect.row (the row that decides) is required".into()),
    }
    if expect.get("rule").is_some() && r["auditAnnotations"]["rule"] != expect["rule"] {
        problems.push(format!(
            "decided by rule {}, want {}",
            r["auditAnnotations"]["rule"], expect["rule"]
        ));
    }
    if r["allowed"] == false
        && expect["message_contains"]
            .as_array()
            .is_none_or(|m| m.is_empty())
    {
        problems.push("a denial needs expect.message_contains".into());
    }
    let message = r["status"]["message"].as_str().unwrap_or_default();
    for m in expect["message_contains"].as_array().into_iter().flatten() {
        let m = m.as_str().unwrap_or_default();
        if !message.contains(m) {
            problems.push(format!("message {message:?} lacks {m:?}"));
        }
    }
    let warnings: Vec<&str> = r["warnings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    for w in expect["warnings_contains"].as_array().into_iter().flatten() {
        let w = w.as_str().unwrap_or_default();
        if !warnings.iter().any(|x| x.contains(w)) {
            problems.push(format!("warnings {warnings:?} lack {w:?}"));
        }
    }
    if expect["warnings_empty"].as_bool() == Some(true) && !warnings.is_empty() {
        problems.push(format!("unexpected warnings {warnings:?}"));
    }
    let patch = r["patch"].as_str();
    if let Some(want) = expect["patched"].as_bool()
        && want != patch.is_some()
    {
        problems.push(format!("patched={}, want {want}", patch.is_some()));
    }
    if let Some(p) = patch {
        if r["patchType"] != "JSONPatch" {
            problems.push(format!("patchType {}", r["patchType"]));
        }
        let raw = match base64::engine::general_purpose::STANDARD.decode(p) {
            Ok(raw) => raw,
            Err(e) => return vec![format!("patch is not base64: {e}")],
        };
        let ops: json_patch::Patch = match serde_json::from_slice(&raw) {
            Ok(ops) => ops,
            Err(e) => return vec![format!("patch is not a JSON patch: {e}")],
        };
        let mut obj = fx["body"]["request"]["object"].clone();
        if let Err(e) = json_patch::patch(&mut obj, &ops) {
            problems.push(format!("patch does not apply: {e}"));
        } else {
            for (field, key) in [
                ("finalizers_after", "finalizers"),
                ("annotations_after", "annotations"),
            ] {
                if let Some(want) = expect.get(field)
                    && &obj["metadata"][key] != want
                {
                    problems.push(format!(
                        "{key} after patch {}, want {want}",
                        obj["metadata"][key]
                    ));
                }
            }
            if let Some(want) = expect.get("affinity_after")
                && &obj["spec"]["affinity"] != want
            {
                problems.push(format!(
                    "affinity after patch {}, want {want}",
                    obj["spec"]["affinity"]
                ));
            }
        }
    }
    let _ = name;
    problems
}

/// The servers fixtures run against: the default flags, `--enforcement warn`, `--rwo-guard off`.
struct Servers {
    default: Server,
    warn: Server,
    rwo_off: Server,
}

#[tokio::test]
async fn every_fixture_over_https() {
    let certs = Certs::new();
    let state = repo().join("manifests/examples/state.yaml");
    let start = |extra: &[&str]| {
        let mut args = vec![
            "--state",
            state.to_str().expect("path"),
            "--force-delete-allow-user",
            "system:serviceaccount:ops:fencer",
            "--force-delete-allow-group",
            "storage-admins",
            "--trusted-remediator",
            "system:serviceaccount:medik8s:fence-agents-remediation=taint",
            "--trusted-remediator",
            "system:serviceaccount:capi-system:capi-manager=delete-node",
        ];
        args.extend_from_slice(extra);
        Server::start(&certs.cert(), &certs.key(), &args)
    };
    let servers = Servers {
        default: start(&[]),
        warn: start(&["--enforcement", "warn"]),
        rwo_off: start(&["--rwo-guard", "off"]),
    };
    let server = &servers.default;
    let http = client(&certs.ca_pem);
    let dir = repo().join("tests/fixtures/reviews");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(files.len() >= 40, "only {} fixtures", files.len());
    let mut outcomes = Vec::new();
    for f in &files {
        let name = f
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let fx: Value =
            serde_json::from_slice(&std::fs::read(f).expect("read")).expect("fixture JSON");
        let problems = run_fixture(&http, &servers, &name, &fx).await;
        println!(
            "fixture {name}: {}",
            if problems.is_empty() { "ok" } else { "FAILED" }
        );
        outcomes.push(Outcome { name, problems });
    }
    // The server survived every bad input above and still answers.
    let health = http
        .get(server.probe_url("/healthz"))
        .send()
        .await
        .expect("healthz");
    assert_eq!(health.status(), 200);
    let metrics = http
        .get(server.probe_url("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(metrics.contains("volguard_admission_requests_total{endpoint=\"validate\",kind=\"Pod\",operation=\"DELETE\",decision=\"denied\"}"), "{metrics}");
    assert!(
        metrics.contains("volguard_admission_unknown_kind_requests_total{kind=\"Deployment\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("volguard_admission_rejected_bodies_total{code=\"413\"} 2"),
        "{metrics}"
    );
    let failed: Vec<_> = outcomes.iter().filter(|o| !o.problems.is_empty()).collect();
    for o in &failed {
        eprintln!("{}:\n  {}", o.name, o.problems.join("\n  "));
    }
    assert!(
        failed.is_empty(),
        "{} of {} fixtures failed",
        failed.len(),
        outcomes.len()
    );
}
