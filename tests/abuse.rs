//! Protocol abuse: the server survives and keeps answering slow headers, slow bodies, many idle
//! connections, h2 rapid reset, deeply nested JSON, huge strings and TLS garbage, with bounded
//! memory and a clear answer where one is possible.

mod support;

use std::time::{Duration, Instant};
use support::serve::{Certs, Server, client, repo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const READ_TIMEOUT_MS: &str = "500";

fn start(certs: &Certs) -> Server {
    start_with(certs, &["--read-timeout-ms", READ_TIMEOUT_MS])
}

/// `volguard serve` on the example state with `extra` flags.
fn start_with(certs: &Certs, extra: &[&str]) -> Server {
    let state = repo().join("manifests/examples/state.yaml");
    let mut args = vec!["--state", state.to_str().expect("path")];
    args.extend_from_slice(extra);
    Server::start(&certs.cert(), &certs.key(), &args)
}

async fn tls(
    server: &Server,
    ca_pem: &str,
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let tcp = tokio::net::TcpStream::connect(&server.webhook)
        .await
        .expect("connect");
    support::tls_client::connector(ca_pem, alpn)
        .connect(
            rustls_pki_types::ServerName::try_from("localhost").expect("name"),
            tcp,
        )
        .await
        .expect("tls")
}

/// The first bytes the server answers on `s` (within 10 s), as text.
async fn answer(s: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>) -> String {
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .expect("answer")
        .expect("read");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The request line and headers of a review POST announcing `len` body bytes.
fn review_head(len: usize) -> String {
    format!(
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n\r\n"
    )
}

async fn still_serves(server: &Server, ca: &str) {
    let body =
        std::fs::read(repo().join("tests/fixtures/reviews/mutate-pvc-create-no-finalizers.json"))
            .expect("fixture");
    let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
    let r = client(ca)
        .post(server.url("/mutate"))
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&v["body"]).expect("body"))
        .send()
        .await
        .expect("server still answers");
    assert_eq!(r.status(), 200);
}

fn rss_mib(server: &Server) -> f64 {
    let s =
        std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

#[tokio::test]
async fn slow_headers_are_cut_off() {
    let certs = Certs::new();
    let server = start(&certs);
    let mut s = tls(&server, &certs.ca_pem, b"http/1.1").await;
    s.write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .expect("write");
    let started = Instant::now();
    let mut buf = [0u8; 1024];
    // The server closes (or answers 408) once the header timeout passes; it never waits forever.
    let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
        .await
        .expect("server closed the slow connection");
    let n = n.unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(n == 0 || text.contains("408"), "unexpected answer {text:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    still_serves(&server, &certs.ca_pem).await;
}

#[tokio::test]
async fn slow_body_gets_408() {
    let certs = Certs::new();
    let server = start(&certs);
    let mut s = tls(&server, &certs.ca_pem, b"http/1.1").await;
    s.write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"apiVersion\"")
        .await
        .expect("write");
    let text = answer(&mut s).await;
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("request body not received within"), "{text}");
    still_serves(&server, &certs.ca_pem).await;
}

#[tokio::test]
async fn many_idle_connections_and_tls_garbage() {
    let certs = Certs::new();
    // All from 127.0.0.1: the per-peer cap is lifted to look at the global one.
    let server = start_with(
        &certs,
        &[
            "--read-timeout-ms",
            READ_TIMEOUT_MS,
            "--max-connections-per-peer",
            "1024",
        ],
    );
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(tls(&server, &certs.ca_pem, b"http/1.1").await);
    }
    still_serves(&server, &certs.ca_pem).await;
    // Garbage instead of a ClientHello, and a truncated one.
    for junk in [
        &b"\x16\x03\x01\x02\x00garbage-garbage-garbage"[..],
        &[0u8; 4096][..],
        b"GET / HTTP/1.1\r\n\r\n",
    ] {
        let mut t = tokio::net::TcpStream::connect(&server.webhook)
            .await
            .expect("connect");
        let _ = t.write_all(junk).await;
        let mut buf = [0u8; 64];
        let _ = tokio::time::timeout(Duration::from_secs(5), t.read(&mut buf)).await;
    }
    still_serves(&server, &certs.ca_pem).await;
    assert!(rss_mib(&server) < 256.0, "RSS {} MiB", rss_mib(&server));
    drop(idle);
}

