//! Serving certificate with hot reload.
//!
//! The kubelet updates a mounted Secret by swapping the `..data` symlink, so the files' inodes and
//! paths never change in a way a file watch reliably sees (Kubewarden policy-server#1026). Instead
//! the files' bytes are re-read on a short interval; when they differ and form a valid pair, new
//! handshakes get the new certificate. A broken pair keeps the old one and says why. The client CA
//! bundle (`--client-ca`) is re-read the same way: a rotated apiserver client CA is trusted by new
//! handshakes without a restart (a restart would drop every connection and, with `Fail` rules,
//! refuse requests while it lasts).

use super::metrics::ResultLabels;
use crate::error::TlsError;
use crate::runtime::MetricsRegistry;
use arc_swap::ArcSwap;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Parse a PEM chain (leaf first, intermediates after) and its key; check they belong together.
pub fn load_pair(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert_path: &Path,
    key_path: &Path,
) -> Result<CertifiedKey, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .filter_map(Result::ok)
        .collect();
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert_path.display().to_string(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::NoKey {
        path: key_path.display().to_string(),
        detail: e.to_string(),
    })?;
    let signing = provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| TlsError::NoKey {
            path: key_path.display().to_string(),
            detail: e.to_string(),
        })?;
    let ck = CertifiedKey::new(chain, signing);
    ck.keys_match().map_err(|e| TlsError::Pair(e.to_string()))?;
    Ok(ck)
}

/// A verifier that accepts only client certificates signed by the CAs in `pem` (read from `path`).
pub fn client_verifier(
    pem: &[u8],
    path: &Path,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem).filter_map(Result::ok) {
        roots
            .add(cert)
            .map_err(|e| TlsError::ClientCa(format!("{}: {e}", path.display())))?;
    }
    if roots.is_empty() {
        return Err(TlsError::ClientCa(format!(
            "{}: no PEM certificate in it",
            path.display()
        )));
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| TlsError::ClientCa(format!("{}: {e}", path.display())))
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// The serving certificate's metrics, for any of volguard's TLS servers (the webhook, the fence
/// agent): nothing of admission.
#[derive(Debug, Default)]
pub struct TlsMetrics {
    pub reloads: Family<ResultLabels, Counter>,
    pub not_after: Gauge,
}

impl TlsMetrics {
    /// `volguard_tls_reloads_total` (both results present from the start: an alert's
    /// `increase()` sees the first failure) and `volguard_tls_certificate_not_after_seconds`.
    pub fn register(r: &MetricsRegistry) -> TlsMetrics {
        let m = TlsMetrics {
            reloads: r.add(
                "volguard_tls_reloads",
                "Serving certificate reloads by result",
                Family::default(),
            ),
            not_after: r.add(
                "volguard_tls_certificate_not_after_seconds",
                "Expiry (unix time) of the serving certificate in use",
                Gauge::default(),
            ),
        };
        for result in ["success", "failure"] {
            let _ = m.reloads.get_or_create(&ResultLabels { result });
        }
        m
    }
}

/// `volguard_tls_certificate_not_after_seconds` from the leaf certificate being served, so an
/// alert fires before it expires (a stuck cert-manager renewal).
fn set_not_after(metrics: &TlsMetrics, ck: &CertifiedKey) {
    let Some(leaf) = ck.cert.first() else { return };
    match x509_parser::parse_x509_certificate(leaf.as_ref()) {
        Ok((_, cert)) => {
            metrics.not_after.set(cert.validity().not_after.timestamp());
        }
        Err(e) => tracing::warn!(error = %e, "cannot read the serving certificate's expiry"),
    }
}

/// Hands the current certificate to every new handshake.
#[derive(Debug)]
pub struct CertResolver {
    current: ArcSwap<CertifiedKey>,
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// What each new connection's handshake uses; swapped whole when the client CA changes (the
/// verifier and the hints it sends are part of the configuration).
pub type TlsConfig = Arc<ArcSwap<ServerConfig>>;

/// The client CA bundle in use, and the configuration built on it.
struct ClientCa {
    path: PathBuf,
    seen: std::sync::Mutex<Vec<u8>>,
    config: TlsConfig,
}

pub struct CertReloader {
    cert_path: PathBuf,
    key_path: PathBuf,
    resolver: Arc<CertResolver>,
    seen: std::sync::Mutex<(Vec<u8>, Vec<u8>)>,
    client_ca: std::sync::OnceLock<ClientCa>,
    metrics: Arc<TlsMetrics>,
}

impl CertReloader {
    /// Load the initial pair; failing here is fatal (nothing to serve with).
    pub fn new(
        cert_path: PathBuf,
        key_path: PathBuf,
        metrics: Arc<TlsMetrics>,
    ) -> Result<Arc<Self>, TlsError> {
        let (c, k) = (read(&cert_path)?, read(&key_path)?);
        let ck = load_pair(&c, &k, &cert_path, &key_path)?;
        set_not_after(&metrics, &ck);
        Ok(Arc::new(CertReloader {
            resolver: Arc::new(CertResolver {
                current: ArcSwap::from_pointee(ck),
            }),
            cert_path,
            key_path,
            seen: std::sync::Mutex::new((c, k)),
            client_ca: std::sync::OnceLock::new(),
            metrics,
        }))
    }

