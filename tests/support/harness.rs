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

/// The namespace label that routes `make bench`'s interleaved binds to one mode's webhooks
/// (`ControlPlane::register_webhooks_by_namespace`).
pub const BENCH_MODE: &str = "bench.volguard.io/mode";

/// What a Service's endpoints and kube-proxy do for the webhook's replicas, on one loopback port:
/// each new connection goes to the next backend in turn; established ones stay where they are
/// (as with conntrack), so a replica that leaves must drain its own connections.
pub struct Forwarder {
    pub port: u16,
    backends: std::sync::Arc<std::sync::Mutex<Vec<u16>>>,
    refused: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Forwarder {
    pub async fn start(backend: u16) -> Forwarder {
        Forwarder::start_many(vec![backend]).await
    }

    /// Round robin over `backends`, a connection at a time.
    pub async fn start_many(backends: Vec<u16>) -> Forwarder {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("forwarder port");
        let port = listener.local_addr().expect("addr").port();
        let to = std::sync::Arc::new(std::sync::Mutex::new(backends));
        let refused = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (to2, refused2) = (to.clone(), refused.clone());
        let task = tokio::spawn(async move {
            let mut next = 0usize;
            while let Ok((mut inbound, _)) = listener.accept().await {
                let port = {
                    let b = to2.lock().unwrap_or_else(|e| e.into_inner());
                    next = next.wrapping_add(1);
                    b[next % b.len()]
                };
                let refused = refused2.clone();
                tokio::spawn(async move {
                    match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                        Ok(mut out) => {
                            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                        }
                        Err(_) => {
                            refused.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        Forwarder {
            port,
            backends: to,
            refused,
            task,
        }
    }
    /// New connections go to `port` from now on.
    pub fn route_to(&self, port: u16) {
        self.route_to_many(vec![port]);
    }
    /// New connections go to `ports` in turn from now on.
    pub fn route_to_many(&self, ports: Vec<u16>) {
        *self.backends.lock().unwrap_or_else(|e| e.into_inner()) = ports;
    }
    /// Connections whose backend refused them.
    pub fn refused(&self) -> usize {
        self.refused.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A port free now, for a process about to listen on it. Taken from below the kernel's ephemeral
/// range: a port from `bind(:0)` lies inside it, where any outgoing connection of this machine may
/// take it before the process it was picked for binds it ("Address already in use" in CI).
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let low = 10_000.min(ephemeral / 2);
    for _ in 0..1000 {
        // RandomState is seeded afresh each time: concurrent test processes pick apart.
        let r = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let port = low + (r % u64::from(ephemeral - low)) as u16;
        // Never the same port twice in one process (several are picked before any is bound).
        static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return port;
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A path `make e2e` passes in `var` (it builds what the path names).
fn made(var: &str) -> PathBuf {
    let dir = std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run the e2e tests with `make e2e` (it builds the control plane, etcd, kwok and cert-manager into .cache/)")
    });
    PathBuf::from(dir)
}

/// kube-apiserver, kube-controller-manager, kube-scheduler and kubectl of the version under test.
pub fn bin_dir() -> PathBuf {
    made("VOLGUARD_CONTROLPLANE_DIR")
}

/// A child process that is killed on drop; its output goes to a log file in the temp dir.
pub struct Proc {
    pub name: String,
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn spawn(name: &str, cmd: &mut Command, logdir: &Path) -> Proc {
        let log = logdir.join(format!("{name}.log"));
        let f = std::fs::File::create(&log).expect("log file");
        let child = cmd
            .stdout(f.try_clone().expect("dup"))
            .stderr(f)
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        Proc {
            name: name.to_string(),
            child,
            log,
        }
    }
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(st)) = self.child.try_wait() {
                return Some(st);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill();
        None
    }
    /// Send a signal (`STOP` freezes the process, `CONT` resumes it).
    pub fn signal(&self, sig: &str) {
        let _ = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status();
    }
    /// The port of the address a JSON log line of this process gives under `field` (volguard logs
    /// `"probes":"127.0.0.1:PORT"` once its listeners are bound).
    pub async fn logged_port(&self, field: &str, within: Duration) -> Result<u16, String> {
        let deadline = Instant::now() + within;
        loop {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let found = text.lines().find_map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).ok()?;
                v[field].as_str()?.rsplit(':').next()?.parse::<u16>().ok()
            });
            if let Some(port) = found {
                return Ok(port);
            }
            if Instant::now() >= deadline {
                return Err(format!("{} logged no {field:?} address", self.name));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The last `n` lines of this process's log that contain `needle`, under its name.
    pub fn lines_with(&self, needle: &str, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(needle)).collect();
        format!(
            "--- {} ({} lines with {needle:?}, the last {n}):\n{}",
            self.name,
            lines.len(),
            lines[lines.len().saturating_sub(n)..].join("\n")
        )
    }

    pub fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

/// A CA and a client certificate for the apiserver's webhook calls, and the AdmissionConfiguration
/// that makes the apiserver present it; returns the configuration's path.
fn write_webhook_client_config(d: &Path) -> PathBuf {
    let dir = d.join("webhook-client");
    let pki = volguard::devcerts::generate(&["kube-apiserver-webhook-client".into()]).expect("pki");
    volguard::devcerts::write(&dir, &pki).expect("write");
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: '*'\n  user:\n    client-certificate: {}\n    client-key: {}\n",
            dir.join("tls.crt").display(),
            dir.join("tls.key").display()
        ),
    )
    .expect("write");
    let plugin = |name: &str| {
        format!(
            "- name: {name}\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
            kubeconfig.display()
        )
    };
    let config = dir.join("admission.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n{}{}",
            plugin("ValidatingAdmissionWebhook"),
            plugin("MutatingAdmissionWebhook")
        ),
    )
    .expect("write");
    config
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

impl Drop for ControlPlane {
    /// Stop copying the certificate before the temp dir it writes into is removed.
    fn drop(&mut self) {
        if let Some(sync) = self.secret_sync.take() {
            sync.abort();
        }
    }
}

pub struct Pki {
    ca_key: KeyPair,
    ca_params: CertificateParams,
    pub ca_pem: String,
}

pub struct Pair {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Pki {
    pub fn new() -> Pki {
        let ca_key = KeyPair::generate().expect("key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "e2e cluster CA");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = ca.self_signed(&ca_key).expect("ca");
        Pki {
            ca_pem: cert.pem(),
            ca_key,
            ca_params: ca,
        }
    }

    pub fn issue(&self, cn: &str, orgs: &[&str], sans: &[&str]) -> Pair {
        let key = KeyPair::generate().expect("key");
        let mut p = CertificateParams::new(Vec::<String>::new()).expect("params");
        p.distinguished_name.push(DnType::CommonName, cn);
        for o in orgs {
            p.distinguished_name.push(DnType::OrganizationName, *o);
        }
        p.subject_alt_names = sans
            .iter()
            .map(|s| match s.parse::<std::net::IpAddr>() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName((*s).try_into().expect("dns")),
            })
            .collect();
        p.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        ];
        let issuer = Issuer::from_params(&self.ca_params, &self.ca_key);
        let cert = p.signed_by(&key, &issuer).expect("sign");
        Pair {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

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
    /// Extra `volguard serve` flags of the webhook `start_webhook` runs.
    pub serve_extra: Vec<String>,
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
            &["127.0.0.1", "localhost", "kubernetes.default.svc"],
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
            serve_extra: Vec::new(),
            webhook_port: free_port(),
            serve_port: 0,
            serve_probe: 0,
            webhook_ca: String::new(),
            cert_manager: Vec::new(),
            secret_sync: None,
            registered: false,
            cainjector_dropped_match_conditions: false,
            etcd_url: etcd_url.clone(),
            apiserver_args: Vec::new(),
            pki,
            dir,
        };
        cp.etcd = Some(Proc::spawn(
            "etcd",
            Command::new(made("VOLGUARD_ETCD"))
                .arg("--data-dir")
                .arg(d.join("etcd-data"))
                .args([
                    "--listen-client-urls",
                    &etcd_url,
                    "--advertise-client-urls",
                    &etcd_url,
                ])
                .args([
                    "--listen-peer-urls",
                    &format!("http://127.0.0.1:{peer_port}"),
                ])
                .args([
                    "--initial-advertise-peer-urls",
                    &format!("http://127.0.0.1:{peer_port}"),
                ])
                .args([
                    "--initial-cluster",
                    &format!("default=http://127.0.0.1:{peer_port}"),
                ])
                .args(["--unsafe-no-fsync", "--log-level", "warn"])
                // 150,000 pods with a claim and a volume each outgrow etcd's default 2 GiB
                // quota (`make bench-scale`); a test cluster's disk is the limit, not a quota.
                .args(["--quota-backend-bytes", "8589934592"]),
            &d,
        ));
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
                cp.start_kcm_all(&["--node-monitor-grace-period=16s"]);
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

    /// A Node played by its own kwok, authenticated as the node's kubelet: kwok reports it Ready,
    /// renews its lease, runs its pods through kwok's stages (pending, running, completed for
    /// Job pods) and removes them once they are deleted, as a kubelet does. Returns once the
    /// node is Ready and untainted (the node-lifecycle controller lifts the not-ready taint).
    pub async fn kwok_node(&mut self, name: &str) {
        // Each node its own address (a network fence names the node's addresses).
        static NEXT_IP: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
        let n = NEXT_IP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ip = format!("10.250.{}.{}", n / 250, n % 250 + 1);
        self.kwok_node_at(name, &ip).await;
    }

    /// As `kwok_node`, with the node's InternalIP (kwok gives a hostNetwork pod its node's IP).
    pub async fn kwok_node_at(&mut self, name: &str, ip: &str) {
        use k8s_openapi::api::core::v1::Node;
        self.kwok_stages("kwok-stages.yaml", "");
        let node = kwok_node_object(name, ip, &[]);
        let admin = self.admin().await;
        if self.kwoks.is_empty() {
            kwok_startup_grant(&admin).await;
        }
        let nodes = Api::<Node>::all(admin);
        nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        self.kubeconfig_file(
            &format!("kwok-{name}"),
            &format!("system:node:{name}"),
            &["system:nodes"],
        );
        let p = self.spawn_kwok(name);
        self.kwoks.push((name.to_string(), p));
        self.eventually(
            &format!("node {name} Ready and untainted"),
            Duration::from_secs(60),
            || {
                let nodes = nodes.clone();
                async move {
                    let n = nodes.get(name).await.ok()?;
                    let ready = n
                        .status?
                        .conditions?
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True");
                    let tainted = n.spec.and_then(|s| s.taints).is_some_and(|t| !t.is_empty());
                    (ready && !tainted).then_some(())
                }
            },
        )
        .await;
    }

    /// kwok's configuration `file` in the cluster's directory: the stages `make e2e` copied from
    /// kwok's module, then `extra` documents. Written once.
    fn kwok_stages(&self, file: &str, extra: &str) -> PathBuf {
        let config = self.dir.path().join(file);
        if !config.exists() {
            let stages = made("VOLGUARD_KWOK_DIR").join("stages");
            let mut files: Vec<_> = std::fs::read_dir(&stages)
                .unwrap_or_else(|e| panic!("{}: {e}", stages.display()))
                .filter_map(Result::ok)
                .map(|e| e.path())
                .collect();
            files.sort();
            let mut docs: Vec<String> = files
                .iter()
                .map(|f| std::fs::read_to_string(f).expect("stage"))
                .collect();
            assert!(!docs.is_empty(), "no kwok stages in {}", stages.display());
            if !extra.is_empty() {
                docs.push(extra.to_string());
            }
            std::fs::write(&config, docs.join("\n---\n")).expect("write stages");
        }
        config
    }

    /// One kwok that plays every node labelled `volguard.io/kwok-fleet=true` (`fleet_nodes`), as
    /// kwok runs thousands of nodes on one machine: it reports them Ready, renews their Leases
    /// (40 s, the kubelet's default) and runs their pods through the same stages as `kwok_node`.
    /// One process cannot hold each node's kubelet identity, so it acts as the user `kwok-fleet`
    /// (cluster admin): a webhook in front of it must allow-list that user for the final force
    /// deletes a kubelet makes (`--force-delete-allow-user=kwok-fleet`).
    pub fn spawn_kwok_fleet(&mut self) {
        let d = self.dir.path().to_path_buf();
        let kc = self.kubeconfig_file("kwok-fleet", "kwok-fleet", &["system:masters"]);
        let config = self.kwok_stages(
            "kwok-fleet.yaml",
            "apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n  \
             podPlayStageParallelism: 16\n  nodePlayStageParallelism: 8\n  nodeLeaseParallelism: 16\n",
        );
        let p = Proc::spawn(
            "kwok-fleet",
            Command::new(made("VOLGUARD_KWOK_DIR").join("kwok"))
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg(format!("--config={}", config.display()))
                .arg("--manage-nodes-with-label-selector=volguard.io/kwok-fleet=true")
                .arg(format!(
                    "--node-lease-duration-seconds={FLEET_LEASE_SECONDS}"
                ))
                .arg("--cidr=10.128.0.0/9"),
            &d,
        );
        self.kwoks.push(("fleet".to_string(), p));
    }

    /// Create the nodes `names` for the kwok fleet (16 at a time) and wait until all are Ready
    /// and untainted.
    pub async fn fleet_nodes(&self, names: &[String]) {
        use futures::StreamExt;
        use k8s_openapi::api::core::v1::Node;
        let nodes = Api::<Node>::all(self.admin().await);
        let created: Vec<_> = futures::stream::iter(names.iter().enumerate())
            .map(|(i, name)| {
                let nodes = nodes.clone();
                // 10.0.0.0/9 holds 8 Mi addresses: one per node, never the pods' range.
                let ip = format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256);
                async move {
                    let node = kwok_node_object(name, &ip, &[("volguard.io/kwok-fleet", "true")]);
                    nodes.create(&PostParams::default(), &node).await
                }
            })
            .buffer_unordered(16)
            .collect()
            .await;
        for r in created {
            r.expect("create fleet node");
        }
        let want: std::collections::BTreeSet<&str> = names.iter().map(String::as_str).collect();
        self.eventually(
            &format!("{} fleet nodes Ready and untainted", names.len()),
            Duration::from_secs(600),
            || {
                let nodes = nodes.clone();
                let want = want.clone();
                async move {
                    let list = nodes
                        .list(&ListParams::default().labels("volguard.io/kwok-fleet=true"))
                        .await
                        .ok()?;
                    let ready = list
                        .items
                        .iter()
                        .filter(|n| want.contains(n.metadata.name.as_deref().unwrap_or_default()))
                        .filter(|n| {
                            let ready = n
                                .status
                                .as_ref()
                                .and_then(|s| s.conditions.as_ref())
                                .is_some_and(|c| {
                                    c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                                });
                            let tainted = n
                                .spec
                                .as_ref()
                                .and_then(|s| s.taints.as_ref())
                                .is_some_and(|t| !t.is_empty());
                            ready && !tainted
                        })
                        .count();
                    (ready == want.len()).then_some(())
                }
            },
        )
        .await;
    }

    /// Cordon (`true`) or uncordon a node, as `kubectl cordon` / `uncordon` do.
    pub async fn cordon(&self, node: &str, on: bool) -> Result<(), kube::Error> {
        use k8s_openapi::api::core::v1::Node;
        use kube::api::{Patch, PatchParams};
        let v = if on {
            serde_json::json!(true)
        } else {
            serde_json::json!(null)
        };
        Api::<Node>::all(self.admin().await)
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"unschedulable": v}})),
            )
            .await
            .map(|_| ())
    }

