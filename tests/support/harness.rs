//! A real cluster on loopback, built from Go modules by `make controlplane`: etcd +
//! kube-apiserver, in the chosen profile kube-controller-manager (protection controllers only, or
//! its default controllers), kube-scheduler, one kwok per node as that node's kubelet, and
//! cert-manager's controller and cainjector; plus volguard serve and controller registered through
//! the project's own manifests. Everything is killed and its temp dir removed on drop, also when a
//! test panics.
#![allow(dead_code)]

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, ListParams, PostParams};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "harness/clients.rs"]
mod clients;
#[path = "harness/install.rs"]
mod install;
#[path = "harness/kwok.rs"]
mod kwok;
#[path = "harness/meter.rs"]
pub mod meter;
#[path = "harness/procs.rs"]
mod procs;
#[path = "harness/registration.rs"]
mod registration;
#[path = "harness/waits.rs"]
mod waits;
pub use procs::*;
use procs::{made, write_webhook_client_config};
use waits::replace_or_create;
pub use waits::*;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Profile {
    /// volguard alone protects storage: StorageObjectInUseProtection off, no kube-controller-manager.
    Standalone,
    /// Default admission plugins plus kube-controller-manager's pvc/pv protection controllers.
    BesideUpstream,
    /// Default admission plugins, kube-controller-manager with its default controllers (each
    /// with its own ServiceAccount credentials, node-lifecycle and PodGC included) and
    /// kube-scheduler binding pods through `pods/binding`. Nodes are kwok processes, one per
    /// node, each authenticated as that node's kubelet (`system:node:<node>` in `system:nodes`),
    /// so pod status, node leases and final deletes reach the apiserver (and volguard) as a real
    /// kubelet's do.
    Cluster,
    /// As `Cluster`, sized for thousands of nodes and pods (`make bench-scale`): the controllers'
    /// and the scheduler's client limits raised (as large clusters run them), the node monitor at
    /// its default grace period, and nodes played by one kwok for all (`kwok_fleet`).
    Scale,
}

/// Client limits of kube-controller-manager and kube-scheduler in the `Scale` profile: their
/// defaults (20 and 50 requests per second) would make the bench measure their rate limiters.
pub const SCALE_CLIENT: [&str; 2] = ["--kube-api-qps=500", "--kube-api-burst=1000"];

/// The kwok fleet's node leases: renewed every 30 s, so 5,000 nodes renew ~170 leases a second
/// (a kubelet's default 40 s lease renewed every 10 s would be 500 writes a second on 2 cores).
pub const FLEET_LEASE_SECONDS: u32 = 120;

/// The user the kwok fleet acts as for every node it plays (`ControlPlane::spawn_kwok_fleet`).
pub const FLEET_USER: &str = "kwok-fleet";

/// The namespace label that routes `make bench`'s interleaved binds to one mode's webhooks
/// (`ControlPlane::register_webhooks_by_namespace`).
pub const BENCH_MODE: &str = "bench.volguard.io/mode";

