//! The hand-written response encoder against serde's derived `Serialize` on borrowed structs,
//! same output shape, in instructions per response (run under callgrind by `make encode-cmp`).
//! Usage: encode_cmp hand|derived N

use base64::Engine;
use serde::Serialize;
use volguard::rules::Decision;
use volguard::rules::rule::Rule;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Review<'a> {
    api_version: &'static str,
    kind: &'static str,
    response: Response<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Response<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
    audit_annotations: Audit<'a>,
}

#[derive(Serialize)]
struct Status<'a> {
    status: &'static str,
    code: u16,
    reason: &'static str,
    message: &'a str,
}

#[derive(Serialize)]
struct Audit<'a> {
    row: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<&'static str>,
}

fn derived(uid: &str, d: &Decision, rule: Option<Rule>) -> Vec<u8> {
    let patch = d
        .patch
        .as_ref()
        .and_then(|p| serde_json::to_vec(&*p.ops()).ok())
        .map(|p| base64::engine::general_purpose::STANDARD.encode(p));
    let r = Review {
        api_version: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        response: Response {
            uid,
            allowed: d.allowed,
            status: (!d.allowed).then(|| Status {
                status: "Failure",
                code: d.code,
                reason: match d.code {
                    400 => "BadRequest",
                    500 => "InternalError",
                    _ => "Forbidden",
                },
                message: d.message.as_deref().unwrap_or("denied by volguard"),
            }),
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            patch,
            warnings: &d.warnings,
            audit_annotations: Audit {
                row: d.row,
                rule: rule.map(Rule::name),
            },
        },
    };
    serde_json::to_vec(&r).unwrap_or_default()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "hand".into());
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let deny = Decision::deny(
        "force-delete-running-pod",
        "force delete of pod \"web-0\" refused: it is Running on node \"node-7\" and may keep running there, \
         writing to its volumes, after it is removed from the API. Delete it without --force and let the \
         kubelet stop it. If the node is really down, taint it node.kubernetes.io/out-of-service=nodeshutdown:NoExecute \
         (or delete the Node). A person who accepts the risk can annotate the pod volguard.io/confirm-force-delete=true and retry",
    );
    let uid = "b0000000-0000-4000-8000-000000000003";
    // Same output both ways (checked once, outside the measured loop's cost).
    let (a, b) = (
        volguard::admission::encode(uid, &deny, Some(Rule::ForceDelete)),
        derived(uid, &deny, Some(Rule::ForceDelete)),
    );
    let (va, vb): (serde_json::Value, serde_json::Value) = (
        serde_json::from_slice(&a).expect("hand"),
        serde_json::from_slice(&b).expect("derived"),
    );
    assert_eq!(va, vb, "the two encoders disagree");
    let mut total = 0usize;
    for _ in 0..n {
        let out = match which.as_str() {
            "hand" => volguard::admission::encode(uid, &deny, Some(Rule::ForceDelete)),
            _ => derived(uid, &deny, Some(Rule::ForceDelete)),
        };
        total += std::hint::black_box(out).len();
    }
    println!("{which}: {total} bytes");
}
