//! `volguard fence agent`: a reference fence agent for the `webhook` backend (docs/fencing.md).
//! It runs an operator's command per node (an IPMI power-off, a cloud API call, a switch port
//! shut) and answers by the protocol in `backend.rs`: idempotent by incident, so a controller
//! that asks again never fences twice; its state file survives its own restarts.

use super::backend::{FenceRequest, FenceResponse};
use crate::fencing::args::FenceAgentArgs;
use anyhow::Context;
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::Mutex;

/// One action of one incident, as the agent remembers it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Outcome {
    /// `InProgress`, `Done` or `Failed`.
    pub state: String,
    pub message: String,
    /// Requests received for it.
    pub calls: u32,
    /// Times its command was started (1 for an agent that never fences twice).
    pub runs: u32,
}

/// incident → action (`fence`, `unfence`) → outcome.
pub type Ledger = BTreeMap<String, BTreeMap<String, Outcome>>;

struct Agent {
    ledger: Mutex<Ledger>,
    path: PathBuf,
    fence: String,
    /// Proves a fence before the agent answers `Done` (`prove`).
    verify: String,
    verify_timeout: std::time::Duration,
    unfence: String,
}

impl Agent {
    /// Change one action's outcome and persist the ledger; returns what `change` returned.
    async fn update<R>(&self, req: &FenceRequest, change: impl FnOnce(&mut Outcome) -> R) -> R {
        let mut ledger = self.ledger.lock().await;
        let o = ledger
            .entry(req.incident.clone())
            .or_default()
            .entry(req.action.clone())
            .or_default();
        let r = change(o);
        let snapshot = ledger.clone();
        drop(ledger);
        self.save(&snapshot).await;
        r
    }

    async fn save(&self, ledger: &Ledger) {
        let tmp = self.path.with_extension("tmp");
        let text = serde_json::to_vec_pretty(ledger).unwrap_or_default();
        if let Err(e) = tokio::fs::write(&tmp, text).await {
            tracing::error!(error = %e, "fence agent: cannot write its state");
            return;
        }
        if let Err(e) = tokio::fs::rename(&tmp, &self.path).await {
            tracing::error!(error = %e, "fence agent: cannot replace its state");
        }
    }
}

async fn handle(State(a): State<Arc<Agent>>, Json(req): Json<FenceRequest>) -> Json<FenceResponse> {
    let command = match req.action.as_str() {
        "fence" => a.fence.clone(),
        "unfence" => a.unfence.clone(),
        other => {
            return Json(FenceResponse {
                state: "Failed".into(),
                message: format!("unknown action {other:?}"),
            });
        }
    };
    // Recorded before the command runs: a crash mid-command never starts it again.
    let known = a
        .update(&req, |o| {
            o.calls += 1;
            if !o.state.is_empty() {
                // Asked again: the answer it already has (or "still working").
                return Some(FenceResponse {
                    state: o.state.clone(),
                    message: o.message.clone(),
                });
            }
            o.state = "InProgress".into();
            o.message = format!("{} of node {} started", req.action, req.node);
            o.runs += 1;
            None
        })
        .await;
    if let Some(answer) = known {
        return Json(answer);
    }
    tracing::info!(incident = %req.incident, node = %req.node, action = %req.action, "fence agent: running command");
    // The command runs in its own task: a caller that hangs up (volguard timing out, or
    // restarting) must not cut it short, and its outcome is recorded for the next call.
    let finish = tokio::spawn(run_command(a.clone(), command, req));
    match finish.await {
        Ok(answer) => Json(answer),
        Err(e) => Json(FenceResponse {
            state: "InProgress".into(),
            message: format!("the command's task ended unexpectedly: {e}"),
        }),
    }
}

/// Run one of the operator's commands with the request in its environment.
async fn sh(command: &str, req: &FenceRequest) -> std::io::Result<std::process::Output> {
    tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("NODE", &req.node)
        .env("INCIDENT", &req.incident)
        .env("ADDRESSES", req.addresses.join(","))
        .kill_on_drop(true)
        .output()
        .await
}

fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr)
        .chars()
        .take(300)
        .collect()
}

/// A fence is only as good as its proof: after the fence command, the verify command runs until
/// it exits 0 (the machine reads off, its processes are gone) or the time runs out. A power
/// fence that leaves a frozen machine's processes alive is `Failed`, never `Done`.
async fn prove(a: &Agent, req: &FenceRequest) -> Result<String, String> {
    let deadline = tokio::time::Instant::now() + a.verify_timeout;
    loop {
        let last = match sh(&a.verify, req).await {
            Ok(o) if o.status.success() => {
                return Ok(String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .chars()
                    .take(300)
                    .collect());
            }
            Ok(o) => format!("exited with {}: {}", o.status, stderr_of(&o)),
            Err(e) => return Err(format!("the verify command could not start: {e}")),
        };
        if tokio::time::Instant::now() + VERIFY_EVERY > deadline {
            return Err(format!(
                "the fence of node {} is not proven within {}s (verify command {last})",
                req.node,
                a.verify_timeout.as_secs()
            ));
        }
        tokio::time::sleep(VERIFY_EVERY).await;
    }
}

const VERIFY_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

async fn run_command(a: Arc<Agent>, command: String, req: FenceRequest) -> FenceResponse {
    let out = sh(&command, &req).await;
    let (state, message) = match out {
        Ok(o) if o.status.success() && req.action == "fence" => match prove(&a, &req).await {
            Ok(proof) => (
                "Done",
                format!("fence of node {} done and proven: {proof}", req.node),
            ),
            Err(why) => ("Failed", why),
        },
        Ok(o) if o.status.success() => {
            ("Done", format!("{} of node {} done", req.action, req.node))
        }
        Ok(o) => (
            "Failed",
            format!("command exited with {}: {}", o.status, stderr_of(&o)),
        ),
        Err(e) => ("Failed", format!("command could not start: {e}")),
    };
    a.update(&req, |o| {
        o.state = state.into();
        o.message = message.clone();
    })
    .await;
    FenceResponse {
        state: state.into(),
        message,
    }
}

pub fn router(ledger: Ledger, args: &FenceAgentArgs) -> Router {
    let agent = Arc::new(Agent {
        ledger: Mutex::new(ledger),
        path: args.state.clone(),
        fence: args.fence_command.clone(),
        verify: args.verify_command.clone(),
        verify_timeout: args.verify_timeout.unsigned_abs(),
        unfence: args.unfence_command.clone(),
    });
    Router::new().route("/", post(handle)).with_state(agent)
}

pub async fn run(args: FenceAgentArgs) -> anyhow::Result<()> {
    let ledger: Ledger = match std::fs::read_to_string(&args.state) {
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("reading the agent's state {}", args.state.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ledger::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", args.state.display())),
    };
    // The agent serves TLS, nothing of admission: the certificate's metrics only.
    let registry = crate::runtime::MetricsRegistry::default();
    let metrics = Arc::new(crate::server::tls::TlsMetrics::register(&registry));
    let reloader =
        crate::server::tls::CertReloader::new(args.tls_cert.clone(), args.tls_key.clone(), metrics)
            .context("loading the agent's serving certificate")?;
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    tracing::info!(listen = %listener.local_addr()?, "fence agent serving");
    crate::server::listener::serve_tls(
        listener,
        reloader.server_config()?,
        router(ledger, &args),
        crate::server::listener::Limits::default(),
        crate::runtime::shutdown_signal(),
    )
    .await;
    Ok(())
}

#[cfg(test)]
#[path = "agent_tests.rs"]
mod tests;
