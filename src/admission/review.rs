//! The AdmissionReview `admission.k8s.io/v1` request: decoding (the response is `encode.rs`).
//!
//! One pass over the body: the apiserver writes `request.kind` before `request.object`, so by
//! the time the object arrives its type is known and it is decoded straight into the pruned
//! model (only the fields a rule reads are materialised). An object whose kind is not known yet,
//! or that volguard has no type for, stays raw JSON and is decoded on demand. When the typed
//! pass fails, the body is parsed again with every object raw, so a malformed object still
//! yields an answer naming the field rather than a generic parse error.

use crate::error::{ObjectError, ReviewError};
use crate::model::{Binding, Eviction, FieldKey, Node, Optional, Pod, Pv, Pvc, UserInfo};
use serde::de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

pub const API_VERSION: &str = "admission.k8s.io/v1";

#[derive(Debug, Default)]
struct ReviewIn<'a> {
    api_version: Option<String>,
    kind: Option<String>,
    request: Option<Request<'a>>,
}

/// The fields of an AdmissionRequest volguard reads; strings borrow from the body.
#[derive(Debug, Default)]
pub struct Request<'a> {
    pub uid: Cow<'a, str>,
    pub kind: GroupVersionKind<'a>,
    pub sub_resource: Option<Cow<'a, str>>,
    pub name: Option<Cow<'a, str>>,
    pub namespace: Option<Cow<'a, str>>,
    pub operation: Cow<'a, str>,
    pub user_info: UserInfo,
    pub object: Embedded<'a>,
    pub old_object: Embedded<'a>,
    pub options: Option<&'a RawValue>,
    pub dry_run: Option<bool>,
}

#[derive(Debug, Default, Clone, Deserialize)]
pub struct GroupVersionKind<'a> {
    #[serde(default, borrow)]
    pub group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub kind: Cow<'a, str>,
}

/// A JSON string, borrowed from the body when it has no escapes.
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// `request.object` / `request.oldObject`: absent (or null), decoded in the review's pass, or raw.
#[derive(Debug, Default)]
pub enum Embedded<'a> {
    #[default]
    Absent,
    Raw(&'a RawValue),
    // Boxed: a decoded object is ~350 bytes, and the request it sits in is returned by value up
    // through every serde visitor layer; inline, those moves were most of a request's L1 misses.
    Pod(Box<Pod>),
    Pvc(Box<Pvc>),
    Pv(Box<Pv>),
    Binding(Box<Binding>),
    Eviction(Box<Eviction>),
    Node(Box<Node>),
}

/// The kinds volguard decodes in the review's pass.
pub trait EmbeddedKind: DeserializeOwned + Clone {
    const KIND: &'static str;
    fn decoded<'e>(e: &'e Embedded<'_>) -> Option<&'e Self>;
}

macro_rules! embedded_kind {
    ($t:ident, $kind:literal) => {
        impl EmbeddedKind for $t {
            const KIND: &'static str = $kind;
            fn decoded<'e>(e: &'e Embedded<'_>) -> Option<&'e Self> {
                match e {
                    Embedded::$t(o) => Some(o),
                    _ => None,
                }
            }
        }
    };
}
embedded_kind!(Pod, "Pod");
embedded_kind!(Pvc, "PersistentVolumeClaim");
embedded_kind!(Pv, "PersistentVolume");
// Decoded in the pass too: kept raw, a bind's object was scanned twice (as raw JSON, then
// decoded); in the pass a scheduler bind's review takes 3,300 fewer instructions (`make profile`).
embedded_kind!(Binding, "Binding");
embedded_kind!(Eviction, "Eviction");
embedded_kind!(Node, "Node");

/// Never decoded in the pass (rare: deleting or re-annotating a namespace): read from the raw object.
impl EmbeddedKind for crate::model::Namespace {
    const KIND: &'static str = "Namespace";
    fn decoded<'e>(_: &'e Embedded<'_>) -> Option<&'e Self> {
        None
    }
}

/// Never decoded in the pass (rare: a person's `fence confirm`): always read from the raw object.
impl EmbeddedKind for crate::model::fence::NodeFence {
    const KIND: &'static str = "NodeFence";
    fn decoded<'e>(_: &'e Embedded<'_>) -> Option<&'e Self> {
        None
    }
}

impl Embedded<'_> {
    /// The object as a `T`; the error says which field is missing or does not decode, and why.
    pub fn get<T: EmbeddedKind>(&self, field: &'static str) -> Result<Cow<'_, T>, ObjectError> {
        let kind = T::KIND;
        match self {
            Embedded::Absent => Err(ObjectError::Missing { field, kind }),
            Embedded::Raw(raw) => {
                crate::model::from_json(raw.get())
                    .map(Cow::Owned)
                    .map_err(|message| ObjectError::Malformed {
                        field,
                        kind,
                        message,
                    })
            }
            decoded => T::decoded(decoded)
                .map(Cow::Borrowed)
                .ok_or(ObjectError::OtherKind { field, kind }),
        }
    }
}