    /// Start a stopped node's kwok again (the node object is still there): the node returns.
    pub fn restart_kwok(&mut self, name: &str) {
        let p = self.spawn_kwok(name);
        self.kwoks.push((name.to_string(), p));
    }

    /// The kwok process that plays node `name`'s kubelet (its kubeconfig and stages written by
    /// `kwok_node`).
    fn spawn_kwok(&self, name: &str) -> Proc {
        let d = self.dir.path().to_path_buf();
        let kc = d.join(format!("kwok-{name}.kubeconfig"));
        assert!(
            kc.exists(),
            "no kubeconfig for kwok {name}: start it with kwok_node first"
        );
        Proc::spawn(
            &format!("kwok-{name}"),
            Command::new(made("VOLGUARD_KWOK_DIR").join("kwok"))
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg(format!("--config={}", d.join("kwok-stages.yaml").display()))
                .arg(format!("--manage-single-node={name}"))
                .arg("--node-lease-duration-seconds=8")
                .arg("--cidr=10.244.0.0/16"),
            &d,
        )
    }

    /// Stop a node's kwok: the node's "kubelet" is gone, its lease expires.
    pub fn stop_kwok(&mut self, name: &str) {
        if let Some(i) = self.kwoks.iter().position(|(n, _)| n == name) {
            let (_, mut p) = self.kwoks.remove(i);
            p.kill();
        }
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

    /// A kubeconfig with a client certificate for `user` in `groups`.
    pub fn kubeconfig_yaml(&self, user: &str, groups: &[&str]) -> String {
        self.kubeconfig_impersonating(user, groups, None)
    }

    /// As `kubeconfig_yaml`, acting as the ServiceAccount `namespace/name` (impersonation): the
    /// process then holds exactly the RBAC the manifests give that ServiceAccount.
    pub fn kubeconfig_impersonating(
        &self,
        user: &str,
        groups: &[&str],
        sa: Option<(&str, &str)>,
    ) -> String {
        let pair = self.pki.issue(user, groups, &[]);
        let imp = match sa {
            Some((ns, name)) => format!(
                "    as: system:serviceaccount:{ns}:{name}\n    as-groups: [system:serviceaccounts, \"system:serviceaccounts:{ns}\", system:authenticated]\n"
            ),
            None => String::new(),
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers:\n- name: u\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n{imp}contexts:\n- name: c\n  context: {{cluster: e2e, user: u}}\ncurrent-context: c\n",
            self.api_url,
            b64(&self.pki.ca_pem),
            b64(&pair.cert_pem),
            b64(&pair.key_pem)
        )
    }

    pub fn sa_kubeconfig_file(&self, sa: &str) -> PathBuf {
        self.sa_kubeconfig_in("volguard-system", sa)
    }

    /// A kubeconfig acting as the ServiceAccount `namespace/sa`.
    pub fn sa_kubeconfig_in(&self, namespace: &str, sa: &str) -> PathBuf {
        let p = self.dir.path().join(format!("{namespace}-{sa}.kubeconfig"));
        let text = self.kubeconfig_impersonating(
            "e2e-impersonator",
            &["system:masters"],
            Some((namespace, sa)),
        );
        std::fs::write(&p, text).expect("write kubeconfig");
        p
    }

    pub async fn sa_client(&self, sa: &str) -> kube::Client {
        let text = self.kubeconfig_impersonating(
            "e2e-impersonator",
            &["system:masters"],
            Some(("volguard-system", sa)),
        );
        let kc: kube::config::Kubeconfig = serde_yaml::from_str(&text).expect("kubeconfig");
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .expect("config");
        kube::Client::try_from(cfg).expect("client")
    }

    pub fn kubeconfig_file(&self, name: &str, user: &str, groups: &[&str]) -> PathBuf {
        let p = self.dir.path().join(format!("{name}.kubeconfig"));
        std::fs::write(&p, self.kubeconfig_yaml(user, groups)).expect("write kubeconfig");
        p
    }

    pub async fn client_as(&self, user: &str, groups: &[&str]) -> kube::Client {
        let kc: kube::config::Kubeconfig =
            serde_yaml::from_str(&self.kubeconfig_yaml(user, groups)).expect("kubeconfig");
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .expect("config");
        kube::Client::try_from(cfg).expect("client")
    }

    pub async fn admin(&self) -> kube::Client {
        self.client_as("e2e-admin", &["system:masters"]).await
    }

    /// The kubelet of `node`, as the Node authorizer knows it.
    pub async fn kubelet(&self, node: &str) -> kube::Client {
        self.client_as(&format!("system:node:{node}"), &["system:nodes"])
            .await
    }

    /// Start `volguard serve` against this apiserver and register the project's webhook
    /// manifests with a loopback URL and the dev CA.
    pub async fn start_webhook(&mut self) {
        let extra = self.serve_extra.clone();
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let (serve, probe) = self
            .spawn_serve("volguard-serve", self.webhook_port, &extra)
            .await;
        self.serve = Some(serve);
        self.serve_port = self.webhook_port;
        self.serve_probe = probe;
        self.register_webhooks().await;
    }

    /// Make `next` (listening on `port`, probes on `probe`) the harness's serve; returns the one
    /// it replaces. Routing is the caller's (`route_webhooks_to`).
    pub fn replace_serve(&mut self, next: Proc, port: u16, probe: u16) -> Option<Proc> {
        self.serve_port = port;
        self.serve_probe = probe;
        self.serve.replace(next)
    }

    /// One `volguard serve` replica on `port` with the webhook identity and this cluster's serving
    /// certificate, once it is ready: its process and its probe port. Registers nothing.
    pub async fn spawn_serve(&mut self, name: &str, port: u16, extra: &[&str]) -> (Proc, u16) {
        let d = self.dir.path().to_path_buf();
        if self.webhook_ca.is_empty() && self.secret_sync.is_none() {
            let pki = volguard::devcerts::generate(&["127.0.0.1".into(), "localhost".into()])
                .expect("pki");
            volguard::devcerts::write(&d.join("webhook-certs"), &pki).expect("write");
            self.webhook_ca = pki.ca_pem;
        }
        let kc = self.sa_kubeconfig_file("volguard-webhook");
        let serve = Proc::spawn(
            name,
            Command::new(env!("CARGO_BIN_EXE_volguard"))
                .args(["--log-format", "json", "serve"])
                .arg(format!("--listen=127.0.0.1:{port}"))
                // Port 0, read back from its log: a port picked free here and passed on can be
                // taken by an outgoing connection before serve binds it (seen in CI with two
                // clusters side by side: "Address already in use" on a restart).
                .arg("--probe-listen=127.0.0.1:0")
                .arg(format!(
                    "--tls-cert={}",
                    d.join("webhook-certs/tls.crt").display()
                ))
                .arg(format!(
                    "--tls-key={}",
                    d.join("webhook-certs/tls.key").display()
                ))
                .arg(format!("--kubeconfig={}", kc.display()))
                .args(extra)
                // Scenarios read every decision from the log; `make bench-scale` runs serve at
                // its production level (VOLGUARD_SERVE_LOG=info).
                .env(
                    "RUST_LOG",
                    std::env::var("VOLGUARD_SERVE_LOG")
                        .unwrap_or_else(|_| "volguard=debug,info".into()),
                ),
            &d,
        );
        let probe = match serve.logged_port("probes", Duration::from_secs(30)).await {
            Ok(p) => p,
            Err(e) => panic!("volguard serve did not start: {e}\n{}", serve.tail()),
        };
        if let Err(e) = wait_http_ok(
            &format!("http://127.0.0.1:{probe}/readyz"),
            Duration::from_secs(30),
        )
        .await
        {
            panic!("volguard serve not ready: {e}\n{}", serve.tail());
        }
        (serve, probe)
    }

    /// The no-op webhook of `make bench` (the floor example, `VOLGUARD_BENCH_FLOOR`): it answers
    /// every review "allowed", with volguard's serving certificate, on its own port.
    pub fn spawn_floor(&self) -> (Proc, u16) {
        self.floor_process("floor (no-op webhook)", &[])
    }

    /// The writing floor: on each bind one resourceVersion-checked write onto the claim.
    pub fn spawn_writing_floor(&self) -> (Proc, u16) {
        let kc = self.kubeconfig_file("floor-writer", "floor-writer", &["system:masters"]);
        let args = ["--write-claims".to_string(), kc.display().to_string()];
        self.floor_process("floor (writing no-op webhook)", &args)
    }

    fn floor_process(&self, what: &str, extra: &[String]) -> (Proc, u16) {
        let floor_bin = std::env::var("VOLGUARD_BENCH_FLOOR")
            .expect("VOLGUARD_BENCH_FLOOR (the floor example) is set by `make bench`");
        let d = self.dir.path().to_path_buf();
        let port = free_port();
        let p = Proc::spawn(
            what,
            Command::new(floor_bin)
                .arg("--listen")
                .arg(format!("0.0.0.0:{port}"))
                .arg("--tls-cert")
                .arg(d.join("webhook-certs/tls.crt"))
                .arg("--tls-key")
                .arg(d.join("webhook-certs/tls.key"))
                .args(extra),
            &d,
        );
        (p, port)
    }

    /// Point every webhook at `port` (the URL the apiserver dials) and wait until it does.
    pub async fn route_webhooks_to(&mut self, port: u16) {
        self.webhook_port = port;
        self.register_webhooks().await;
    }

    /// `make bench`'s interleaved binds: volguard's registrations once per `(mode, port)`, each
    /// limited to the namespaces labelled `BENCH_MODE=<mode>`, so that calls of every mode can
    /// alternate one by one instead of round by round. The main registration is removed first (it
    /// would see those namespaces too); `route_webhooks_to` puts it back.
    pub async fn register_webhooks_by_namespace(&mut self, sets: &[(&str, u16)]) {
        self.unregister_webhooks().await;
        let (text, ca) = self.webhooks_manifest();
        let client = self.admin().await;
        let host = if self.secret_sync.is_some() {
            "localhost"
        } else {
            "127.0.0.1"
        };
        for (mode, port) in sets {
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let mut v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
                let which = match v["kind"].as_str() {
                    Some("MutatingWebhookConfiguration") => "mutating",
                    Some("ValidatingWebhookConfiguration") => "validating",
                    _ => continue,
                };
                v["metadata"] =
                    serde_json::json!({"name": format!("volguard-bench-{mode}-{which}")});
                for h in v["webhooks"].as_array_mut().into_iter().flatten() {
                    let path = h["clientConfig"]["service"]["path"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    h["clientConfig"] = serde_json::json!({
                        "url": format!("https://{host}:{port}{path}"), "caBundle": ca});
                    let only =
                        serde_json::json!({"key": BENCH_MODE, "operator": "In", "values": [mode]});
                    let sel = &mut h["namespaceSelector"];
                    if !sel.is_object() {
                        *sel = serde_json::json!({});
                    }
                    match sel["matchExpressions"].as_array_mut() {
                        Some(list) => list.push(only),
                        None => sel["matchExpressions"] = serde_json::json!([only]),
                    }
                }
                if which == "mutating" {
                    let w: MutatingWebhookConfiguration = serde_json::from_value(v).expect("mwc");
                    replace_or_create(Api::all(client.clone()), w).await;
                } else {
                    let w: ValidatingWebhookConfiguration = serde_json::from_value(v).expect("vwc");
                    replace_or_create(Api::all(client.clone()), w).await;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    /// Remove what `register_webhooks_by_namespace` registered for `modes`.
    pub async fn unregister_webhooks_by_namespace(&mut self, modes: &[&str]) {
        let client = self.admin().await;
        for mode in modes {
            let _ = Api::<MutatingWebhookConfiguration>::all(client.clone())
                .delete(
                    &format!("volguard-bench-{mode}-mutating"),
                    &Default::default(),
                )
                .await;
            let _ = Api::<ValidatingWebhookConfiguration>::all(client.clone())
                .delete(
                    &format!("volguard-bench-{mode}-validating"),
                    &Default::default(),
                )
                .await;
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    /// Remove volguard's webhook registrations and wait until the apiserver stops calling.
    pub async fn unregister_webhooks(&mut self) {
        let client = self.admin().await;
        let _ = Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete("volguard-mutating", &Default::default())
            .await;
        let _ = Api::<ValidatingWebhookConfiguration>::all(client)
            .delete("volguard-validating", &Default::default())
            .await;
        self.registered = false;
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    pub fn stop_webhook(&mut self) {
        if let Some(mut p) = self.serve.take() {
            p.kill();
        }
    }

    /// volguard's registrations as shipped, and the CA bundle the apiserver must trust. The base
    /// ships the policies too and registers the entries they cover `Ignore`; the harness installs
    /// the policies only in the scenarios about them, so `register_webhooks` puts back each
    /// entry's failure policy without them.
    fn webhooks_manifest(&self) -> (String, String) {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/manifests/base/webhooks.yaml"
        ))
        .expect("manifest");
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.webhook_ca);
        (text, ca)
    }

    async fn register_webhooks(&mut self) {
        let (text, ca) = self.webhooks_manifest();
        let client = self.admin().await;
        // With cert-manager, the issued certificate names `localhost` and cainjector fills in the
        // caBundle; otherwise the dev CA is written here.
        let by_cert_manager = self.secret_sync.is_some();
        // Re-registered after a restart: keep the bundle cainjector wrote (same CA) so that no
        // call meets an empty one.
        let keep_bundle = std::mem::replace(&mut self.registered, true);
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let mut v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
            if keep_bundle && self.cainjector_dropped_match_conditions {
                // Out of cainjector's reach: it would erase the conditions again on every sync.
                if let Some(a) = v["metadata"]["annotations"].as_object_mut() {
                    a.remove("cert-manager.io/inject-ca-from");
                }
            }
            // Same rewrite for both kinds: service reference -> loopback URL.
            for h in v["webhooks"].as_array_mut().into_iter().flatten() {
                if let Some(e) =
                    volguard::registration::webhooks::entries().find(|e| h["name"] == e.name)
                {
                    h["failurePolicy"] = e
                        .failure_policy(&volguard::registration::webhooks::FailureMode::default())
                        .into();
                }
                let cc = &mut h["clientConfig"];
                let path = cc["service"]["path"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let host = if by_cert_manager {
                    "localhost"
                } else {
                    "127.0.0.1"
                };
                *cc = serde_json::json!({"url": format!("https://{host}:{}{path}", self.webhook_port)});
                if !by_cert_manager || keep_bundle {
                    cc["caBundle"] = ca.clone().into();
                }
            }
            match v["kind"].as_str() {
                Some("MutatingWebhookConfiguration") => {
                    let w: MutatingWebhookConfiguration = serde_json::from_value(v).expect("mwc");
                    replace_or_create(Api::all(client.clone()), w).await;
                }
                Some("ValidatingWebhookConfiguration") => {
                    let w: ValidatingWebhookConfiguration = serde_json::from_value(v).expect("vwc");
                    replace_or_create(Api::all(client.clone()), w).await;
                }
                _ => {}
            }
        }
        if by_cert_manager && !keep_bundle {
            self.wait_ca_injected().await;
            let kept = self.match_conditions().await;
            if kept == 0 {
                // cainjector v1.11 rewrites the whole configuration with client-go 0.26 types,
                // which predate `matchConditions`: injecting the CA erases them, on every sync
                // (docs/reference.md: "cert-manager"). Re-applied with the injected bundle and without the
                // injection annotation, as an operator stuck on 1.11 must.
                println!(
                    "cert-manager cainjector dropped every matchConditions entry while injecting the CA; re-applied with its bundle, without the injection annotation"
                );
                self.cainjector_dropped_match_conditions = true;
                return Box::pin(self.register_webhooks()).await;
            }
        }
        // The apiserver picks up webhook configurations through an informer: wait until it calls us.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    /// cert-manager's controller and cainjector (v1.11.5, built from its Go module), with the
    /// project's own certificate chain (manifests/base/certificates.yaml) applied for real. The
    /// serving Certificate also names `localhost`, the host the apiserver dials here. Their
    /// identity is a cluster admin: their Helm chart's RBAC is not part of this project.
    pub async fn start_cert_manager(&mut self) {
        self.start_cert_manager_processes();
        let d = self.dir.path().to_path_buf();
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/manifests/base/certificates.yaml"
        ))
        .expect("certificates.yaml");
        let mut docs = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let mut v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
            if v["kind"] == "Certificate" && v["metadata"]["name"] == "volguard-webhook" {
                v["spec"]["dnsNames"]
                    .as_array_mut()
                    .expect("dnsNames")
                    .push("localhost".into());
            }
            docs.push(serde_yaml::to_string(&v).expect("yaml"));
        }
        let file = d.join("certificates.yaml");
        std::fs::write(&file, docs.join("---\n")).expect("write");
        apply_file(&self.admin().await, &file, false).await;
        let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
            self.admin().await,
            "volguard-system",
        );
        let issued = self
            .eventually(
                "cert-manager issues volguard-webhook-tls",
                Duration::from_secs(90),
                || {
                    let secrets = secrets.clone();
                    async move {
                        let data = secrets.get("volguard-webhook-tls").await.ok()?.data?;
                        let ca = data.get("ca.crt")?.0.clone();
                        data.contains_key("tls.crt").then_some(ca)
                    }
                },
            )
            .await;
        self.webhook_ca = String::from_utf8(issued).expect("ca pem");
        let out = d.join("webhook-certs");
        std::fs::create_dir_all(&out).expect("dir");
        sync_secret_once(&secrets, &out).await;
        self.secret_sync = Some(tokio::spawn(async move {
            loop {
                sync_secret_once(&secrets, &out).await;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }));
    }

    /// cert-manager's controller and cainjector alone (an install brings its own certificates).
    pub fn start_cert_manager_processes(&mut self) {
        let d = self.dir.path().to_path_buf();
        let bin = made("VOLGUARD_CERT_MANAGER_DIR");
        let kc = self.kubeconfig_file("cert-manager", "cert-manager", &["system:masters"]);
        let controller = Proc::spawn(
            "cert-manager-controller",
            Command::new(bin.join("controller"))
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg("--leader-elect=false")
                .arg("--cluster-resource-namespace=volguard-system")
                .arg(format!(
                    "--metrics-listen-address=127.0.0.1:{}",
                    free_port()
                ))
                .arg("--v=2"),
            &d,
        );
        let cainjector = Proc::spawn(
            "cert-manager-cainjector",
            Command::new(bin.join("cainjector"))
                .env("KUBECONFIG", &kc)
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg("--leader-elect=false")
                .arg("--v=2"),
            &d,
        );
        self.cert_manager = vec![controller, cainjector];
    }

    /// How many matchConditions the registered webhook configurations hold now.
    pub async fn match_conditions(&self) -> usize {
        let client = self.admin().await;
        let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
            .get("volguard-mutating")
            .await
            .expect("mutating config");
        let v = Api::<ValidatingWebhookConfiguration>::all(client)
            .get("volguard-validating")
            .await
            .expect("validating config");
        let mutating: usize = m
            .webhooks
            .unwrap_or_default()
            .iter()
            .map(|w| w.match_conditions.as_ref().map_or(0, Vec::len))
            .sum();
        let validating: usize = v
            .webhooks
            .unwrap_or_default()
            .iter()
            .map(|w| w.match_conditions.as_ref().map_or(0, Vec::len))
            .sum();
        mutating + validating
    }

    /// Wait until cainjector has written the issuing CA into every webhook of both configurations.
    async fn wait_ca_injected(&self) {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.webhook_ca);
        let client = self.admin().await;
        self.eventually(
            "cainjector writes the caBundle of every webhook",
            Duration::from_secs(60),
            || {
                let client = client.clone();
                let ca = ca.clone();
                async move {
                    let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
                        .get("volguard-mutating")
                        .await
                        .ok()?;
                    let v = Api::<ValidatingWebhookConfiguration>::all(client)
                        .get("volguard-validating")
                        .await
                        .ok()?;
                    let bundles: Vec<String> = m
                        .webhooks
                        .unwrap_or_default()
                        .into_iter()
                        .map(|w| w.client_config.ca_bundle)
                        .chain(
                            v.webhooks
                                .unwrap_or_default()
                                .into_iter()
                                .map(|w| w.client_config.ca_bundle),
                        )
                        .map(|b| {
                            b.map(|b| base64::engine::general_purpose::STANDARD.encode(b.0))
                                .unwrap_or_default()
                        })
                        .collect();
                    (!bundles.is_empty() && bundles.iter().all(|b| *b == ca)).then_some(())
                }
            },
        )
        .await;
    }

    /// Start a `volguard controller` (leader election on) and return its index.
    /// Before a scenario: the webhook serves and one controller runs (an earlier scenario may
    /// have stopped them, as a crash would; the kubelet would restart them).
    pub async fn ensure_running(&mut self) {
        let alive = self
            .serve
            .as_mut()
            .is_some_and(|p| matches!(p.child.try_wait(), Ok(None)));
        if !alive {
            // Gone, or died: a new one on a new port (the old port may linger in TIME_WAIT).
            self.stop_webhook();
            self.webhook_port = free_port();
            self.start_webhook().await;
        } else if self.webhook_port != self.serve_port || !self.registered {
            // A scenario that stopped half-way may have left the webhooks routed to its own
            // forwarder or replica (gone with it), or unregistered: every later scenario would
            // then meet a dead endpoint, and the Ignore rules would let everything through.
            println!(
                "(webhooks routed to port {}: back to the harness's serve on {})",
                self.webhook_port, self.serve_port
            );
            self.route_webhooks_to(self.serve_port).await;
        }
        let mut live = Vec::new();
        for (mut p, probe) in std::mem::take(&mut self.controllers)
            .into_iter()
            .zip(std::mem::take(&mut self.controller_probes))
        {
            if matches!(p.child.try_wait(), Ok(None)) {
                live.push((p, probe));
            }
        }
        (self.controllers, self.controller_probes) = live.into_iter().unzip();
        if self.controllers.is_empty() {
            println!("(no controller runs: starting replica-a again)");
            self.start_controller("replica-a").await;
        }
    }

    /// volguard's reference fence agent (`volguard fence agent`, the HTTPS fence-agent contract)
    /// on `port`, serving with the webhook's certificate and running `fence.sh` / `unfence.sh`
    /// from `agent_dir` (its ledger there too).
    pub fn spawn_fence_agent(&self, agent_dir: &Path, port: u16) -> Proc {
        let d = self.dir.path();
        Proc::spawn(
            "fence-agent",
            Command::new(env!("CARGO_BIN_EXE_volguard"))
                .args(["--log-format", "json", "fence", "agent"])
                .arg(format!("--listen=127.0.0.1:{port}"))
                .arg(format!(
                    "--tls-cert={}",
                    d.join("webhook-certs/tls.crt").display()
                ))
                .arg(format!(
                    "--tls-key={}",
                    d.join("webhook-certs/tls.key").display()
                ))
                .arg(format!(
                    "--fence-command=sh {}",
                    agent_dir.join("fence.sh").display()
                ))
                .arg(format!(
                    "--unfence-command=sh {}",
                    agent_dir.join("unfence.sh").display()
                ))
                .arg(format!(
                    "--state={}",
                    agent_dir.join("ledger.json").display()
                )),
            d,
        )
    }

    pub async fn start_controller(&mut self, identity: &str) -> usize {
        let d = self.dir.path().to_path_buf();
        let kc = self.sa_kubeconfig_file("volguard-controller");
        let probe = free_port();
        // Leader failover within seconds for the scenarios, and claims marked unused 2 s after
        // they are seen so (the default waits 2 minutes), unless `controller_extra` sets its own.
        let quick_leases = [
            "--lease-duration=6s",
            "--lease-renew=1s",
            "--lease-renew-deadline=4s",
            "--unused-grace=2s",
        ];
        let overridden = |d: &&str| {
            let flag = d.split('=').next();
            self.controller_extra
                .iter()
                .any(|e| e.split('=').next() == flag)
        };
        let p = Proc::spawn(
            &format!("volguard-controller-{identity}"),
            Command::new(env!("CARGO_BIN_EXE_volguard"))
                .args(["--log-format", "json", "controller"])
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg(format!("--probe-listen=127.0.0.1:{probe}"))
                .args(["--leader-elect", "--lease-namespace=volguard-system"])
                .args(quick_leases.iter().filter(|d| !overridden(d)))
                .arg(format!("--identity={identity}"))
                .args(["--backoff-base=100ms", "--backoff-max=2s"])
                .args(&self.controller_extra),
            &d,
        );
        self.controllers.push(p);
        self.controller_probes.push(probe);
        wait_http_ok(
            &format!("http://127.0.0.1:{probe}/readyz"),
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| panic!("controller not ready: {e}"));
        self.controllers.len() - 1
    }

    /// Install the project's manifests: the namespace, RBAC and cert-manager CRDs for real, then
    /// every resource of manifests/base/kustomization.yaml with a server-side dry run.
    pub async fn install_manifests(&self) -> Vec<String> {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base");
        let mut applied = Vec::new();
        for f in [
            "namespace.yaml",
            "nodefence-crd.yaml",
            "auditreport-crd.yaml",
            "rbac.yaml",
        ] {
            applied.extend(apply_file(&self.admin().await, &base.join(f), false).await);
        }
        applied.extend(self.install_cert_manager_crds().await);
        let kustomization: serde_json::Value = serde_yaml::from_str(
            &std::fs::read_to_string(base.join("kustomization.yaml")).expect("kustomization"),
        )
        .expect("yaml");
        for r in kustomization["resources"].as_array().expect("resources") {
            let f = base.join(r.as_str().expect("resource path"));
            applied.extend(apply_file(&self.admin().await, &f, true).await);
        }
        applied
    }

    /// cert-manager's CRDs (from its module, built by `make e2e`).
    pub async fn install_cert_manager_crds(&self) -> Vec<String> {
        let mut applied = Vec::new();
        let crds = std::env::var("VOLGUARD_CERT_MANAGER_CRDS").unwrap_or_else(|_| {
            panic!("VOLGUARD_CERT_MANAGER_CRDS is not set: run the e2e tests with `make e2e`")
        });
        let mut crd_files: Vec<_> = std::fs::read_dir(&crds)
            .expect("crd dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        crd_files.sort();
        assert!(!crd_files.is_empty(), "no cert-manager CRDs in {crds}");
        for f in &crd_files {
            applied.extend(apply_file(&self.admin().await, f, false).await);
        }
        applied
    }

    pub fn logs(&self) -> String {
        let mut out = String::new();
        for p in [
            &self.etcd,
            &self.apiserver,
            &self.kcm,
            &self.scheduler,
            &self.serve,
        ]
        .into_iter()
        .flatten()
        .chain(self.kwoks.iter().map(|(_, p)| p))
        .chain(self.cert_manager.iter())
        .chain(self.controllers.iter())
        {
            out.push_str(&format!("==== {} ====\n{}\n", p.name, p.tail()));
        }
        out
    }
}

/// A Node as kwok's node-initialize stage expects it: 8 CPUs, 32 Gi, 110 pods, its address.
fn kwok_node_object(
    name: &str,
    ip: &str,
    labels: &[(&str, &str)],
) -> k8s_openapi::api::core::v1::Node {
    let mut l = serde_json::json!({"kubernetes.io/hostname": name, "type": "kwok"});
    for (k, v) in labels {
        l[*k] = serde_json::json!(v);
    }
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": l},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                   // Both kinds, or kwok's node-initialize stage replaces the list.
                   "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]}
    }))
    .expect("node")
}

