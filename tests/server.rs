//! Serving behaviour of the real binary: certificate rotation through a `..data` symlink swap,
//! rejection of a broken pair, h2 and HTTP/1.1, probes, and graceful shutdown on SIGTERM.

mod support;

use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::{Duration, Instant};
use support::serve::{Certs, Server, client, repo};

fn review_body() -> Vec<u8> {
    let fx: serde_json::Value = serde_json::from_slice(
        &std::fs::read(repo().join("tests/fixtures/reviews/mutate-pvc-create-no-finalizers.json"))
            .expect("fixture"),
    )
    .expect("json");
    serde_json::to_vec(&fx["body"]).expect("body")
}

fn state_arg() -> String {
    repo()
        .join("manifests/examples/state.yaml")
        .display()
        .to_string()
}

/// Lay out a directory the way the kubelet mounts a Secret: files behind `..data` → `..<ts>`.
fn kubelet_dir(root: &Path, generation: &str, pki: &volguard::devcerts::DevPki) {
    let ts = root.join(format!("..{generation}"));
    volguard::devcerts::write(&ts, pki).expect("write");
    let tmp = root.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    symlink(format!("..{generation}"), &tmp).expect("symlink");
    std::fs::rename(&tmp, root.join("..data")).expect("atomic swap");
    for f in ["tls.crt", "tls.key"] {
        let link = root.join(f);
        if std::fs::symlink_metadata(&link).is_err() {
            symlink(format!("..data/{f}"), &link).expect("link");
        }
    }
}

async fn post_ok(
    http: &reqwest::Client,
    server: &Server,
) -> Result<reqwest::Response, reqwest::Error> {
    http.post(server.url("/mutate"))
        .header("Content-Type", "application/json")
        .body(review_body())
        .send()
        .await
}

