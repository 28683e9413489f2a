//! A real control plane on loopback: etcd + kube-apiserver (+ kube-controller-manager running only
//! the protection controllers), built from Go modules by `make controlplane`, plus volguard serve
//! and controller registered through the project's own webhook manifests. Everything is killed
//! and its temp dir removed on drop, also when a test panics.
#![allow(dead_code)]

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, PostParams};
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
    /// with its own ServiceAccount credentials) and kube-scheduler binding pods through
    /// `pods/binding`. The test plays the kubelet (pod status, final deletes as
    /// `system:node:<node>`); the node-lifecycle controller is off because no kubelet renews
    /// node leases here.
    Cluster,
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

pub fn bin_dir() -> PathBuf {
    let dir = std::env::var("VOLGUARD_CONTROLPLANE_DIR").unwrap_or_else(|_| {
        panic!("VOLGUARD_CONTROLPLANE_DIR is not set: run the e2e tests with `make e2e` (it builds kube-apiserver, etcd and kube-controller-manager)")
    });
    PathBuf::from(dir)
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
    pub fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
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
    pub serve: Option<Proc>,
    pub controllers: Vec<Proc>,
    pub controller_probes: Vec<u16>,
    pub webhook_port: u16,
    /// Probe port (`/metrics`) of the running `volguard serve`.
    pub serve_probe: u16,
    pub webhook_ca: String,
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
            serve: None,
            controllers: Vec::new(),
            controller_probes: Vec::new(),
            webhook_port: free_port(),
            serve_probe: 0,
            webhook_ca: String::new(),
            etcd_url: etcd_url.clone(),
            apiserver_args: Vec::new(),
            pki,
            dir,
        };
        cp.etcd = Some(Proc::spawn(
            "etcd",
            Command::new(bin_dir().join("etcd"))
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
                .args(["--unsafe-no-fsync", "--log-level", "warn"]),
            &d,
        ));
        let port = free_port();
        cp.api_url = format!("https://127.0.0.1:{port}");
        let mut args: Vec<String> = vec![
            format!("--etcd-servers={etcd_url}"),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
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
        args.extend(extra_apiserver_args.iter().map(|a| a.to_string()));
        cp.apiserver_args = args;
        cp.start_apiserver().await;
        match profile {
            Profile::BesideUpstream => cp.start_kcm().await,
            Profile::Cluster => {
                cp.start_kcm_all();
                cp.start_scheduler();
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
            if Instant::now() > deadline {
                panic!(
                    "kube-apiserver not ready:\n{}",
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
    /// (`--use-service-account-credentials`), as a real cluster runs it.
    fn start_kcm_all(&mut self) {
        let d = self.dir.path().to_path_buf();
        self.kcm = Some(self.component(
            "kube-controller-manager",
            "system:kube-controller-manager",
            &[
                "--controllers=*,-node-lifecycle-controller".into(),
                "--use-service-account-credentials=true".into(),
                format!(
                    "--service-account-private-key-file={}",
                    d.join("sa.key").display()
                ),
                format!("--root-ca-file={}", d.join("ca.crt").display()),
            ],
        ));
    }

    /// kube-scheduler as `system:kube-scheduler` (its bootstrap RBAC).
    fn start_scheduler(&mut self) {
        self.scheduler =
            Some(self.component("kube-scheduler", "system:kube-scheduler", &["-v=2".into()]));
    }

    /// A control-plane component (`bin`) with a client certificate for `user`, no leader
    /// election, its own secure port on loopback.
    fn component(&self, bin: &str, user: &str, extra: &[String]) -> Proc {
        let d = self.dir.path().to_path_buf();
        let kc = self.kubeconfig_file(bin, user, &[]);
        Proc::spawn(
            bin,
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
        let p = self.dir.path().join(format!("{sa}.kubeconfig"));
        let text = self.kubeconfig_impersonating(
            "e2e-impersonator",
            &["system:masters"],
            Some(("volguard-system", sa)),
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
        let d = self.dir.path().to_path_buf();
        if self.webhook_ca.is_empty() {
            let pki = volguard::devcerts::generate(&["127.0.0.1".into(), "localhost".into()])
                .expect("pki");
            volguard::devcerts::write(&d.join("webhook-certs"), &pki).expect("write");
            self.webhook_ca = pki.ca_pem;
        }
        let kc = self.sa_kubeconfig_file("volguard-webhook");
        let probe = free_port();
        self.serve_probe = probe;
        self.serve = Some(Proc::spawn(
            "volguard-serve",
            Command::new(env!("CARGO_BIN_EXE_volguard"))
                .args(["--log-format", "json", "serve"])
                .arg(format!("--listen=127.0.0.1:{}", self.webhook_port))
                .arg(format!("--probe-listen=127.0.0.1:{probe}"))
                .arg(format!(
                    "--tls-cert={}",
                    d.join("webhook-certs/tls.crt").display()
                ))
                .arg(format!(
                    "--tls-key={}",
                    d.join("webhook-certs/tls.key").display()
                ))
                .arg(format!("--kubeconfig={}", kc.display()))
                .env("RUST_LOG", "volguard=debug,info"),
            &d,
        ));
        wait_http_ok(
            &format!("http://127.0.0.1:{probe}/readyz"),
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| {
            panic!(
                "volguard serve not ready: {e}\n{}",
                self.serve.as_ref().map(Proc::tail).unwrap_or_default()
            )
        });
        self.register_webhooks().await;
    }

    pub fn stop_webhook(&mut self) {
        if let Some(mut p) = self.serve.take() {
            p.kill();
        }
    }

    async fn register_webhooks(&self) {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/manifests/base/webhooks.yaml"
        ))
        .expect("manifest");
        let client = self.admin().await;
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.webhook_ca);
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let mut v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
            // Same rewrite for both kinds: service reference -> loopback URL with the dev CA.
            for h in v["webhooks"].as_array_mut().into_iter().flatten() {
                let cc = &mut h["clientConfig"];
                let path = cc["service"]["path"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                *cc = serde_json::json!({"url": format!("https://127.0.0.1:{}{path}", self.webhook_port), "caBundle": ca});
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
        // The apiserver picks up webhook configurations through an informer: wait until it calls us.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    /// Start a `volguard controller` (leader election on) and return its index.
    pub async fn start_controller(&mut self, identity: &str) -> usize {
        let d = self.dir.path().to_path_buf();
        let kc = self.sa_kubeconfig_file("volguard-controller");
        let probe = free_port();
        let p = Proc::spawn(
            &format!("volguard-controller-{identity}"),
            Command::new(env!("CARGO_BIN_EXE_volguard"))
                .args(["--log-format", "json", "controller"])
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg(format!("--probe-listen=127.0.0.1:{probe}"))
                .args([
                    "--leader-elect",
                    "--lease-namespace=volguard-system",
                    "--lease-duration-seconds=6",
                    "--lease-renew-seconds=1",
                ])
                .arg(format!("--identity={identity}"))
                .args(["--backoff-base-ms=100", "--backoff-max-seconds=2"]),
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
        for f in ["namespace.yaml", "rbac.yaml"] {
            applied.extend(apply_file(&self.admin().await, &base.join(f), false).await);
        }
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
        .chain(self.controllers.iter())
        {
            out.push_str(&format!("==== {} ====\n{}\n", p.name, p.tail()));
        }
        out
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
async fn poll_until<T, F, Fut>(
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