/// What kwok needs beyond a kubelet's rights, and nothing that writes: its start-up probe lists
/// nodes without a field selector (the Node authorizer lets a kubelet list only its own Node),
/// and it watches its node's Lease through an informer where a kubelet only gets it. Every write
/// (node status, lease renewals, pod status, final pod deletes) stays within the kubelet's own.
async fn kwok_startup_grant(admin: &kube::Client) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let role: ClusterRole = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "e2e:kwok-startup"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
                  {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["list", "watch"]}]
    }))
    .expect("role");
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "e2e:kwok-startup"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "e2e:kwok-startup"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]
    }))
    .expect("binding");
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("kwok role");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("kwok binding");
}

/// Write the Secret's `tls.crt` / `tls.key` into `dir` when they changed, each file replaced
/// atomically (as the kubelet's secret volume swaps its data directory).
pub async fn sync_secret_once(secrets: &Api<k8s_openapi::api::core::v1::Secret>, dir: &Path) {
    let Ok(secret) = secrets.get("volguard-webhook-tls").await else {
        return;
    };
    let data = secret.data.unwrap_or_default();
    let (Some(crt), Some(key)) = (data.get("tls.crt"), data.get("tls.key")) else {
        return;
    };
    if std::fs::read(dir.join("tls.crt")).ok().as_deref() == Some(crt.0.as_slice()) {
        return;
    }
    for (name, bytes) in [("tls.key", &key.0), ("tls.crt", &crt.0)] {
        let tmp = dir.join(format!(".{name}.tmp"));
        let written =
            std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, dir.join(name)));
        match written {
            Ok(()) => {}
            // Teardown removed the cluster's temp dir under a sync in flight: nothing to keep.
            Err(_) if !dir.is_dir() => return,
            Err(e) => panic!("writing {name} into {}: {e}", dir.display()),
        }
    }
}