#[tokio::test]
async fn rotation_through_data_symlink_swap() {
    let dir = tempfile::tempdir().expect("tmp");
    let sans = ["localhost".to_string()];
    let first = volguard::devcerts::generate(&sans).expect("pki");
    kubelet_dir(dir.path(), "2026_11_21_a", &first);
    let server = Server::start(
        &dir.path().join("tls.crt"),
        &dir.path().join("tls.key"),
        &["--state", &state_arg(), "--tls-reload-interval-ms", "200"],
    );
    let old_client = client(&first.ca_pem);
    assert_eq!(
        post_ok(&old_client, &server)
            .await
            .expect("first cert")
            .status(),
        200
    );

    // A broken new pair (certificate of one CA, key of another) is refused; the old one stays.
    let other = volguard::devcerts::generate(&sans).expect("pki");
    let broken = volguard::devcerts::DevPki {
        ca_pem: other.ca_pem.clone(),
        cert_pem: other.cert_pem.clone(),
        key_pem: first.key_pem.clone(),
    };
    kubelet_dir(dir.path(), "2026_11_21_b", &broken);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let fresh_old = client(&first.ca_pem);
    assert_eq!(
        post_ok(&fresh_old, &server)
            .await
            .expect("old pair kept")
            .status(),
        200
    );
    let metrics = reqwest::get(server.probe_url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("volguard_tls_reloads_total{result=\"failure\"} 1"),
        "{metrics}"
    );

    // A valid new pair is presented to new handshakes within seconds.
    let second = volguard::devcerts::generate(&sans).expect("pki");
    kubelet_dir(dir.path(), "2026_11_21_c", &second);
    let new_client = client(&second.ca_pem);
    let started = Instant::now();
    loop {
        if let Ok(r) = post_ok(&new_client, &server).await {
            assert_eq!(r.status(), 200);
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "new certificate never served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // And the old CA no longer verifies new connections.
    let old_again = client(&first.ca_pem);
    assert!(
        post_ok(&old_again, &server).await.is_err(),
        "old certificate still served"
    );
}

#[tokio::test]
async fn full_chain_is_accepted_and_served() {
    let certs = Certs::new();
    // Append the CA to tls.crt: a chain as cert-manager writes it.
    let chain = format!(
        "{}{}",
        std::fs::read_to_string(certs.cert()).expect("cert"),
        certs.ca_pem
    );
    std::fs::write(certs.cert(), chain).expect("write");
    let server = Server::start(&certs.cert(), &certs.key(), &["--state", &state_arg()]);
    assert_eq!(
        post_ok(&client(&certs.ca_pem), &server)
            .await
            .expect("chain")
            .status(),
        200
    );
}

#[tokio::test]
async fn h2_and_http1_both_served() {
    let certs = Certs::new();
    let server = Server::start(&certs.cert(), &certs.key(), &["--state", &state_arg()]);
    let ca = reqwest::Certificate::from_pem(certs.ca_pem.as_bytes()).expect("ca");
    let h2 = reqwest::Client::builder()
        .add_root_certificate(ca.clone())
        .tls_built_in_root_certs(false)
        .build()
        .expect("client");
    let r = post_ok(&h2, &server).await.expect("h2");
    assert_eq!(r.version(), reqwest::Version::HTTP_2, "ALPN should pick h2");
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.expect("json");
    assert_eq!(body["response"]["allowed"], true);
    let h1 = reqwest::Client::builder()
        .add_root_certificate(ca)
        .tls_built_in_root_certs(false)
        .http1_only()
        .build()
        .expect("client");
    let r = post_ok(&h1, &server).await.expect("http1");
    assert_eq!(r.version(), reqwest::Version::HTTP_11);
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn plain_http_is_not_served_on_the_webhook_port() {
    let certs = Certs::new();
    let server = Server::start(&certs.cert(), &certs.key(), &["--state", &state_arg()]);
    let url = format!("http://{}/validate", server.webhook);
    let r = reqwest::Client::new()
        .post(url)
        .header("Content-Type", "application/json")
        .body(review_body())
        .send()
        .await;
    assert!(
        r.is_err() || r.is_ok_and(|r| r.status() != 200),
        "plain HTTP admission must not work"
    );
    // TLS garbage did not hurt: the next real request works.
    assert_eq!(
        post_ok(&client(&certs.ca_pem), &server)
            .await
            .expect("tls")
            .status(),
        200
    );
}

#[tokio::test]
async fn sigterm_finishes_in_flight_request_then_exits_zero() {
    let certs = Certs::new();
    let mut server = Server::start(
        &certs.cert(),
        &certs.key(),
        &["--state", &state_arg(), "--shutdown-drain=1s"],
    );
    let http = client(&certs.ca_pem);
    let body = review_body();
    let (first, rest) = body.split_at(body.len() / 2);
    let (first, rest) = (first.to_vec(), rest.to_vec());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let stream = futures::stream::unfold(
        (Some(first), Some(rest), Some(rx)),
        |(a, b, rx)| async move {
            if let Some(a) = a {
                return Some((Ok::<_, std::io::Error>(a), (None, b, rx)));
            }
            if let Some(rx) = rx {
                let _ = rx.await;
            }
            b.map(|b| (Ok(b), (None, None, None)))
        },
    );
    let len = body.len();
    let request = tokio::spawn({
        let url = server.url("/mutate");
        async move {
            http.post(url)
                .header("Content-Type", "application/json")
                .header("Content-Length", len)
                .body(reqwest::Body::wrap_stream(stream))
                .send()
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = server.child.id().to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        server.child.try_wait().expect("wait").is_none(),
        "exited with a request in flight"
    );
    let _ = tx.send(());
    let resp = request
        .await
        .expect("join")
        .expect("in-flight request answered");
    assert_eq!(resp.status(), 200);
    // Read and drop the answer: a held response keeps hyper's client connection (and so the
    // server's graceful close of it) open.
    let _ = resp.text().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = server.child.try_wait().expect("wait") {
            assert!(st.success(), "exit status {st:?}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "did not exit after SIGTERM: {:?}",
            server.drain_logs()
        );
        // The runtime must run: the client's side of the h2 graceful close (GOAWAY, PING ack)
        // happens in its connection task.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn sigterm(server: &Server) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

/// Issue: on SIGTERM the listener closed before readiness turned false, so the apiserver's calls
/// during a rollout met refused connections. Now readiness turns false before the drain period
/// ends and new connections are still served after it did; then the process exits 0, not before
/// the drain ends. The drain is long against the test's own steps so that a loaded machine (the
/// test at a low priority beside a benchmark) cannot run it past its end: what is asserted is the
/// order, not a speed.
#[tokio::test]
async fn sigterm_turns_unready_then_serves_new_connections_through_the_drain() {
    const DRAIN: Duration = Duration::from_secs(8);
    let certs = Certs::new();
    let mut server = Server::start(
        &certs.cert(),
        &certs.key(),
        &[
            "--state",
            &state_arg(),
            &format!("--shutdown-drain={}s", DRAIN.as_secs()),
        ],
    );
    let readyz = || {
        let url = server.probe_url("/readyz");
        async move {
            reqwest::get(url)
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }
    };
    assert_eq!(readyz().await, 200);
    // Before the signal: the server's drain starts no earlier than `t`.
    let t = Instant::now();
    sigterm(&server);
    let mut unready = false;
    while t.elapsed() < DRAIN / 2 {
        if readyz().await == 503 {
            unready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        unready,
        "readiness still true {:?} after SIGTERM",
        t.elapsed()
    );
    // While unready, a fresh client (a new connection, as an apiserver whose endpoints have not
    // caught up yet would open) is served.
    let mut served = 0;
    while served < 5 {
        let resp = post_ok(&client(&certs.ca_pem), &server)
            .await
            .unwrap_or_else(|e| panic!("not served {:?} into the drain: {e}", t.elapsed()));
        assert_eq!(resp.status(), 200);
        served += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadline = Instant::now() + DRAIN + Duration::from_secs(10);
    loop {
        if let Some(st) = server.child.try_wait().expect("wait") {
            assert!(st.success(), "exit status {st:?}");
            break;
        }
        assert!(Instant::now() < deadline, "did not exit after the drain");
        // The runtime must run: the client's side of the h2 graceful close (GOAWAY, PING ack)
        // happens in its connection task.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(t.elapsed() >= DRAIN, "exited before the drain period ended");
}

/// Every stderr line is one JSON object with each key once (strict parsers reject a second
/// `message`), a refusal and a fatal error included.
#[tokio::test]
async fn json_logs_have_each_key_once() {
    use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
    struct Strict;
    impl<'de> Deserialize<'de> for Strict {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> Visitor<'de> for V {
                type Value = Strict;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Strict, A::Error> {
                    let mut seen = std::collections::HashSet::new();
                    while let Some(k) = m.next_key::<String>()? {
                        let _: serde::de::IgnoredAny = m.next_value()?;
                        if !seen.insert(k.clone()) {
                            return Err(serde::de::Error::custom(format!("key {k:?} twice")));
                        }
                    }
                    Ok(Strict)
                }
            }
            d.deserialize_map(V)
        }
    }
    let check = |line: &str| {
        serde_json::from_str::<Strict>(line)
            .unwrap_or_else(|e| panic!("log line is not strict JSON ({e}): {line}"));
    };
    let certs = Certs::new();
    let server = Server::start(&certs.cert(), &certs.key(), &["--state", &state_arg()]);
    let fx: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            repo().join("tests/fixtures/reviews/validate-pvc-strip-finalizer-null-in-use.json"),
        )
        .expect("fixture"),
    )
    .expect("json");
    let resp = client(&certs.ca_pem)
        .post(server.url("/validate"))
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&fx["body"]).expect("body"))
        .send()
        .await
        .expect("answer");
    let v: serde_json::Value = resp.json().await.expect("json");
    assert_eq!(v["response"]["allowed"], false);
    let mut refused = None;
    for _ in 0..50 {
        refused = server
            .drain_logs()
            .into_iter()
            .inspect(|l| check(l))
            .find(|l| l.contains("\"refused\""));
        if refused.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = refused.expect("a refusal line");
    assert!(
        refused.contains("\"reason\":\"refusing to remove"),
        "{refused}"
    );
    // A fatal error: one JSON line, nothing else.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
        .args([
            "--log-format",
            "json",
            "serve",
            "--tls-cert",
            "/nonexistent/tls.crt",
        ])
        .args(["--tls-key", "/nonexistent/tls.key", "--state", &state_arg()])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "no error printed");
    for l in &lines {
        check(l);
    }
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("/nonexistent/tls.crt"))
            .count(),
        1,
        "the error once: {stderr}"
    );
}

/// `volguard version` and `volguard_build_info` name the same build: version and commit.
#[tokio::test]
async fn version_and_build_info_name_the_build() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
        .arg("version")
        .output()
        .expect("run volguard version");
    assert!(out.status.success());
    let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let commit = line
        .strip_prefix(&format!("volguard {} (commit ", env!("CARGO_PKG_VERSION")))
        .and_then(|r| r.split(',').next())
        .unwrap_or_else(|| panic!("unexpected version line {line:?}"))
        .to_string();
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{line}"
    );
    let certs = Certs::new();
    let server = Server::start(&certs.cert(), &certs.key(), &["--state", &state_arg()]);
    let metrics = reqwest::get(server.probe_url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    let info = metrics
        .lines()
        .find(|l| l.starts_with("volguard_build_info{"))
        .unwrap_or_else(|| panic!("no volguard_build_info in {metrics}"));
    assert!(info.ends_with(" 1"), "{info}");
    assert!(
        info.contains(&format!("commit=\"{commit}\"")),
        "{info} vs {line}"
    );
    assert!(
        info.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))),
        "{info}"
    );
}

