//! Typed errors. Request-path errors become precise HTTP or AdmissionReview answers.

use std::path::Path;
use thiserror::Error;

/// An error and its sources, each said once: many errors (kube's among them) already include
/// their source in their own message, so a source already said is left out.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = String::new();
    let mut next = Some(e);
    while let Some(cause) = next {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

/// An error as kubectl prints it, for the one-shot commands a person types (`explain`,
/// `unused`, `fence confirm`): the apiserver's refusal as `Error from server (Reason): message`
/// (no Rust debug dump, no context lines a kubectl user does not expect), anything else as
/// `error: ...` with its causes once.
pub fn for_cli(e: &(dyn std::error::Error + 'static)) -> String {
    let mut next = Some(e);
    while let Some(cause) = next {
        if let Some(kube::Error::Api(status)) = cause.downcast_ref::<kube::Error>() {
            let reason = if status.reason.is_empty() {
                format!("{}", status.code)
            } else {
                status.reason.clone()
            };
            return format!("Error from server ({reason}): {}", status.message);
        }
        if let Some(crate::rules::decision::ReadError::Refused {
            code,
            reason,
            message,
            ..
        }) = cause.downcast_ref::<crate::rules::decision::ReadError>()
        {
            let reason = if reason.is_empty() {
                code.to_string()
            } else {
                reason.clone()
            };
            return format!("Error from server ({reason}): {message}");
        }
        if let Some(nf) = cause.downcast_ref::<NotFound>() {
            return match nf.file {
                None => format!("Error from server (NotFound): {nf}"),
                Some(_) => format!("error: {nf}"),
            };
        }
        next = cause.source();
    }
    format!("error: {}", chain(e))
}

/// An object that is not there, worded as kubectl words it (`persistentvolumeclaims "x" not
/// found`); read from a state file, it says which file and namespace.
#[derive(Debug, Error)]
#[error("{resource} {name:?} not found{}", scope(.namespace, .file))]
pub struct NotFound {
    /// The plural resource: persistentvolumeclaims, persistentvolumes.
    pub resource: &'static str,
    pub name: String,
    pub namespace: Option<String>,
    pub file: Option<String>,
}

fn scope(namespace: &Option<String>, file: &Option<String>) -> String {
    match (namespace, file) {
        (_, None) => String::new(),
        (Some(ns), Some(f)) => format!(" in namespace {ns:?} of {f}"),
        (None, Some(f)) => format!(" in {f}"),
    }
}

#[derive(Debug, Error)]
pub enum StateError {
    #[error("cannot read state file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("state document {document} is not valid JSON/YAML: {message}")]
    Parse { document: usize, message: String },
    #[error("state object {index} has no kind")]
    MissingKind { index: usize },
    #[error("state object {index} ({kind}) does not decode: {message}")]
    Object {
        index: usize,
        kind: String,
        message: String,
    },
    #[error("{path}: {inner}")]
    InFile {
        path: String,
        inner: Box<StateError>,
    },
}

impl StateError {
    pub fn in_file(self, path: &Path) -> Self {
        match self {
            e @ StateError::Read { .. } => e,
            e => StateError::InFile {
                path: path.display().to_string(),
                inner: Box::new(e),
            },
        }
    }
}

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: no PEM certificate found")]
    NoCertificate { path: String },
    #[error("{path}: no usable PEM private key found ({detail})")]
    NoKey { path: String, detail: String },
    #[error("certificate and key do not form a usable pair: {0}")]
    Pair(String),
    #[error("client CA bundle (--client-ca) unusable: {0}")]
    ClientCa(String),
}

/// Why an HTTP admission body was rejected before any rule ran (HTTP 4xx, JSON body).
#[derive(Debug, Error, PartialEq)]
pub enum ReviewError {
    #[error("request body is not valid JSON: {0}")]
    NotJson(String),
    #[error("request body is not an AdmissionReview: {0}")]
    NotAReview(String),
    #[error(
        "unsupported AdmissionReview apiVersion {0:?}: volguard speaks admission.k8s.io/v1 (set admissionReviewVersions: [v1])"
    )]
    WrongApiVersion(String),
    #[error("unsupported kind {0:?}: expected AdmissionReview")]
    WrongKind(String),
    #[error("AdmissionReview has no request")]
    NoRequest,
    #[error("AdmissionReview request has no uid")]
    NoUid,
}

/// An embedded object (`request.object` / `request.oldObject`) a rule needs but cannot use: the
/// caller's mistake, answered with a 400 that names the field.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ObjectError {
    #[error("request.{field} is missing; expected a {kind}")]
    Missing {
        field: &'static str,
        kind: &'static str,
    },
    #[error("request.{field} does not decode as a {kind}: {message}")]
    Malformed {
        field: &'static str,
        kind: &'static str,
        message: String,
    },
    #[error("request.{field} is not a {kind} (request.kind)")]
    OtherKind {
        field: &'static str,
        kind: &'static str,
    },
}

#[cfg(test)]
#[path = "error_tests.rs"]
mod tests;