pub struct ControlPlane {
    pub profile: Profile,
    pub dir: tempfile::TempDir,
    pub pki: Pki,
    pub api_url: String,
    pub etcd: Option<Proc>,
    pub apiserver: Option<Proc>,
    pub kcm: Option<Proc>,
    pub scheduler: Option<Proc>,
    /// One kwok per node (the node's kubelet), by node name.
    pub kwoks: Vec<(String, Proc)>,
    pub serve: Option<Proc>,
    pub controllers: Vec<Proc>,
    pub controller_probes: Vec<u16>,
    /// Extra flags for every `volguard controller` this cluster starts (fencing settings).
    pub controller_extra: Vec<String>,
    /// Clients whose bytes are counted on the wire (`meter`), by identity: their kubeconfigs name
    /// the relay instead of the apiserver.
    pub metered: std::collections::BTreeMap<String, meter::Meter>,
    /// Extra `volguard serve` flags of the webhook `start_webhook` runs.
    pub serve_extra: Vec<String>,
    /// Users every serve and controller started from now allows to force-delete
    /// (`--force-delete-allow-user`), and every registration answers in the apiserver (its
    /// force-delete entries' allow-list condition), as the chart's `forceDeleteAllow` does.
    pub force_delete_allow_users: Vec<String>,
    /// Where the registered webhooks send calls (the harness's serve, or a scenario's forwarder).
    pub webhook_port: u16,
    /// Where the harness's own `volguard serve` (`serve`) listens.
    pub serve_port: u16,
    /// Probe port (`/metrics`) of the running `volguard serve`.
    pub serve_probe: u16,
    pub webhook_ca: String,
    /// cert-manager's controller and cainjector, when they issue the webhook's certificate.
    pub cert_manager: Vec<Proc>,
    /// Copies the issued Secret into the files volguard serves (the kubelet's secret volume).
    secret_sync: Option<tokio::task::JoinHandle<()>>,
    registered: bool,
    /// Whether cainjector erased the webhooks' matchConditions when it injected the CA.
    pub cainjector_dropped_match_conditions: bool,
    etcd_url: String,
    etcd_args: Vec<String>,
    apiserver_args: Vec<String>,
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

impl ControlPlane {
    pub async fn start(profile: Profile) -> ControlPlane {
        Self::start_with(profile, &[]).await
    }

    /// As `start`, with extra kube-apiserver flags (the chaos test keeps full etcd history).
    pub async fn start_with(profile: Profile, extra_apiserver_args: &[&str]) -> ControlPlane {
        let dir = tempfile::tempdir().expect("tmp");
        let d = dir.path().to_path_buf();
        let pki = Pki::new();
        std::fs::write(d.join("ca.crt"), &pki.ca_pem).expect("write");
        let serving = pki.issue(
            "kube-apiserver",
            &[],
            &[
                "127.0.0.1",
                "localhost",
                "kubernetes.default.svc",
                "10.96.0.1",
            ],
        );
        std::fs::write(d.join("apiserver.crt"), &serving.cert_pem).expect("write");
        std::fs::write(d.join("apiserver.key"), &serving.key_pem).expect("write");
        let sa = KeyPair::generate().expect("sa key");
        std::fs::write(d.join("sa.key"), sa.serialize_pem()).expect("write");
        std::fs::write(d.join("sa.pub"), sa.public_key_pem()).expect("write");

        let etcd_port = free_port();
        let peer_port = free_port();
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let mut cp = ControlPlane {
            profile,
            api_url: String::new(),
            etcd: None,
            apiserver: None,
            kcm: None,
            scheduler: None,
            kwoks: Vec::new(),
            serve: None,
            controllers: Vec::new(),
            controller_probes: Vec::new(),
            controller_extra: Vec::new(),
            metered: Default::default(),
            serve_extra: Vec::new(),
            force_delete_allow_users: Vec::new(),
            webhook_port: free_port(),
            serve_port: 0,
            serve_probe: 0,
            webhook_ca: String::new(),
            cert_manager: Vec::new(),
            secret_sync: None,
            registered: false,
            cainjector_dropped_match_conditions: false,
            etcd_url: etcd_url.clone(),
            etcd_args: Vec::new(),
            apiserver_args: Vec::new(),
            pki,
            dir,
        };
        cp.etcd_args = vec![
            "--data-dir".into(),
            d.join("etcd-data").display().to_string(),
            "--listen-client-urls".into(),
            etcd_url.clone(),
            "--advertise-client-urls".into(),
            etcd_url.clone(),
            "--listen-peer-urls".into(),
            format!("http://127.0.0.1:{peer_port}"),
            "--initial-advertise-peer-urls".into(),
            format!("http://127.0.0.1:{peer_port}"),
            "--initial-cluster".into(),
            format!("default=http://127.0.0.1:{peer_port}"),
            "--unsafe-no-fsync".into(),
            "--log-level".into(),
            "warn".into(),
            // 150,000 pods with a claim and a volume each outgrow etcd's default 2 GiB
            // quota (`make bench-scale`); a test cluster's disk is the limit, not a quota.
            "--quota-backend-bytes".into(),
            "8589934592".into(),
        ];
        cp.etcd = Some(cp.spawn_etcd());
        let port = free_port();
        cp.api_url = format!("https://127.0.0.1:{port}");
        let mut args: Vec<String> = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // 1.37 refuses a loopback address in the `kubernetes` Service's endpoints; nothing
            // here needs them (every client dials the apiserver directly).
            "--endpoint-reconciler-type=none".into(),
            format!("--tls-cert-file={}", d.join("apiserver.crt").display()),
            format!(
                "--tls-private-key-file={}",
                d.join("apiserver.key").display()
            ),
            format!("--client-ca-file={}", d.join("ca.crt").display()),
            format!("--service-account-key-file={}", d.join("sa.pub").display()),
            format!(
                "--service-account-signing-key-file={}",
                d.join("sa.key").display()
            ),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            "--authorization-mode=Node,RBAC".into(),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            format!("--cert-dir={}", d.join("apiserver-certs").display()),
            "--enable-priority-and-fairness=false".into(),
            "--event-ttl=1h".into(),
            // As clusters run (kubeadm sets it): upstream's storage suites use privileged pods.
            "--allow-privileged=true".into(),
        ];
        if profile == Profile::Standalone {
            args.push(
                "--disable-admission-plugins=ServiceAccount,StorageObjectInUseProtection".into(),
            );
        }
        // The apiserver presents a client certificate to every webhook (its AdmissionConfiguration
        // kubeconfig, user `*`), as rules.md §8 asks operators to set up: a `volguard serve
        // --client-ca webhook-client/ca.crt` serves only it. A server without --client-ca does
        // not ask for one, so nothing else changes.
        args.push(format!(
            "--admission-control-config-file={}",
            write_webhook_client_config(&d).display()
        ));
        args.extend(extra_apiserver_args.iter().map(|a| a.to_string()));
        cp.apiserver_args = args;
        cp.start_apiserver().await;
        match profile {
            Profile::BesideUpstream => cp.start_kcm().await,
            Profile::Cluster => {
                // Tuned as an operator who wants fast failover tunes it: node-lifecycle checks
                // every second, so a node is NotReady within a second of its grace (at the 5 s
                // default, up to two periods later: the sampling, not the grace, set recovery).
                cp.start_kcm_all(&[
                    "--node-monitor-grace-period=16s",
                    "--node-monitor-period=1s",
                ]);
                cp.start_scheduler(&[]);
            }
            Profile::Scale => {
                // The fleet's leases last FLEET_LEASE_SECONDS (renewed every quarter of that):
                // node-lifecycle must not call a node dead between two renewals.
                let mut kcm = SCALE_CLIENT.to_vec();
                kcm.push("--node-monitor-grace-period=240s");
                cp.start_kcm_all(&kcm);
                cp.start_scheduler(&SCALE_CLIENT);
            }
            Profile::Standalone => {}
        }
        cp
    }

