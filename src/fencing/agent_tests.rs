use super::*;
use axum::body::Body;
use http_body_util::BodyExt;
use tower::ServiceExt;

fn args(dir: &std::path::Path, fence: &str, verify: &str) -> FenceAgentArgs {
    FenceAgentArgs {
        listen: String::new(),
        tls_cert: PathBuf::new(),
        tls_key: PathBuf::new(),
        fence_command: fence.into(),
        verify_command: verify.into(),
        verify_timeout: jiff::SignedDuration::from_secs(2),
        unfence_command: "true".into(),
        state: dir.join("ledger.json"),
    }
}

async fn ask(app: &Router, action: &str) -> FenceResponse {
    let body = serde_json::json!({"incident": "node-7-1", "node": "node-7", "action": action});
    let req = axum::http::Request::post("/")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("request");
    let res = app.clone().oneshot(req).await.expect("answer");
    let bytes = res.into_body().collect().await.expect("body").to_bytes();
    serde_json::from_slice(&bytes).expect("a FenceResponse")
}

#[tokio::test]
async fn a_fence_is_done_only_once_proven() {
    let dir = tempfile::tempdir().expect("dir");
    let proof = dir.path().join("off");
    // The machine reads off only on the verify command's second look.
    let verify = format!(
        "if [ -f {p} ]; then echo off; else touch {p}; exit 1; fi",
        p = proof.display()
    );
    let app = router(Ledger::new(), &args(dir.path(), "true", &verify));
    let a = ask(&app, "fence").await;
    assert_eq!(a.state, "Done", "{a:?}");
    assert!(a.message.contains("proven: off"), "{a:?}");
}

#[tokio::test]
async fn a_fence_that_is_never_proven_fails_and_is_not_run_again() {
    let dir = tempfile::tempdir().expect("dir");
    let runs = dir.path().join("runs");
    let fence = format!("echo x >> {}", runs.display());
    let app = router(
        Ledger::new(),
        &args(dir.path(), &fence, "echo 3 processes alive >&2; exit 1"),
    );
    let a = ask(&app, "fence").await;
    assert_eq!(a.state, "Failed", "{a:?}");
    assert!(
        a.message.contains("not proven") && a.message.contains("3 processes alive"),
        "{a:?}"
    );
    // Asked again: the recorded answer, never a second fence.
    let again = ask(&app, "fence").await;
    assert_eq!(again, a);
    let n = std::fs::read_to_string(&runs)
        .expect("runs")
        .lines()
        .count();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn a_failed_fence_command_is_failed_without_verifying() {
    let dir = tempfile::tempdir().expect("dir");
    let verified = dir.path().join("verified");
    let verify = format!("touch {}", verified.display());
    let app = router(
        Ledger::new(),
        &args(dir.path(), "echo no BMC >&2; exit 3", &verify),
    );
    let a = ask(&app, "fence").await;
    assert_eq!(a.state, "Failed", "{a:?}");
    assert!(a.message.contains("no BMC"), "{a:?}");
    assert!(!verified.exists());
}

#[tokio::test]
async fn an_unfence_needs_no_proof() {
    let dir = tempfile::tempdir().expect("dir");
    let app = router(Ledger::new(), &args(dir.path(), "true", "exit 1"));
    let a = ask(&app, "unfence").await;
    assert_eq!(a.state, "Done", "{a:?}");
}
