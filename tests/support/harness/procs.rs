//! Processes the harness runs and what they need: free ports, the webhook Forwarder (a
//! Service on one loopback port), `Proc` with its log, and the test PKI.

use super::*;

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
                    // A Service with no endpoints refuses the connection (and goes on serving).
                    (!b.is_empty()).then(|| b[next % b.len()])
                };
                let Some(port) = port else {
                    refused2.fetch_add(1, Ordering::SeqCst);
                    continue;
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
pub(super) fn made(var: &str) -> PathBuf {
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
pub(super) fn write_webhook_client_config(d: &Path) -> PathBuf {
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