#[tokio::test]
async fn h2_rapid_reset_does_not_hurt() {
    use bytes::Bytes;
    use http_body_util::Full;
    let certs = Certs::new();
    let server = start(&certs);
    let s = tls(&server, &certs.ca_pem, b"h2").await;
    let (mut sender, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(s),
    )
    .await
    .expect("h2");
    tokio::spawn(conn);
    let mut reset = 0;
    for _ in 0..5000 {
        if sender.ready().await.is_err() {
            break; // the server may close an abusive connection: that is a fine answer
        }
        let req = hyper::Request::post("/validate")
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from_static(b"{}")))
            .expect("req");
        let fut = sender.send_request(req);
        // Poll once so HEADERS go out, then drop: the client sends RST_STREAM.
        let _ = tokio::time::timeout(Duration::from_micros(1), fut).await;
        reset += 1;
    }
    assert!(reset > 0);
    still_serves(&server, &certs.ca_pem).await;
    assert!(rss_mib(&server) < 256.0, "RSS {} MiB", rss_mib(&server));
}

#[tokio::test]
async fn hostile_json_gets_clear_answers() {
    let certs = Certs::new();
    // The default read timeout: the bodies here are large (6 MiB), and what is tested is how
    // they decode, not how fast they arrive (the slow-body tests own the short timeout).
    let server = start_with(&certs, &[]);
    let http = client(&certs.ca_pem);
    let post = |body: Vec<u8>| {
        http.post(server.url("/validate"))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
    };
    // 100k levels of nesting: rejected before any recursion (not an object), 400.
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let r = post(deep.into_bytes()).await.expect("answer");
    assert_eq!(r.status(), 400);
    let v: serde_json::Value = r.json().await.expect("json error body");
    assert!(
        v["error"]
            .as_str()
            .unwrap_or_default()
            .contains("not an AdmissionReview"),
        "{v}"
    );
    // Deep nesting inside the embedded object.
    let deep_obj = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","kind":{{"group":"","version":"v1","kind":"Pod"}},"operation":"CREATE","object":{}{}}}}}"#,
        "[".repeat(3_000_000),
        "]".repeat(3_000_000)
    );
    // Deep nesting as the embedded object: skipped without recursion while parsing the review,
    // then refused by the Pod decoder's recursion limit: an AdmissionReview with code 400.
    let r = post(deep_obj.into_bytes()).await.expect("answer");
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.expect("review");
    assert_eq!(v["response"]["allowed"], false);
    assert_eq!(v["response"]["status"]["code"], 400);
    assert!(
        v["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("does not decode as a Pod"),
        "{v}"
    );
    // A 6 MiB string in a pod annotation is decided normally.
    let huge = "x".repeat(6 * 1024 * 1024);
    let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "huge", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE", "namespace": "shop",
        "userInfo": {"username": "alice"},
        "object": {"metadata": {"name": "big", "namespace": "shop", "annotations": {"blob": huge}},
                   "spec": {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data-web-1"}}]}}}});
    let r = post(serde_json::to_vec(&review).expect("json"))
        .await
        .expect("answer");
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.expect("review");
    assert_eq!(v["response"]["uid"], "huge");
    assert_eq!(
        v["response"]["allowed"], false,
        "still the real decision: data-web-1 is terminating"
    );
    // Invalid UTF-8 inside a string.
    let mut bad =
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""#
            .to_vec();
    bad.extend_from_slice(&[0xff, 0xfe]);
    bad.extend_from_slice(br#""}}"#);
    assert_eq!(post(bad).await.expect("answer").status(), 400);
    still_serves(&server, &certs.ca_pem).await;
    assert!(rss_mib(&server) < 256.0, "RSS {} MiB", rss_mib(&server));
}

/// An oversize body announced by Content-Length: the client, still writing, reads the 413
/// (the server drains what it sends instead of resetting the connection under it).
#[tokio::test]
async fn oversize_body_gets_a_413_the_sender_reads() {
    let certs = Certs::new();
    let server = start(&certs);
    let mut s = tls(&server, &certs.ca_pem, b"http/1.1").await;
    let size = 8 * 1024 * 1024;
    s.write_all(review_head(size).as_bytes())
        .await
        .expect("head");
    // Keep writing the whole body, as a client that does not read until it has sent would.
    let chunk = vec![b' '; 64 * 1024];
    for _ in 0..size / chunk.len() {
        s.write_all(&chunk)
            .await
            .expect("the server keeps reading while it answers");
    }
    s.flush().await.expect("flush");
    let text = answer(&mut s).await;
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("request body exceeds"), "{text}");
    still_serves(&server, &certs.ca_pem).await;
}

/// Many large bodies trickling in at once: the bytes held are bounded by
/// `--max-body-bytes-in-flight`, and since a decide slot is taken only once a body is in, a small
/// review is still answered while they trickle (with one slot for the whole server).
#[tokio::test]
async fn slow_large_bodies_hold_bytes_not_slots() {
    let certs = Certs::new();
    let server = start_with(
        &certs,
        &[
            "--read-timeout-ms",
            "20000",
            "--max-concurrent-requests",
            "1",
            "--max-body-bytes-in-flight",
            "16777216",
        ],
    );
    let before = rss_mib(&server);
    let clients = 40;
    let size = 6 * 1024 * 1024;
    let mut streams = Vec::new();
    for _ in 0..clients {
        let mut s = tls(&server, &certs.ca_pem, b"http/1.1").await;
        s.write_all(review_head(size).as_bytes())
            .await
            .expect("head");
        streams.push(s);
    }
    // Each sends 4 MiB of its 6 MiB: 160 MiB offered in all, of which the server may hold 16.
    let chunk = vec![b' '; 256 * 1024];
    for round in 0..16 {
        for s in streams.iter_mut() {
            // A client whose body waits for room sees its writes stall; do not block on it.
            let _ = tokio::time::timeout(Duration::from_millis(20), s.write_all(&chunk)).await;
        }
        if round == 8 {
            // The one decide slot is free: a small review is answered while the bodies trickle.
            let started = Instant::now();
            still_serves(&server, &certs.ca_pem).await;
            assert!(started.elapsed() < Duration::from_secs(5));
        }
    }
    let during = rss_mib(&server);
    println!(
        "RSS before {before:.0} MiB, with {clients} slow 6 MiB bodies in flight {during:.0} MiB"
    );
    // 16 MiB of budget, plus one pending frame in each of 40 connections' read buffers (hyper
    // reads up to ~400 KiB at a time): ~32 MiB; measured +27..30 MiB. Unbounded it was +200.
    assert!(
        during - before < 56.0,
        "bytes in flight not bounded: {before:.0} -> {during:.0} MiB"
    );
    drop(streams);
    still_serves(&server, &certs.ca_pem).await;
}

/// `volguard_connections_closed_total{reason}` as served on /metrics.
async fn closed_count(server: &Server, reason: &str) -> f64 {
    metric(
        server,
        &format!("volguard_connections_closed_total{{reason=\"{reason}\"}}"),
    )
    .await
}

/// The value of the series `series` (name and labels) on /metrics; 0 when absent.
async fn metric(server: &Server, series: &str) -> f64 {
    let text = reqwest::get(server.probe_url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

/// Whether the server closed `s` within `within` (EOF or a reset, never an answer).
async fn closed_by_server(
    s: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    within: Duration,
) -> bool {
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout(within, s.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // h2: the server's SETTINGS / GOAWAY frames come first; keep reading.
            Ok(Ok(_)) => {}
        }
    }
}

/// Trust review point 13: TLS connections that never send a request once held every slot for as
/// long as they stayed open (1,024 of them locked the apiserver out). Now each must send a
/// request within the read timeout, on HTTP/1.1 and h2 alike, or it is closed and its slot freed.
#[tokio::test]
async fn connections_that_send_no_request_are_closed_and_free_their_slots() {
    let certs = Certs::new();
    let server = start_with(
        &certs,
        &[
            "--read-timeout-ms",
            READ_TIMEOUT_MS,
            "--max-connections",
            "40",
        ],
    );
    let mut idle = Vec::new();
    for i in 0..40 {
        let alpn: &[u8] = if i % 2 == 0 { b"http/1.1" } else { b"h2" };
        idle.push(tls(&server, &certs.ca_pem, alpn).await);
    }
    let started = Instant::now();
    for (i, s) in idle.iter_mut().enumerate() {
        assert!(
            closed_by_server(s, Duration::from_secs(5)).await,
            "idle connection {i} still open after {:?}",
            started.elapsed()
        );
    }
    // Every slot was given back: a caller is served again.
    still_serves(&server, &certs.ca_pem).await;
    let n = closed_count(&server, "no_request").await;
    assert!(n >= 40.0, "closed for no request: {n}");
    println!(
        "40 idle TLS connections (h1 and h2) closed within {:?} of the read timeout; {n} counted",
        started.elapsed()
    );
}

/// After a request, a connection with nothing in flight past --idle-timeout is closed too (an
/// h2 connection that only answers PINGs earns nothing: activity is a request).
#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let certs = Certs::new();
    let server = start_with(&certs, &["--idle-timeout", "1s"]);
    let mut s = tls(&server, &certs.ca_pem, b"http/1.1").await;
    let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CONNECT"}}"#;
    s.write_all(review_head(body.len()).as_bytes())
        .await
        .expect("head");
    s.write_all(body).await.expect("body");
    let first = answer(&mut s).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    assert!(
        closed_by_server(&mut s, Duration::from_secs(5)).await,
        "an idle keep-alive connection stayed open"
    );
    assert!(closed_count(&server, "idle").await >= 1.0);
}

/// One peer address holds at most --max-connections-per-peer slots.
#[tokio::test]
async fn one_peer_cannot_take_every_slot() {
    let certs = Certs::new();
    let server = start_with(&certs, &["--max-connections-per-peer", "3"]);
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(tls(&server, &certs.ca_pem, b"http/1.1").await);
    }
    let tcp = tokio::net::TcpStream::connect(&server.webhook)
        .await
        .expect("connect");
    let fourth = support::tls_client::connector(&certs.ca_pem, b"http/1.1")
        .connect(
            rustls_pki_types::ServerName::try_from("localhost").expect("name"),
            tcp,
        )
        .await;
    assert!(
        fourth.is_err(),
        "a fourth connection from one peer was served"
    );
    assert!(closed_count(&server, "peer_limit").await >= 1.0);
    drop(held);
    // The slots come back as the connections close.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = client(&certs.ca_pem)
            .get(server.url("/healthz-is-not-here"))
            .send()
            .await;
        if r.is_ok() {
            break;
        }
        assert!(Instant::now() < deadline, "slots never came back: {r:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A client trusting the serving CA of `certs`, presenting `pki`'s certificate when given.
fn mtls_client(certs: &Certs, pki: Option<&volguard::devcerts::DevPki>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(certs.ca_pem.as_bytes()).expect("ca"))
        .tls_built_in_root_certs(false)
        .timeout(Duration::from_secs(10));
    if let Some(p) = pki {
        let pem = format!("{}{}", p.cert_pem, p.key_pem);
        b = b.identity(reqwest::Identity::from_pem(pem.as_bytes()).expect("identity"));
    }
    b.build().expect("client")
}

/// POST a fixture's review to /mutate with `c`.
async fn post_review(
    c: reqwest::Client,
    server: &Server,
) -> Result<reqwest::Response, reqwest::Error> {
    let body =
        std::fs::read(repo().join("tests/fixtures/reviews/mutate-pvc-create-no-finalizers.json"))
            .expect("fixture");
    let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
    c.post(server.url("/mutate"))
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(&v["body"]).expect("body"))
        .send()
        .await
}

/// With --client-ca only clients presenting a certificate that CA signed are served (the
/// apiserver presents one through its AdmissionConfiguration kubeconfig).
#[tokio::test]
async fn with_a_client_ca_only_its_clients_are_served() {
    let certs = Certs::new();
    let callers = volguard::devcerts::generate(&["kube-apiserver".into()]).expect("client pki");
    let strangers = volguard::devcerts::generate(&["someone".into()]).expect("other pki");
    let ca_file = certs.dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, &callers.ca_pem).expect("write");
    let server = start_with(&certs, &["--client-ca", ca_file.to_str().expect("path")]);
    let ok = post_review(mtls_client(&certs, Some(&callers)), &server)
        .await
        .expect("the apiserver's certificate is served");
    assert_eq!(ok.status(), 200);
    assert!(
        post_review(mtls_client(&certs, None), &server)
            .await
            .is_err(),
        "a client without a certificate was served"
    );
    assert!(
        post_review(mtls_client(&certs, Some(&strangers)), &server)
            .await
            .is_err(),
        "a certificate of another CA was served"
    );
    assert!(closed_count(&server, "handshake_failed").await >= 2.0);
}

