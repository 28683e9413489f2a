//! Which requests volguard makes, from the apiserver's own audit log: the FlowSchema counts say
//! how many, the audit log says which (verb, resource, who). Only volguard's two identities are
//! logged, at `Metadata`, so the log stays small at any size. The harness runs them as their
//! service accounts by impersonation: the audit policy sees the impersonator (the audit filter
//! runs before impersonation), the event names the service account as `impersonatedUser`.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Who the harness authenticates as when it acts as a service account.
const IMPERSONATOR: &str = "e2e-impersonator";

const USERS: [&str; 2] = [
    "system:serviceaccount:volguard-system:volguard-webhook",
    "system:serviceaccount:volguard-system:volguard-controller",
];

/// The audit policy and log of one run.
pub struct Audit {
    _dir: tempfile::TempDir,
    policy: PathBuf,
    pub log: PathBuf,
}

impl Audit {
    pub fn new() -> Audit {
        let dir = tempfile::tempdir().expect("audit dir");
        let policy = dir.path().join("audit-policy.yaml");
        let users = [IMPERSONATOR, USERS[0], USERS[1]]
            .map(|u| format!("\"{u}\""))
            .join(", ");
        std::fs::write(
            &policy,
            format!(
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
                 - level: Metadata\n  users: [{users}]\n- level: None\n"
            ),
        )
        .expect("write audit policy");
        let log = dir.path().join("audit.log");
        Audit {
            _dir: dir,
            policy,
            log,
        }
    }

    /// kube-apiserver flags: a JSON log, written as it comes (no batching), never rotated.
    pub fn apiserver_args(&self) -> Vec<String> {
        vec![
            format!("--audit-policy-file={}", self.policy.display()),
            format!("--audit-log-path={}", self.log.display()),
            "--audit-log-format=json".into(),
            "--audit-log-mode=blocking".into(),
            "--audit-log-maxsize=0".into(),
        ]
    }
}

/// One kind of request: who made it, the verb, the resource (with subresource).
#[derive(PartialEq, Eq, PartialOrd, Ord, Clone, Debug)]
pub struct Kind {
    pub who: String,
    pub verb: String,
    pub resource: String,
}

/// volguard's requests received in `[from, to)`, by kind, most first (each request once, by its
/// audit id: a watch is logged when its response starts and again when it ends).
pub fn breakdown(log: &Path, from: jiff::Timestamp, to: jiff::Timestamp) -> Vec<(Kind, usize)> {
    use std::io::BufRead;
    let Ok(file) = std::fs::File::open(log) else {
        return Vec::new();
    };
    let mut seen = std::collections::HashSet::new();
    let mut counts: BTreeMap<Kind, usize> = BTreeMap::new();
    for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
        let Ok(e) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let at = e["requestReceivedTimestamp"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok());
        if !at.is_some_and(|t| t >= from && t < to) {
            continue;
        }
        if !seen.insert(e["auditID"].as_str().unwrap_or_default().to_string()) {
            continue;
        }
        let user = e["impersonatedUser"]["username"]
            .as_str()
            .or(e["user"]["username"].as_str())
            .unwrap_or_default();
        if !USERS.contains(&user) {
            continue;
        }
        let who = user.rsplit(':').next().unwrap_or(user).to_string();
        let o = &e["objectRef"];
        let resource = match (o["resource"].as_str(), o["subresource"].as_str()) {
            (Some(r), Some(s)) => format!("{r}/{s}"),
            (Some(r), None) => r.to_string(),
            _ => e["requestURI"].as_str().unwrap_or_default().to_string(),
        };
        let verb = e["verb"].as_str().unwrap_or_default().to_string();
        *counts
            .entry(Kind {
                who,
                verb,
                resource,
            })
            .or_default() += 1;
    }
    let mut all: Vec<(Kind, usize)> = counts.into_iter().collect();
    all.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    all
}

/// The breakdown as lines for the table's notes: the top `n` kinds, per second over `seconds`.
pub fn lines(all: &[(Kind, usize)], seconds: f64, n: usize) -> Vec<String> {
    all.iter()
        .take(n)
        .map(|(k, count)| {
            format!(
                "{:>8.2} req/s  {:<20} {:<7} {}",
                *count as f64 / seconds.max(1e-9),
                k.who,
                k.verb,
                k.resource
            )
        })
        .collect()
}