/// `/metrics` speaks both formats (issue 44 point 7): OpenMetrics to a scraper that asks for it,
/// the Prometheus text format otherwise, and the latter passes `promtool check metrics`.
#[tokio::test]
#[ignore = "needs promtool: `make alerts` (part of `make test`) runs it with --ignored"]
async fn metrics_in_both_formats_pass_promtool() {
    let certs = Certs::new();
    let server = Server::start(&certs.cert(), &certs.key(), &["--state", &state_arg()]);
    let client = reqwest::Client::new();
    let om = client
        .get(server.probe_url("/metrics"))
        .header(
            "Accept",
            "application/openmetrics-text; version=1.0.0,text/plain;version=0.0.4;q=0.5",
        )
        .send()
        .await
        .expect("metrics");
    let ct = om.headers()["content-type"]
        .to_str()
        .unwrap_or_default()
        .to_string();
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    let om = om.text().await.expect("text");
    assert!(
        om.trim_end().ends_with("# EOF"),
        "OpenMetrics ends with # EOF"
    );
    let prom = client
        .get(server.probe_url("/metrics"))
        .send()
        .await
        .expect("metrics");
    let ct = prom.headers()["content-type"]
        .to_str()
        .unwrap_or_default()
        .to_string();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    let prom = prom.text().await.expect("text");
    assert!(
        !prom.contains("# EOF") && prom.contains("# TYPE process_cpu_seconds_total counter"),
        "{prom}"
    );
    let promtool = std::env::var("VOLGUARD_PROMTOOL").unwrap_or_else(|_| "promtool".into());
    let mut child = std::process::Command::new(&promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {promtool}: {e} (make alerts installs it)"));
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(prom.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The apiserver calls a DELETE's webhooks twice when the grace period ends at once (the registry
/// validates the graceful-deletion update, then the deletion), each call with its own request
/// UID. volguard decides both but counts one request (issue 44 point 6): same object UID, user
/// and endpoint within moments, after an allowed first call, whatever the resourceVersion (the
/// graceful-deletion update between the calls can move it: a live trial counted one force delete
/// twice when the key held it). Another object is another request; a refused delete has no
/// second call, so each repeat of it is a request of its own.
#[tokio::test]
async fn a_delete_s_second_call_is_not_counted_again() {
    let certs = Certs::new();
    let server = Server::start(&certs.cert(), &certs.key(), &["--state", &state_arg()]);
    let http = support::serve::client(&certs.ca_pem);
    let fixture = |name: &str| -> serde_json::Value {
        serde_json::from_str(
            &std::fs::read_to_string(
                support::serve::repo().join(format!("tests/fixtures/reviews/{name}.json")),
            )
            .expect("fixture"),
        )
        .expect("json")
    };
    let post = |fixture: serde_json::Value, uid: &'static str, rv: &'static str| {
        let mut body = fixture["body"].clone();
        body["request"]["uid"] = serde_json::json!(uid);
        body["request"]["oldObject"]["metadata"]["resourceVersion"] = serde_json::json!(rv);
        let http = http.clone();
        let url = server.url("/validate/force-delete");
        async move {
            let r = http.post(url).json(&body).send().await.expect("post");
            let v: serde_json::Value = r.json().await.expect("review");
            v["response"]["allowed"].as_bool().expect("allowed")
        }
    };
    let counted = |decision: &'static str| {
        let url = server.probe_url("/metrics");
        async move {
            let text = reqwest::get(url)
                .await
                .expect("metrics")
                .text()
                .await
                .expect("text");
            let series = format!(
                r#"volguard_admission_requests_total{{endpoint="force-delete",kind="Pod",operation="DELETE",decision="{decision}"}}"#
            );
            text.lines()
                .filter(|l| l.starts_with(&series))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        }
    };
    // Allowed (its own kubelet), then its second call: one request.
    let kubelet = fixture("validate-pod-delete-force-own-kubelet");
    assert!(
        post(
            kubelet.clone(),
            "00000000-0000-4000-8000-0000000a0001",
            "41"
        )
        .await
    );
    assert!(
        post(
            kubelet.clone(),
            "00000000-0000-4000-8000-0000000a0002",
            "42"
        )
        .await
    );
    assert_eq!(
        counted("allowed").await,
        1.0,
        "two calls of one request count once"
    );
    let mut other = kubelet;
    other["body"]["request"]["oldObject"]["metadata"]["uid"] = serde_json::json!("uid-other-pod");
    assert!(post(other, "00000000-0000-4000-8000-0000000a0003", "42").await);
    assert_eq!(
        counted("allowed").await,
        2.0,
        "another pod is another request"
    );
    // Refused twice: two requests.
    let admin = fixture("validate-pod-delete-force-admin");
    assert!(!post(admin.clone(), "00000000-0000-4000-8000-0000000a0004", "7").await);
    assert!(!post(admin, "00000000-0000-4000-8000-0000000a0005", "7").await);
    assert_eq!(
        counted("denied").await,
        2.0,
        "each refused delete is a request"
    );
}