/// A rotated client CA bundle is trusted by new handshakes without a restart; a bundle that does
/// not parse keeps the one in use and counts a failed reload.
#[tokio::test]
async fn a_rotated_client_ca_applies_to_new_handshakes() {
    let certs = Certs::new();
    let first = volguard::devcerts::generate(&["kube-apiserver".into()]).expect("client pki");
    let second = volguard::devcerts::generate(&["kube-apiserver".into()]).expect("rotated pki");
    let ca_file = certs.dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, &first.ca_pem).expect("write");
    let server = start_with(
        &certs,
        &[
            "--client-ca",
            ca_file.to_str().expect("path"),
            "--tls-reload-interval-ms",
            "200",
        ],
    );
    let served = |pki| post_review(mtls_client(&certs, Some(pki)), &server);
    assert_eq!(served(&first).await.expect("first CA").status(), 200);
    assert!(
        served(&second).await.is_err(),
        "the rotated CA trusted early"
    );

    // Written the way the kubelet updates a ConfigMap volume: new bytes under the same name.
    let tmp = certs.dir.path().join("client-ca.crt.new");
    std::fs::write(&tmp, &second.ca_pem).expect("write");
    std::fs::rename(&tmp, &ca_file).expect("rename");
    let started = Instant::now();
    while served(&second).await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the rotated client CA was never trusted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        served(&first).await.is_err(),
        "the old client CA is still trusted"
    );

    std::fs::write(&ca_file, "not a certificate").expect("write");
    let started = Instant::now();
    while reloads(&server, "failure").await < 1.0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "no failed reload counted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        served(&second).await.expect("kept CA").status(),
        200,
        "a broken bundle must keep the CA in use"
    );
}

async fn reloads(server: &Server, result: &str) -> f64 {
    metric(
        server,
        &format!("volguard_tls_reloads_total{{result=\"{result}\"}}"),
    )
    .await
}
