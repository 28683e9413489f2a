//! The AdmissionReview `admission.k8s.io/v1` wire format.
//!
//! Objects stay raw JSON until the rule that needs them decodes them as their declared kind, so a
//! review is parsed once and only the fields a rule reads are materialised. The response is
//! written by hand rather than through kube-core's `AdmissionResponse`, whose `patch` serialises as
//! an array of numbers; the API wants base64 in a JSON string.

use crate::error::ReviewError;
use crate::model::UserInfo;
use crate::rules::Decision;
use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

pub const API_VERSION: &str = "admission.k8s.io/v1";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReviewIn<'a> {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(borrow, default)]
    request: Option<Request<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub kind: GroupVersionKind,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub user_info: UserInfo,
    #[serde(borrow, default)]
    pub object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub old_object: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub options: Option<&'a RawValue>,
    #[serde(default)]
    pub dry_run: Option<bool>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

impl Request<'_> {
    pub fn subresource(&self) -> Option<&str> {
        self.sub_resource.as_deref().filter(|s| !s.is_empty())
    }
    /// `namespace/name` (or `name`) for logs.
    pub fn target(&self) -> String {
        match (self.namespace.as_deref(), self.name.as_deref()) {
            (Some(ns), Some(n)) if !ns.is_empty() => format!("{ns}/{n}"),
            (_, Some(n)) => n.to_string(),
            _ => String::new(),
        }
    }
}

/// Parse and check an AdmissionReview body.
pub fn decode(body: &[u8]) -> Result<Request<'_>, ReviewError> {
    let review: ReviewIn<'_> = serde_json::from_slice(body).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            ReviewError::NotJson(e.to_string())
        } else {
            ReviewError::NotAReview(e.to_string())
        }
    })?;
    match review.api_version.as_deref() {
        Some(API_VERSION) => {}
        other => {
            return Err(ReviewError::WrongApiVersion(
                other.unwrap_or("").to_string(),
            ));
        }
    }
    match review.kind.as_deref() {
        Some("AdmissionReview") => {}
        other => return Err(ReviewError::WrongKind(other.unwrap_or("").to_string())),
    }
    let request = review.request.ok_or(ReviewError::NoRequest)?;
    if request.uid.is_empty() {
        return Err(ReviewError::NoUid);
    }
    Ok(request)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<StatusOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

/// metav1.Status
#[derive(Serialize)]
struct StatusOut<'a> {
    status: &'static str,
    code: u16,
    reason: &'static str,
    message: &'a str,
}

/// The AdmissionReview answering `uid` with `decision`.
pub fn encode(uid: &str, decision: &Decision) -> Vec<u8> {
    let status = (!decision.allowed).then(|| StatusOut {
        status: "Failure",
        code: decision.code,
        reason: match decision.code {
            400 => "BadRequest",
            500 => "InternalError",
            _ => "Forbidden",
        },
        message: decision.message.as_deref().unwrap_or("denied by volguard"),
    });
    let patch = decision
        .patch
        .as_ref()
        .and_then(|p| serde_json::to_vec(p).ok())
        .map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes));
    let out = ReviewOut {
        api_version: API_VERSION,
        kind: "AdmissionReview",
        response: ResponseOut {
            uid,
            allowed: decision.allowed,
            status,
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            patch,
            warnings: &decision.warnings,
        },
    };
    // Serialising plain strings, bools and numbers cannot fail; fall back to a denial that
    // still names the uid rather than panic.
    serde_json::to_vec(&out).unwrap_or_else(|_| {
        format!(
            r#"{{"apiVersion":"{API_VERSION}","kind":"AdmissionReview","response":{{"uid":{},"allowed":false}}}}"#,
            serde_json::Value::String(uid.to_string())
        )
        .into_bytes()
    })
}

#[cfg(test)]
#[path = "review_tests.rs"]
mod tests;