    /// TLS 1.2+ with ALPN `h2` and `http/1.1`, certificate from this reloader, any client.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, TlsError> {
        self.build_config(None)
    }

    /// As `server_config`; with `client_ca`, only clients presenting a certificate that CA signed
    /// complete the handshake (rules.md §8 "who may call"), and the bundle is re-read with the
    /// serving pair: a changed, valid bundle applies to new handshakes.
    pub fn serving_config(&self, client_ca: Option<&Path>) -> Result<TlsConfig, TlsError> {
        let Some(path) = client_ca else {
            return Ok(Arc::new(ArcSwap::new(self.build_config(None)?)));
        };
        let pem = read(path)?;
        let config = Arc::new(ArcSwap::new(
            self.build_config(Some(client_verifier(&pem, path)?))?,
        ));
        let ca = ClientCa {
            path: path.to_path_buf(),
            seen: std::sync::Mutex::new(pem),
            config: config.clone(),
        };
        self.client_ca
            .set(ca)
            .map_err(|_| TlsError::ClientCa("a client CA is already configured".into()))?;
        Ok(config)
    }

    fn build_config(
        &self,
        verifier: Option<Arc<dyn rustls::server::danger::ClientCertVerifier>>,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| TlsError::Pair(e.to_string()))?;
        let builder = match verifier {
            None => builder.with_no_client_auth(),
            Some(v) => builder.with_client_cert_verifier(v),
        };
        let mut cfg = builder.with_cert_resolver(self.resolver.clone());
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }

    /// Re-read the client CA bundle; swap in a changed, valid one. A bundle that does not parse
    /// keeps the one in use (refusing every caller would be worse than trusting the old CA a
    /// little longer), counted as a failed reload.
    fn reload_client_ca(&self) -> bool {
        let Some(ca) = self.client_ca.get() else {
            return false;
        };
        let pem = match read(&ca.path) {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(error = %e, "client CA unreadable; keeping the current one");
                return false;
            }
        };
        let mut seen = ca.seen.lock().unwrap_or_else(|e| e.into_inner());
        if *seen == pem {
            return false;
        }
        let result = client_verifier(&pem, &ca.path).and_then(|v| self.build_config(Some(v)));
        *seen = pem;
        match result {
            Ok(cfg) => {
                ca.config.store(cfg);
                self.count_reload("success");
                tracing::info!(client_ca = %ca.path.display(), "client CA reloaded");
                true
            }
            Err(e) => {
                self.count_reload("failure");
                tracing::error!(error = %e, "new client CA rejected; keeping the current one");
                false
            }
        }
    }

    fn count_reload(&self, result: &'static str) {
        self.metrics
            .reloads
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// Re-read the files once; swap in a changed, valid pair and client CA. True when either
    /// was swapped.
    pub fn reload_once(&self) -> bool {
        let ca = self.reload_client_ca();
        self.reload_pair() || ca
    }

    fn reload_pair(&self) -> bool {
        let (c, k) = match (read(&self.cert_path), read(&self.key_path)) {
            (Ok(c), Ok(k)) => (c, k),
            (Err(e), _) | (_, Err(e)) => {
                // Transient during a non-atomic rewrite; the old pair stays in use.
                tracing::debug!(error = %e, "certificate files unreadable; keeping the current pair");
                return false;
            }
        };
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.0 == c && seen.1 == k {
            return false;
        }
        let result = load_pair(&c, &k, &self.cert_path, &self.key_path);
        *seen = (c, k);
        match result {
            Ok(ck) => {
                set_not_after(&self.metrics, &ck);
                self.resolver.current.store(Arc::new(ck));
                self.count_reload("success");
                tracing::info!(cert = %self.cert_path.display(), "serving certificate reloaded");
                true
            }
            Err(e) => {
                self.count_reload("failure");
                tracing::error!(error = %e, "new serving certificate rejected; keeping the current one");
                false
            }
        }
    }

    pub async fn run(self: Arc<Self>, every: Duration) {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let me = self.clone();
            // File reads are blocking I/O.
            if let Err(e) = tokio::task::spawn_blocking(move || me.reload_once()).await {
                tracing::error!(error = %e, "certificate reload task failed");
            }
        }
    }
}