impl Request<'_> {
    pub fn subresource(&self) -> Option<&str> {
        self.sub_resource.as_deref().filter(|s| !s.is_empty())
    }
    /// The UID of the object the request is about, when it carries one: the stored object for
    /// an UPDATE or DELETE, the pod's UID a Binding names (an Eviction names none). For the
    /// audit trail's Events (`kubectl describe` matches them by UID); not on the decision path.
    pub fn object_uid(&self) -> Option<String> {
        fn of(e: &Embedded<'_>) -> Option<String> {
            #[derive(Deserialize, Default)]
            struct Uid {
                #[serde(default)]
                uid: String,
            }
            #[derive(Deserialize)]
            struct Object {
                #[serde(default)]
                metadata: Uid,
            }
            let uid = match e {
                Embedded::Absent | Embedded::Eviction(_) => return None,
                Embedded::Raw(raw) => serde_json::from_str::<Object>(raw.get()).ok()?.metadata.uid,
                Embedded::Pod(o) => o.metadata.uid.to_string(),
                Embedded::Pvc(o) => o.metadata.uid.to_string(),
                Embedded::Pv(o) => o.metadata.uid.to_string(),
                Embedded::Binding(o) => o.metadata.uid.to_string(),
                Embedded::Node(o) => o.metadata.uid.to_string(),
            };
            (!uid.is_empty()).then_some(uid)
        }
        of(&self.old_object).or_else(|| of(&self.object))
    }

    /// The stored object's UID and resourceVersion on a DELETE: the same DELETE reaches a
    /// webhook twice when it ends a grace period at once (the apiserver's registry validates the
    /// graceful-deletion update and then the deletion), each call with its own request UID, so
    /// this is how one request is told from its second call (metrics and Events count requests).
    pub fn deleted_version(&self) -> Option<(String, String)> {
        #[derive(Deserialize, Default)]
        #[serde(rename_all = "camelCase")]
        struct Meta {
            #[serde(default)]
            uid: String,
            #[serde(default)]
            resource_version: String,
        }
        #[derive(Deserialize)]
        struct Object {
            #[serde(default)]
            metadata: Meta,
        }
        if self.operation != "DELETE" {
            return None;
        }
        let uid_rv = |m: &crate::model::Meta| {
            let rv = m.resource_version.as_deref().unwrap_or_default();
            (m.uid.to_string(), rv.to_string())
        };
        let (uid, rv) = match &self.old_object {
            Embedded::Raw(raw) => {
                let m = serde_json::from_str::<Object>(raw.get()).ok()?.metadata;
                (m.uid, m.resource_version)
            }
            Embedded::Pod(o) => uid_rv(&o.metadata),
            Embedded::Pvc(o) => uid_rv(&o.metadata),
            Embedded::Pv(o) => uid_rv(&o.metadata),
            Embedded::Node(o) => uid_rv(&o.metadata),
            _ => return None,
        };
        (!uid.is_empty() && !rv.is_empty()).then_some((uid, rv))
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
    // JSON is UTF-8 (RFC 8259). Checking the whole body once is cheaper than serde_json's
    // per-string check on a byte slice, which was a tenth of a pod review's decoding.
    let text = std::str::from_utf8(body).map_err(|e| {
        ReviewError::NotJson(format!(
            "invalid UTF-8 at byte {} of {}",
            e.valid_up_to(),
            body.len()
        ))
    })?;
    let parse = |typed| {
        let mut de = serde_json::Deserializer::from_str(text);
        let review = ReviewSeed { typed }.deserialize(&mut de)?;
        de.end().map(|()| review)
    };
    // The typed pass fails on a malformed object; the raw pass then tells a broken review from
    // a broken object (which the rule that reads it reports precisely).
    let review = parse(true).or_else(|_| parse(false)).map_err(|e| {
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

// ---------------------------------------------------------------- the single-pass decoder

/// Rejects a repeated field, as a derived `Deserialize` would: two `object`s in one review are
/// an attempt to show volguard something other than what the apiserver stores.
struct Seen(u16);

impl Seen {
    fn first<E: de::Error>(&mut self, bit: u16, name: &'static str) -> Result<(), E> {
        if self.0 & bit != 0 {
            return Err(E::duplicate_field(name));
        }
        self.0 |= bit;
        Ok(())
    }
}

struct ReviewSeed {
    typed: bool,
}

impl<'de> DeserializeSeed<'de> for ReviewSeed {
    type Value = ReviewIn<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ReviewSeed {
    type Value = ReviewIn<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an AdmissionReview object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut out, mut seen) = (ReviewIn::default(), Seen(0));
        while let Some(FieldKey(key)) = map.next_key()? {
            match key.as_ref() {
                "apiVersion" => {
                    seen.first(1, "apiVersion")?;
                    out.api_version = map.next_value()?;
                }
                "kind" => {
                    seen.first(2, "kind")?;
                    out.kind = map.next_value()?;
                }
                "request" => {
                    seen.first(4, "request")?;
                    out.request =
                        map.next_value_seed(Optional(RequestSeed { typed: self.typed }))?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

struct RequestSeed {
    typed: bool,
}

impl<'de> DeserializeSeed<'de> for RequestSeed {
    type Value = Request<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed {
    type Value = Request<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an AdmissionRequest object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut r, mut seen) = (Request::default(), Seen(0));
        while let Some(FieldKey(key)) = map.next_key()? {
            match key.as_ref() {
                "uid" => {
                    seen.first(1, "uid")?;
                    r.uid = map.next_value::<Text>()?.0;
                }
                "kind" => {
                    seen.first(2, "kind")?;
                    r.kind = map.next_value()?;
                }
                "subResource" => {
                    seen.first(4, "subResource")?;
                    r.sub_resource = map.next_value::<Option<Text>>()?.map(|t| t.0);
                }
                "name" => {
                    seen.first(8, "name")?;
                    r.name = map.next_value::<Option<Text>>()?.map(|t| t.0);
                }
                "namespace" => {
                    seen.first(16, "namespace")?;
                    r.namespace = map.next_value::<Option<Text>>()?.map(|t| t.0);
                }
                "operation" => {
                    seen.first(32, "operation")?;
                    r.operation = map.next_value::<Text>()?.0;
                }
                "userInfo" => {
                    seen.first(64, "userInfo")?;
                    r.user_info = map.next_value()?;
                }
                "object" => {
                    seen.first(128, "object")?;
                    r.object = map
                        .next_value_seed(Optional(self.embedded(&r.kind, r.subresource())))?
                        .unwrap_or_default();
                }
                "oldObject" => {
                    seen.first(256, "oldObject")?;
                    r.old_object = map
                        .next_value_seed(Optional(self.embedded(&r.kind, r.subresource())))?
                        .unwrap_or_default();
                }
                "options" => {
                    seen.first(512, "options")?;
                    r.options = map.next_value()?;
                }
                "dryRun" => {
                    seen.first(1024, "dryRun")?;
                    r.dry_run = map.next_value()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(r)
    }
}

impl RequestSeed {
    fn embedded(&self, kind: &GroupVersionKind, sub: Option<&str>) -> EmbeddedSeed {
        let known = match (&*kind.group, &*kind.kind) {
            // A pod's status write is judged on its containers' states too (rules.md §2h),
            // which the review pass does not keep: raw, decoded by the rule that reads it.
            ("", "Pod") if sub == Some("status") => None,
            ("", "Pod") => Some(Kinds::Pod),
            ("", "PersistentVolumeClaim") => Some(Kinds::Pvc),
            ("", "PersistentVolume") => Some(Kinds::Pv),
            ("", "Binding") => Some(Kinds::Binding),
            ("policy", "Eviction") => Some(Kinds::Eviction),
            ("", "Node") => Some(Kinds::Node),
            _ => None,
        };
        EmbeddedSeed(known.filter(|_| self.typed))
    }
}

#[derive(Clone, Copy)]
enum Kinds {
    Pod,
    Pvc,
    Pv,
    Binding,
    Eviction,
    Node,
}

/// One object, decoded as its kind when known in time, else kept raw (`null` is handled by the
/// `Optional` around it).
struct EmbeddedSeed(Option<Kinds>);

impl<'de> DeserializeSeed<'de> for EmbeddedSeed {
    type Value = Embedded<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Ok(match self.0 {
            Some(Kinds::Pod) => Embedded::Pod(Box::new(Pod::deserialize(d)?)),
            Some(Kinds::Pvc) => Embedded::Pvc(Box::new(Pvc::deserialize(d)?)),
            Some(Kinds::Pv) => Embedded::Pv(Box::new(Pv::deserialize(d)?)),
            Some(Kinds::Binding) => Embedded::Binding(Box::new(Binding::deserialize(d)?)),
            Some(Kinds::Eviction) => Embedded::Eviction(Box::new(Eviction::deserialize(d)?)),
            Some(Kinds::Node) => Embedded::Node(Box::new(Node::deserialize(d)?)),
            None => Embedded::Raw(<&RawValue>::deserialize(d)?),
        })
    }
}

/// The AdmissionReview answering `uid` with `decision`.
///
/// Written directly rather than through serde: the response has a fixed shape, and the generic
/// serializer (field names escaped one by one, the patch base64-encoded into a string first)
/// cost as much as the rest of a denial's handling.
#[cfg(test)]
#[path = "review_tests.rs"]
mod tests;
