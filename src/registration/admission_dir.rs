//! `volguard manifests admission-dir DIR`: the webhook registration and the CEL policies as
//! manifest-based admission configuration (KEP-5793: beta, on by default, in Kubernetes 1.37;
//! alpha behind the gate `ManifestBasedAdmissionControlConfig` in 1.36). The apiserver loads them
//! from files at startup: active before any API object exists, independent of etcd, and no API
//! call can delete or edit them (docs/runbooks.md "Registration from files").
//!
//! What the format demands, and so what differs from the API objects: names end with
//! `.static.k8s.io`; a webhook posts to a `url` (no Service reference) with its `caBundle`; a
//! policy takes no parameters, so the ConfigMap's values are written into its expressions.

use super::policies::{self, Inlined};
use super::webhooks::CONFIGURATIONS;
use base64::Engine;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum AdmissionDirError {
    #[error("writing {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("--webhook-url {0:?} must be an https:// URL (the apiserver dials it directly)")]
    Url(String),
    #[error("--ca-bundle {path}: {message}")]
    Ca { path: PathBuf, message: String },
    #[error("a policy cannot be static: {0}")]
    Policy(String),
    #[error("rendering YAML: {0}")]
    Yaml(#[from] serde_yaml::Error),
}

/// What the files need to know.
pub struct Options {
    /// Where volguard serves, as the apiserver reaches it (`https://HOST:PORT`; paths appended).
    pub webhook_url: String,
    /// The PEM of the CA that signed volguard's serving certificate.
    pub ca_pem: String,
    /// volguard's namespace (its service accounts' names in the conditions and policies).
    pub namespace: String,
    /// The kubeconfig the apiserver presents to webhooks (`kubeConfigFile`), if any.
    pub webhook_kubeconfig: Option<PathBuf>,
    pub params: Inlined,
    /// The webhook's allow-list (its `--force-delete-allow-*`): the force-delete entries' condition.
    /// The policies trust it too (`params` holds it with whoever else they trust).
    pub allow: super::webhooks::AllowList,
}

/// The four plugins' directories, with the kinds each may hold.
const PLUGINS: &[(&str, &str, &str)] = &[
    (
        "ValidatingAdmissionWebhook",
        "WebhookAdmissionConfiguration",
        "validating-webhooks",
    ),
    (
        "MutatingAdmissionWebhook",
        "WebhookAdmissionConfiguration",
        "mutating-webhooks",
    ),
    (
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyConfiguration",
        "validating-policies",
    ),
    (
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyConfiguration",
        "mutating-policies",
    ),
];

/// The documents of each directory: `(directory, objects)`.
pub fn documents(o: &Options) -> Result<Vec<(&'static str, Vec<Value>)>, AdmissionDirError> {
    let base = o.webhook_url.trim_end_matches('/');
    if !base.starts_with("https://") {
        return Err(AdmissionDirError::Url(o.webhook_url.clone()));
    }
    let ca = base64::engine::general_purpose::STANDARD.encode(o.ca_pem.as_bytes());
    let mut validating = Vec::new();
    let mut mutating = Vec::new();
    for (kind, name, entries) in CONFIGURATIONS {
        let hooks: Vec<Value> = entries
            .iter()
            .map(|e| {
                // The policies are always beside these webhooks here: the force-delete entry may
                // be Ignore (rules.md §9).
                e.object(
                    &o.namespace,
                    &super::webhooks::FailureMode::policies(true),
                    &o.allow,
                    json!({"url": format!("{base}{}", e.path()), "caBundle": ca}),
                )
            })
            .collect();
        let config = json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": format!("{name}.static.k8s.io")},
            "webhooks": hooks,
        });
        if kind.starts_with("Mutating") {
            mutating.push(config);
        } else {
            validating.push(config);
        }
    }
    let (mut vap, mut map) = (Vec::new(), Vec::new());
    for doc in
        policies::static_objects(&o.namespace, &o.params).map_err(AdmissionDirError::Policy)?
    {
        if doc["kind"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Mutating")
        {
            map.push(doc);
        } else {
            vap.push(doc);
        }
    }
    Ok(vec![
        ("validating-webhooks", validating),
        ("mutating-webhooks", mutating),
        ("validating-policies", vap),
        ("mutating-policies", map),
    ])
}

fn write_file(path: &Path, text: &str) -> Result<(), AdmissionDirError> {
    std::fs::write(path, text).map_err(|source| AdmissionDirError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Write `dir/admission-configuration.yaml` and one `volguard.yaml` per plugin directory;
/// returns the files written. The configuration names the directories by absolute path, as
/// the apiserver requires.
pub fn write(dir: &Path, o: &Options) -> Result<Vec<PathBuf>, AdmissionDirError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| AdmissionDirError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let dir = std::fs::canonicalize(dir).map_err(io(dir))?;
    let mut written = Vec::new();
    for (sub, docs) in documents(o)? {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d).map_err(io(&d))?;
        let mut text = String::from(
            "# Generated by `volguard manifests admission-dir` from volguard's rule table: do not edit.\n",
        );
        // No separator before the first document: kube-apiserver's loader reads a comment-only
        // first part as an object without a kind.
        for (i, doc) in docs.iter().enumerate() {
            if i > 0 {
                text.push_str("---\n");
            }
            text.push_str(&serde_yaml::to_string(doc)?);
        }
        let f = d.join("volguard.yaml");
        write_file(&f, &text)?;
        written.push(f);
    }
    let plugins: Vec<Value> = PLUGINS
        .iter()
        .map(|(plugin, kind, sub)| {
            let mut c = json!({
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": kind,
                "staticManifestsDir": dir.join(sub).display().to_string(),
            });
            if kind.starts_with("Webhook") {
                c["kubeConfigFile"] = json!(
                    o.webhook_kubeconfig
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_default()
                );
            }
            json!({"name": plugin, "configuration": c})
        })
        .collect();
    let config = json!({
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": plugins,
    });
    let f = dir.join("admission-configuration.yaml");
    write_file(
        &f,
        &format!(
            "# kube-apiserver --admission-control-config-file={}\n{}",
            f.display(),
            serde_yaml::to_string(&config)?
        ),
    )?;
    written.push(f);
    Ok(written)
}

/// `volguard manifests admission-dir`.
pub fn run(a: &crate::registration::args::AdmissionDirArgs) -> anyhow::Result<Vec<PathBuf>> {
    let ca_pem = std::fs::read_to_string(&a.ca_bundle).map_err(|e| AdmissionDirError::Ca {
        path: a.ca_bundle.clone(),
        message: e.to_string(),
    })?;
    if !ca_pem.contains("-----BEGIN CERTIFICATE-----") {
        return Err(AdmissionDirError::Ca {
            path: a.ca_bundle.clone(),
            message: "no PEM certificate in it".into(),
        }
        .into());
    }
    let mut params = Inlined::defaults(&a.namespace);
    // Whom the webhook allows, the policies trust as well (the chart's forceDeleteAllow likewise).
    let allow = a.force_delete_allow.list();
    params.force_delete_users = [&allow.users, &a.force_delete_users]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    params.force_delete_groups = [&allow.groups, &a.force_delete_groups]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    let o = Options {
        webhook_url: a.webhook_url.clone(),
        ca_pem,
        namespace: a.namespace.clone(),
        webhook_kubeconfig: a.webhook_kubeconfig.clone(),
        params,
        allow,
    };
    Ok(write(&a.dir, &o)?)
}

#[cfg(test)]
#[path = "admission_dir_tests.rs"]
mod tests;
