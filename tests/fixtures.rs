//! Offline fixture tests: every file in tests/fixtures/reviews is POSTed over HTTPS to the real
//! `volguard serve` (state from manifests/examples/state.yaml) and its outcome checked: HTTP status,
//! allowed, code, message, warnings, and the object after applying the returned patch.
//!
//! Each file is its own named test on its own server (`cargo test --test fixtures
//! validate-pod-create-` runs those): no fixture depends on another's state. A sequence is one
//! file with `steps`, run in order on one server.

mod support;

use base64::Engine;
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;
use std::sync::Arc;
use support::serve::{Certs, Server, client, repo};

async fn run_fixture(
    http: &reqwest::Client,
    server: &Server,
    name: &str,
    fx: &Value,
) -> Vec<String> {
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
    } else if let Some(raw) = fx[RAW_BODY].as_str() {
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
            // Keys only, where a value is volguard's clock (the stamp's time), and values it
            // must not hold (what the request typed).
            if let Some(want) = expect.get("annotation_keys_after") {
                let have: Vec<&String> = obj["metadata"]["annotations"]
                    .as_object()
                    .map(|a| a.keys().collect())
                    .unwrap_or_default();
                let want: Vec<&str> = want
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                if have != want {
                    problems.push(format!(
                        "annotation keys after patch {have:?}, want {want:?}"
                    ));
                }
            }
            for (k, v) in expect["annotation_not_after"]
                .as_object()
                .into_iter()
                .flatten()
            {
                if &obj["metadata"]["annotations"][k] == v {
                    problems.push(format!("annotation {k} still {v} after patch"));
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

/// The flags of the server a fixture names: the default (overrides that do not expire: the
/// fixtures' stamps carry no time), `--enforcement warn`, `--rwo-guard off`, overrides that
/// expire after an hour (volguard's default), `--break-glass off`.
fn server_flags(kind: Option<&str>) -> Result<&'static [&'static str], String> {
    match kind {
        None => Ok(&["--break-glass-expiry", "0s"]),
        Some("expiry") => Ok(&[]),
        Some("exempt") => Ok(&[
            "--exempt",
            "force-delete=system:serviceaccount:velero:velero",
            "--break-glass-expiry",
            "0s",
        ]),
        Some("warn") => Ok(&["--enforcement", "warn", "--break-glass-expiry", "0s"]),
        Some("rwo-off") => Ok(&["--rwo-guard", "off", "--break-glass-expiry", "0s"]),
        Some("break-glass-off") => Ok(&["--break-glass", "off", "--break-glass-expiry", "0s"]),
        Some(other) => Err(format!("unknown fixture server {other:?}")),
    }
}

fn start(certs: &Certs, kind: Option<&str>) -> Result<Server, String> {
    let state = repo().join("manifests/examples/state.yaml");
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
    args.extend_from_slice(server_flags(kind)?);
    Ok(Server::start(&certs.cert(), &certs.key(), &args))
}

/// A server of a fixture's kind and a runtime for the requests (the caller enters it before
/// building its client: reqwest's client is built and dropped inside a runtime).
fn session(certs: &Certs, kind: Option<&str>) -> Result<(Server, tokio::runtime::Runtime), String> {
    let server = start(certs, kind)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    Ok((server, rt))
}

/// One fixture file: its request (or its `steps`, in order) on a server of its own.
fn run_file(certs: &Certs, name: &str, fx: &Value) -> Result<(), Failed> {
    let (server, rt) = session(certs, fx["server"].as_str())?;
    let _in = rt.enter();
    let http = client(&certs.ca_pem);
    let steps: Vec<&Value> = match fx["steps"].as_array() {
        Some(steps) => steps.iter().collect(),
        None => vec![fx],
    };
    let mut problems = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        for p in rt.block_on(run_fixture(&http, &server, name, step)) {
            problems.push(match steps.len() {
                1 => p,
                _ => format!("step {}: {p}", i + 1),
            });
        }
    }
    // The server survived the input and still answers.
    let health = rt
        .block_on(http.get(server.probe_url("/healthz")).send())
        .map_err(|e| format!("healthz: {e}"))?;
    if health.status() != 200 {
        problems.push(format!("healthz answered {}", health.status()));
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(problems.join("\n").into()),
    }
}

/// What the server counts over a run: the fixtures' bad inputs in its metrics.
fn metrics_count_bad_inputs(certs: &Certs, fixtures: &[(String, Value)]) -> Result<(), Failed> {
    let (server, rt) = session(certs, None)?;
    let _in = rt.enter();
    let http = client(&certs.ca_pem);
    for (name, fx) in fixtures
        .iter()
        .filter(|(_, fx)| fx["server"].is_null() && fx["steps"].is_null())
    {
        rt.block_on(run_fixture(&http, &server, name, fx));
    }
    let metrics = rt
        .block_on(async {
            http.get(server.probe_url("/metrics"))
                .send()
                .await?
                .text()
                .await
        })
        .map_err(|e| format!("metrics: {e}"))?;
    for want in [
        "volguard_admission_requests_total{endpoint=\"validate\",kind=\"Pod\",operation=\"DELETE\",decision=\"denied\"}",
        "volguard_admission_unknown_kind_requests_total{kind=\"Deployment\"} 1",
        "volguard_admission_rejected_bodies_total{code=\"413\"} 2",
    ] {
        if !metrics.contains(want) {
            return Err(format!("metrics lack {want}:\n{metrics}").into());
        }
    }
    Ok(())
}

/// Calls answered from the request alone are counted, and only those: a pod without claims is
/// allowed without a read (a `matchCondition` could have kept the call), a pod naming a claim is
/// allowed after reading it.
fn unread_answers_count_only_calls_decided_without_a_read(
    certs: &Certs,
    fixtures: &[(String, Value)],
) -> Result<(), Failed> {
    let (server, rt) = session(certs, None)?;
    let _in = rt.enter();
    let http = client(&certs.ca_pem);
    let series = "volguard_admission_unread_answers_total{endpoint=\"validate\",kind=\"Pod\",operation=\"CREATE\"}";
    let scrape = || {
        rt.block_on(async {
            http.get(server.probe_url("/metrics"))
                .send()
                .await?
                .text()
                .await
        })
        .map_err(|e| format!("metrics: {e}"))
    };
    let count = |text: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    for (name, want) in [
        ("validate-pod-create-live-pvc", 0.0),
        ("validate-pod-create-no-claims", 1.0),
    ] {
        let (_, fx) = fixtures
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| format!("fixture {name} is missing"))?;
        let problems = rt.block_on(run_fixture(&http, &server, name, fx));
        if !problems.is_empty() {
            return Err(problems.join("\n").into());
        }
        let got = count(&scrape()?);
        if got != want {
            return Err(format!("after {name}: {series} = {got}, want {want}").into());
        }
    }
    Ok(())
}

