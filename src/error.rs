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
