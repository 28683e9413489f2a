//! What one process costs: /proc's figures, a replica started cold (time to ready, the LIST
//! pages and bytes it read, RSS once settled), and the peers' caches of the same objects.

use crate::load::{self, Served};
use crate::support::harness::{self, ControlPlane};
use std::time::{Duration, Instant};

/// What /proc says of one process.
#[derive(Clone, Copy, Default)]
pub struct ProcStat {
    pub rss_bytes: u64,
    /// The part of it that maps files (the binary's code, its libraries): what no cache holds.
    pub file_bytes: u64,
    /// The peak RSS since it started (VmHWM).
    pub peak_bytes: u64,
    pub cpu_seconds: f64,
}

pub fn proc_stat(pid: u32) -> ProcStat {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| -> u64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of /proc/PID/stat, the 12th and 13th after the
    // command name's closing parenthesis.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let ticks: f64 = stat
        .rsplit_once(')')
        .map(|(_, rest)| {
            rest.split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|v| v.parse::<f64>().ok())
                .sum()
        })
        .unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ProcStat {
        rss_bytes: kib("VmRSS:") * 1024,
        file_bytes: kib("RssFile:") * 1024,
        peak_bytes: kib("VmHWM:") * 1024,
        cpu_seconds: ticks / hz,
    }
}

/// How long a replica that turned ready is left to settle (watch events, the allocator's lazy
/// purge of what the initial LISTs freed) before its RSS is read.
const SETTLE: Duration = Duration::from_secs(10);

/// A replica started cold: seconds to ready, what the apiserver served it meanwhile (LIST pages
/// and bytes), the requests it made (its FlowSchema), and /proc once settled.
pub struct Cold {
    pub ready_seconds: f64,
    pub served: Served,
    pub requests: f64,
    pub stat: ProcStat,
}

/// A second `volguard serve` started cold against the cluster.
pub async fn cold_serve(cp: &mut ControlPlane, tag: &str) -> Cold {
    let c = cp.admin().await;
    let before = load::sample(&c).await;
    let started = Instant::now();
    let (mut p, _) = cp
        .spawn_serve(
            &format!("volguard-serve-cold-{tag}"),
            harness::free_port(),
            &[],
        )
        .await;
    let ready_seconds = started.elapsed().as_secs_f64();
    let after = load::sample(&c).await;
    tokio::time::sleep(SETTLE).await;
    let stat = proc_stat(p.child.id());
    p.kill();
    Cold {
        ready_seconds,
        served: Served::between(&before, &after),
        requests: load::requests(&before, &after, load::SERVE),
        stat,
    }
}

/// A standby `volguard controller` started cold (ready does not wait for the lease).
pub async fn cold_controller(cp: &mut ControlPlane, tag: &str) -> Cold {
    let c = cp.admin().await;
    let before = load::sample(&c).await;
    let started = Instant::now();
    let i = cp.start_controller(&format!("cold-{tag}")).await;
    let ready_seconds = started.elapsed().as_secs_f64();
    let after = load::sample(&c).await;
    tokio::time::sleep(SETTLE).await;
    let mut p = cp.controllers.remove(i);
    cp.controller_probes.remove(i);
    let stat = proc_stat(p.child.id());
    p.kill();
    Cold {
        ready_seconds,
        served: Served::between(&before, &after),
        requests: load::requests(&before, &after, load::CONTROLLER),
        stat,
    }
}

/// The same objects cached the way peers cache them (issue: memory beside the peers' caches): a
/// kube-rs `reflector` per collection (`benches/kube_rs_cache.rs`) and controller-runtime's
/// informer cache (`benches/controller-runtime`, `--cache`). Each prints `synced N` once ready.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    KubeRs,
    ControllerRuntime,
}

impl Peer {
    pub const ALL: [Peer; 2] = [Peer::KubeRs, Peer::ControllerRuntime];
    pub fn name(self) -> &'static str {
        match self {
            Peer::KubeRs => "kube_rs_reflector",
            Peer::ControllerRuntime => "controller_runtime_informer",
        }
    }
    pub fn spawn(self, cp: &ControlPlane, tag: &str) -> harness::Proc {
        let kc = cp.kubeconfig_file("peer-cache", "peer-cache", &["system:masters"]);
        let var = match self {
            Peer::KubeRs => "VOLGUARD_BENCH_KUBE_RS_CACHE",
            Peer::ControllerRuntime => "VOLGUARD_BENCH_CONTROLLER_RUNTIME",
        };
        let bin =
            std::env::var(var).unwrap_or_else(|_| panic!("{var} is set by `make bench-scale`"));
        let mut cmd = std::process::Command::new(bin);
        match self {
            Peer::KubeRs => cmd.arg("--kubeconfig").arg(&kc),
            Peer::ControllerRuntime => cmd.arg("--cache").arg(&kc),
        };
        harness::Proc::spawn(&format!("{}-{tag}", self.name()), &mut cmd, cp.dir.path())
    }
}

/// Wait until a peer printed `synced`.
pub async fn peer_synced(p: &harness::Proc) -> f64 {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(&p.log).unwrap_or_default();
        if text.lines().any(|l| l.starts_with("synced ")) {
            return started.elapsed().as_secs_f64();
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "{} did not sync:\n{}",
            p.name,
            p.tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A peer started cold at this size: seconds until synced and what /proc says once settled.
pub async fn cold_peer(cp: &ControlPlane, peer: Peer, tag: &str) -> (f64, ProcStat) {
    let mut p = peer.spawn(cp, &format!("cold-{tag}"));
    let ready = peer_synced(&p).await;
    tokio::time::sleep(SETTLE).await;
    let stat = proc_stat(p.child.id());
    p.kill();
    (ready, stat)
}

/// The cluster's processes by name, with /proc's figures: which one gave out, when one did.
pub fn components(cp: &ControlPlane) -> Vec<(String, ProcStat)> {
    let mut all: Vec<(String, u32)> = Vec::new();
    for (name, p) in [
        ("etcd", &cp.etcd),
        ("kube-apiserver", &cp.apiserver),
        ("kube-controller-manager", &cp.kcm),
        ("kube-scheduler", &cp.scheduler),
        ("volguard serve", &cp.serve),
    ] {
        if let Some(p) = p {
            all.push((name.to_string(), p.child.id()));
        }
    }
    for (name, p) in &cp.kwoks {
        all.push((format!("kwok ({name})"), p.child.id()));
    }
    for p in &cp.controllers {
        all.push(("volguard controller".to_string(), p.child.id()));
    }
    all.push(("the bench (load generator)".to_string(), std::process::id()));
    all.into_iter()
        .map(|(n, pid)| (n, proc_stat(pid)))
        .collect()
}