/// Where a fixture keeps its body's text as written.
const RAW_BODY: &str = "__raw_body";

/// Each request body as the file writes it, keys in their order: the apiserver sends
/// `subResource` before the objects (Go's field order) and volguard's one-pass decoder relies on
/// it, while `serde_json::Value` sorts keys, which put `oldObject` first and left a pod's container
/// states unread (every `pods/status` fixture was then decided on "unknown").
fn keep_body_order(text: &str, fx: &mut Value) {
    #[derive(serde::Deserialize)]
    struct Raw<'a> {
        #[serde(borrow, default)]
        body: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow, default)]
        steps: Option<Vec<Raw<'a>>>,
    }
    let Ok(raw) = serde_json::from_str::<Raw<'_>>(text) else {
        return;
    };
    if let Some(b) = raw.body {
        fx[RAW_BODY] = Value::String(b.get().to_string());
    }
    for (i, step) in raw.steps.iter().flatten().enumerate() {
        if let (Some(b), Some(s)) = (step.body, fx["steps"].get_mut(i)) {
            s[RAW_BODY] = Value::String(b.get().to_string());
        }
    }
}

fn main() {
    let args = Arguments::from_args();
    let certs = Arc::new(Certs::new());
    let dir = repo().join("tests/fixtures/reviews");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(files.len() >= 40, "only {} fixtures", files.len());
    let fixtures: Vec<(String, Value)> = files
        .iter()
        .map(|f| {
            let name = f
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_default()
                .to_string();
            let text = std::fs::read_to_string(f).expect("read");
            let mut fx: Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: fixture JSON: {e}"));
            keep_body_order(&text, &mut fx);
            (name, fx)
        })
        .collect();
    let mut trials: Vec<Trial> = fixtures
        .iter()
        .map(|(name, fx)| {
            let (certs, name, fx) = (certs.clone(), name.clone(), fx.clone());
            Trial::test(name.clone(), move || run_file(&certs, &name, &fx))
        })
        .collect();
    let all = Arc::new(fixtures);
    let c = certs.clone();
    let (c2, all2) = (certs.clone(), all.clone());
    trials.push(Trial::test("metrics-count-bad-inputs", move || {
        metrics_count_bad_inputs(&c, &all)
    }));
    trials.push(Trial::test(
        "unread-answers-count-only-calls-decided-without-a-read",
        move || unread_answers_count_only_calls_decided_without_a_read(&c2, &all2),
    ));
    libtest_mimic::run(&args, trials).exit();
}