async fn replace_or_create<K>(api: Api<K>, obj: K)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    if let Ok(Some(mut existing)) = api.get_opt(&name).await {
        let mut o = obj;
        o.meta_mut().resource_version = existing.meta_mut().resource_version.take();
        api.replace(&name, &PostParams::default(), &o)
            .await
            .expect("replace webhook config");
    } else {
        api.create(&PostParams::default(), &obj)
            .await
            .expect("create webhook config");
    }
}

/// Poll a plain-HTTP URL until it answers 200.
pub async fn wait_http_ok(url: &str, within: Duration) -> Result<(), String> {
    let deadline = Instant::now() + within;
    let mut last = String::new();
    while Instant::now() < deadline {
        match reqwest::get(url).await {
            Ok(r) if r.status() == 200 => return Ok(()),
            Ok(r) => last = format!("status {}", r.status()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(last)
}

/// Poll `f` until it returns Some, or fail with `what`.
pub async fn eventually<T, F, Fut>(what: &str, within: Duration, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    poll_until(what, within, f, String::new).await
}

/// Poll `f` every 200 ms until it returns Some; after `within`, fail with `what` and `context()`.
pub async fn poll_until<T, F, Fut>(
    what: &str,
    within: Duration,
    mut f: F,
    context: impl Fn() -> String,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(t) = f().await {
            return t;
        }
        if Instant::now() > deadline {
            panic!("timed out waiting for: {what}\n{}", context());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl ControlPlane {
    /// As `eventually`, failing with every component's log.
    pub async fn eventually<T, F, Fut>(&self, what: &str, within: Duration, f: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        poll_until(what, within, f, || self.logs()).await
    }
}

/// Lines of a process log, shared for assertions on what volguard saw.
pub fn read_log(p: &Proc) -> String {
    std::fs::read_to_string(&p.log).unwrap_or_default()
}

pub type Shared<T> = Arc<Mutex<T>>;

/// Server-side apply every document of `path` (dry run or for real); returns "Kind/name" of each.
pub async fn apply_file(client: &kube::Client, path: &Path, dry_run: bool) -> Vec<String> {
    use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
    use kube::discovery::Scope;
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
        if v.is_null() {
            continue;
        }
        let obj: DynamicObject = serde_json::from_value(v).expect("object");
        let types = obj.types.clone().expect("apiVersion/kind");
        let gvk = GroupVersionKind::try_from(&types).expect("gvk");
        let name = obj.metadata.name.clone().expect("name");
        // CRDs applied just before may take a moment to be served.
        let deadline = Instant::now() + Duration::from_secs(30);
        let (ar, caps) = loop {
            // A group whose CRD was just created can 404 for a moment; retry until it is served.
            if let Ok(found) = kube::discovery::pinned_kind(client, &gvk).await {
                break found;
            }
            assert!(
                Instant::now() < deadline,
                "{}: kind {gvk:?} is not served",
                path.display()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => Api::namespaced_with(
                client.clone(),
                obj.metadata.namespace.as_deref().unwrap_or("default"),
                &ar,
            ),
            Scope::Cluster => Api::all_with(client.clone(), &ar),
        };
        let mut pp = PatchParams::apply("volguard-e2e").force();
        if dry_run {
            pp = pp.dry_run();
        }
        api.patch(&name, &pp, &Patch::Apply(&obj))
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "{} {}/{name} rejected by the apiserver: {e}",
                    path.display(),
                    types.kind
                )
            });
        out.push(format!("{}/{name}", types.kind));
    }
    out
}