    pub async fn start_apiserver(&mut self) {
        let d = self.dir.path().to_path_buf();
        self.apiserver = Some(Proc::spawn(
            "kube-apiserver",
            Command::new(bin_dir().join("kube-apiserver")).args(&self.apiserver_args),
            &d,
        ));
        let client = self.admin().await;
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let req = http::Request::get("/readyz").body(Vec::new()).expect("req");
            if let Ok(body) = client.request_text(req).await
                && body.trim() == "ok"
            {
                break;
            }
            let exited = self
                .apiserver
                .as_mut()
                .is_some_and(|p| matches!(p.child.try_wait(), Ok(Some(_))));
            if exited || Instant::now() > deadline {
                panic!(
                    "kube-apiserver not ready (exited: {exited}):\n{}",
                    self.apiserver.as_ref().map(Proc::tail).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    fn spawn_etcd(&self) -> Proc {
        Proc::spawn(
            "etcd",
            Command::new(made("VOLGUARD_ETCD")).args(&self.etcd_args),
            self.dir.path(),
        )
    }

    pub fn kill_etcd(&mut self) {
        if let Some(mut p) = self.etcd.take() {
            p.kill();
        }
    }

    /// etcd started again on its data (the apiserver reconnects by itself).
    pub fn start_etcd(&mut self) {
        if self.etcd.is_none() {
            self.etcd = Some(self.spawn_etcd());
        }
    }

    pub fn kill_apiserver(&mut self) {
        if let Some(mut p) = self.apiserver.take() {
            p.kill();
        }
    }

    /// kube-controller-manager runs as `system:kube-controller-manager` (no per-controller
    /// ServiceAccount credentials here), so it is bound to the bootstrap roles of the two
    /// protection controllers, which is what those controllers get in a real cluster.
    async fn start_kcm(&mut self) {
        use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
        let admin = self.admin().await;
        for ctl in ["pvc-protection-controller", "pv-protection-controller"] {
            let b: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("e2e-kcm-{ctl}")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("system:controller:{ctl}")},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:kube-controller-manager"}]
            }))
            .expect("binding");
            Api::<ClusterRoleBinding>::all(admin.clone())
                .create(&PostParams::default(), &b)
                .await
                .expect("bind kcm");
        }
        self.kcm = Some(self.component(
            "kube-controller-manager",
            "system:kube-controller-manager",
            &["--controllers=persistentvolumeclaim-protection-controller,persistentvolume-protection-controller".into()],
        ));
    }

    /// kube-controller-manager with its default controllers, each under its own ServiceAccount
    /// (`--use-service-account-credentials`), as a real cluster runs it, plus `extra` flags (the
    /// cluster profile's node scenarios mark a node NotReady after 16 s instead of 50 s). A
    /// running one is stopped first.
    pub fn start_kcm_all(&mut self, extra: &[&str]) {
        if let Some(mut old) = self.kcm.take() {
            old.kill();
        }
        let d = self.dir.path().to_path_buf();
        let mut args: Vec<String> = vec![
            "--controllers=*".into(),
            // The in-tree hostPath provisioner (test clusters only) gives claims real PVs.
            "--enable-hostpath-provisioner=true".into(),
            "--use-service-account-credentials=true".into(),
            format!(
                "--service-account-private-key-file={}",
                d.join("sa.key").display()
            ),
            format!("--root-ca-file={}", d.join("ca.crt").display()),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        self.kcm = Some(self.component(
            "kube-controller-manager",
            "system:kube-controller-manager",
            &args,
        ));
    }

    /// kube-scheduler as `system:kube-scheduler` (its bootstrap RBAC).
    fn start_scheduler(&mut self, extra: &[&str]) {
        let mut args = vec!["-v=2".to_string()];
        args.extend(extra.iter().map(|a| a.to_string()));
        self.scheduler = Some(self.component("kube-scheduler", "system:kube-scheduler", &args));
    }

    /// A second kube-controller-manager running only the pvc-protection and pv-protection
    /// controllers, as the user `kcm-protection` (bound to cluster-admin by the caller): its
    /// informers are those two controllers' alone, so the apiserver's per-user figures are theirs.
    pub fn spawn_kcm_protection(&self) -> Proc {
        let args = vec![
            "--controllers=persistentvolumeclaim-protection-controller,persistentvolume-protection-controller".to_string(),
            "--kube-api-qps=500".to_string(),
            "--kube-api-burst=1000".to_string(),
        ];
        self.component_named(
            "kcm-protection",
            "kube-controller-manager",
            "kcm-protection",
            &args,
        )
    }
    /// A control-plane component (`bin`) with a client certificate for `user`, no leader
    /// election, its own secure port on loopback.
    fn component(&self, bin: &str, user: &str, extra: &[String]) -> Proc {
        self.component_named(bin, bin, user, extra)
    }
    /// As `component`, logging to `name`.log.
    fn component_named(&self, name: &str, bin: &str, user: &str, extra: &[String]) -> Proc {
        let d = self.dir.path().to_path_buf();
        let kc = self.kubeconfig_file(name, user, &[]);
        Proc::spawn(
            name,
            Command::new(bin_dir().join(bin))
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg("--leader-elect=false")
                .arg(format!("--secure-port={}", free_port()))
                .arg("--bind-address=127.0.0.1")
                .args(extra),
            &d,
        )
    }
}
