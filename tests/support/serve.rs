//! `volguard serve` alone, with generated certificates (the tests of its HTTP, TLS and fixture
//! behaviour, no control plane): start it, reach it, read what it logged.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub struct Certs {
    pub dir: tempfile::TempDir,
    pub ca_pem: String,
}

impl Certs {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki =
            volguard::devcerts::generate(&["localhost".into(), "127.0.0.1".into()]).expect("pki");
        volguard::devcerts::write(dir.path(), &pki).expect("write certs");
        Certs {
            dir,
            ca_pem: pki.ca_pem,
        }
    }
    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("tls.crt")
    }
    pub fn key(&self) -> PathBuf {
        self.dir.path().join("tls.key")
    }
}

/// A running `volguard serve`; killed on drop.
pub struct Server {
    pub child: Child,
    pub webhook: String,
    pub probes: String,
    pub logs: mpsc::Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Start `volguard serve` on ephemeral ports with the given cert/key and extra args; wait until
    /// it logs its addresses and answers /readyz.
    pub fn start(cert: &Path, key: &Path, extra: &[&str]) -> Server {
        Self::start_bin(env!("CARGO_BIN_EXE_volguard").as_ref(), cert, key, extra)
    }

    /// As `start`, with another build of volguard (`make bench-compare`'s base).
    pub fn start_bin(bin: &Path, cert: &Path, key: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(bin)
            .args([
                "--log-format",
                "json",
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--probe-listen",
                "127.0.0.1:0",
            ])
            .arg("--tls-cert")
            .arg(cert)
            .arg("--tls-key")
            .arg(key)
            .args(extra)
            .env("RUST_LOG", "info")
            .current_dir(repo())
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn volguard");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = match rx.recv_timeout(left) {
                Ok(l) => l,
                Err(_) => {
                    let status = child.try_wait();
                    panic!("volguard did not report its listeners (exit: {status:?})");
                }
            };
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if let (Some(w), Some(p)) = (v["webhook"].as_str(), v["probes"].as_str()) {
                let server = Server {
                    child,
                    webhook: w.to_string(),
                    probes: p.to_string(),
                    logs: rx,
                };
                server.wait_ready();
                return server;
            }
        }
    }

    pub fn url(&self, path: &str) -> String {
        let port = self.webhook.rsplit(':').next().unwrap_or_default();
        format!("https://localhost:{port}{path}")
    }

    pub fn probe_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.probes)
    }

    fn wait_ready(&self) {
        for _ in 0..300 {
            if let Ok(r) = plain_http::blocking_get(&self.probe_url("/readyz"))
                && r == 200
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("volguard never became ready");
    }

    /// Drain the log lines received so far.
    pub fn drain_logs(&self) -> Vec<String> {
        self.logs.try_iter().collect()
    }
}

/// Minimal blocking GET without pulling reqwest's blocking feature: returns the status code.
mod plain_http {
    pub fn blocking_get(url: &str) -> std::io::Result<u16> {
        use std::io::{Read, Write};
        let rest = url.trim_start_matches("http://");
        let (host, path) = rest
            .split_once('/')
            .map(|(h, p)| (h, format!("/{p}")))
            .unwrap_or((rest, "/".into()));
        let mut s = std::net::TcpStream::connect(host)?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(2)))?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )?;
        let mut buf = String::new();
        s.read_to_string(&mut buf)?;
        buf.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other("no status"))
    }
}

pub fn client(ca_pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).expect("ca"))
        .tls_built_in_root_certs(false)
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
}
