//! What a rule returns, and how it receives facts that may be missing or unknown.

/// The outcome of one rule. `row` names the row of the rule that decided, for logs and audit annotations.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub allowed: bool,
    /// HTTP-style status code carried in the AdmissionResponse status (200 when allowed).
    pub code: u16,
    /// The rule's row that decided (in `auditAnnotations` and logs); the rule itself is the
    /// verdict's.
    pub row: &'static str,
    pub message: Option<String>,
    pub warnings: Vec<String>,
    pub patch: Option<Patch>,
    /// A denial let through because its rule runs in `warn` enforcement mode (rules.md §2g), or
    /// for an exempted caller (then `exempted` too).
    pub warned: bool,
    /// A denial let through because the caller is exempted from the rule (`--exempt`).
    pub exempted: bool,
    /// What the decision leaves behind beyond its answer, decided by the rule with the row: the
    /// serving and admission layers act on it and never on the row's name.
    pub effect: Option<Effect>,
}

/// What an allowed decision asks of the layers around the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// An Event and an audit line of this kind (a person's override, a lifted protection, a
    /// confirmation set).
    Record(super::Recorded),
    /// A release on a trusted remediator's word: written as a NodeFence record before the answer
    /// (rules.md §7 "Trusted remediators").
    RecordRelease,
    /// Allowed without a judgement, a fact being unknown (a rule whose failurePolicy is Ignore):
    /// nothing that follows in the same request may build on it (the RWO lock is not taken).
    Unjudged,
}

impl Decision {
    pub fn allow(row: &'static str) -> Self {
        Decision {
            allowed: true,
            code: 200,
            row,
            message: None,
            warnings: Vec::new(),
            patch: None,
            warned: false,
            exempted: false,
            effect: None,
        }
    }

    pub fn deny(row: &'static str, message: impl Into<String>) -> Self {
        Decision {
            allowed: false,
            code: 403,
            row,
            message: Some(message.into()),
            warnings: Vec::new(),
            patch: None,
            warned: false,
            exempted: false,
            effect: None,
        }
    }

    /// A request volguard could not understand (the object does not decode as its kind).
    pub fn bad_request(message: impl Into<String>) -> Self {
        Decision {
            code: 400,
            ..Decision::deny("bad-request", message)
        }
    }

    /// Refused because a fact needed for safety could not be read.
    pub fn unavailable(row: &'static str, message: impl Into<String>) -> Self {
        Decision {
            code: 500,
            ..Decision::deny(row, message)
        }
    }

    /// This denial let through (warn mode, or an exempted caller): allowed, `why` first among
    /// its warnings, marked so that it is counted and recorded as what it would have been.
    pub fn let_through(self, why: String, exempted: bool) -> Self {
        let mut warnings = self.warnings;
        warnings.insert(0, why);
        Decision {
            allowed: true,
            code: 200,
            row: self.row,
            message: None,
            warnings,
            patch: None,
            warned: true,
            exempted,
            effect: None,
        }
    }

    /// The same decision, leaving `effect` behind.
    pub fn with_effect(mut self, effect: Effect) -> Self {
        self.effect = Some(effect);
        self
    }

    pub fn with_warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// The label used for the `decision` metric dimension.
    pub fn outcome(&self) -> &'static str {
        match (self.allowed, self.patch.is_some(), self.code) {
            (true, _, _) if self.exempted => "exempted",
            (true, _, _) if self.warned => "warned",
            (true, true, _) => "patched",
            (true, false, _) => "allowed",
            (false, _, 400) => "invalid",
            (false, _, 500) => "error",
            (false, _, _) => "denied",
        }
    }
}

/// The JSON patch a mutating rule answers with.
#[derive(Debug, Clone, PartialEq)]
pub enum Patch {
    /// `add` a protection finalizer: as the whole list when the object has none
    /// (`/metadata/finalizers`), else at the list's end (`/metadata/finalizers/-`). The answer to
    /// nearly every PVC and PV CREATE, so it is written straight to bytes: built as a
    /// `json_patch::Patch` and serialised, it cost 3,300 of the PVC CREATE review's 50,000
    /// instructions (`make profile`), against ~400 this way.
    AddFinalizer {
        finalizer: &'static str,
        list_exists: bool,
    },
    /// Any other patch.
    Ops(json_patch::Patch),
}

impl Patch {
    /// As a `json_patch::Patch` (to apply it, in tests and the offline state).
    pub fn ops(&self) -> std::borrow::Cow<'_, json_patch::Patch> {
        use json_patch::jsonptr::PointerBuf;
        use json_patch::{AddOperation, PatchOperation};
        use serde_json::Value;
        match self {
            Patch::Ops(p) => std::borrow::Cow::Borrowed(p),
            Patch::AddFinalizer {
                finalizer,
                list_exists,
            } => {
                let op = match list_exists {
                    true => AddOperation {
                        path: PointerBuf::from_tokens(["metadata", "finalizers", "-"]),
                        value: Value::String(finalizer.to_string()),
                    },
                    false => AddOperation {
                        path: PointerBuf::from_tokens(["metadata", "finalizers"]),
                        value: Value::Array(vec![Value::String(finalizer.to_string())]),
                    },
                };
                std::borrow::Cow::Owned(json_patch::Patch(vec![PatchOperation::Add(op)]))
            }
        }
    }

    /// Append `op`.
    pub fn push(&mut self, op: json_patch::PatchOperation) {
        let mut ops = self.ops().into_owned();
        ops.0.push(op);
        *self = Patch::Ops(ops);
    }

    /// The patch as JSON.
    pub fn to_json(&self) -> Vec<u8> {
        match self {
            Patch::Ops(p) => serde_json::to_vec(p).unwrap_or_default(),
            Patch::AddFinalizer {
                finalizer,
                list_exists,
            } => {
                let (path, open, close) = match list_exists {
                    true => ("/metadata/finalizers/-", "", ""),
                    false => ("/metadata/finalizers", "[", "]"),
                };
                let mut out = Vec::with_capacity(64 + finalizer.len());
                out.extend_from_slice(br#"[{"op":"add","path":""#);
                out.extend_from_slice(path.as_bytes());
                out.extend_from_slice(br#"","value":"#);
                out.extend_from_slice(open.as_bytes());
                // A finalizer is a qualified name (`domain/name`): nothing in it to escape, and
                // debug builds check it.
                debug_assert!(
                    finalizer
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"./-_".contains(&b))
                );
                out.push(b'"');
                out.extend_from_slice(finalizer.as_bytes());
                out.push(b'"');
                out.extend_from_slice(close.as_bytes());
                out.extend_from_slice(b"}]");
                out
            }
        }
    }
}

impl From<json_patch::Patch> for Patch {
    fn from(p: json_patch::Patch) -> Patch {
        Patch::Ops(p)
    }
}

/// Why a fact could not be read. Rules put it in messages; "unsure" always means "in use".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    #[error("{what} timed out")]
    Timeout { what: String },
    #[error("{what}: {message}")]
    Api { what: String, message: String },
    /// The apiserver answered with a refusal (403 Forbidden, ...): its own words, kept whole so
    /// a command can print them as kubectl does.
    #[error("{what}: {message}")]
    Refused {
        what: String,
        code: u16,
        reason: String,
        message: String,
    },
    #[error("decoding {what}: {message}")]
    Decode { what: String, message: String },
    /// A cache-only read of a kind the view does not watch: its empty cache says nothing.
    #[error("{what}: not in this view's caches (not watched)")]
    NotWatched { what: String },
    /// A node that is gone with no record of its deletion on proof (rules.md §7): its machine may
    /// still run what was on it, so it counts as present; the next step is a proof, not a wait.
    #[error("node {node:?} is gone, but no NodeFence records its deletion on proof")]
    GoneUnrecorded { node: String },
}

/// A fact read from the cluster: present, confirmed absent, or unknown because the read failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact<T> {
    Found(T),
    Missing,
    Unknown(ReadError),
}

impl<T> Fact<T> {
    pub fn as_ref(&self) -> Fact<&T> {
        match self {
            Fact::Found(t) => Fact::Found(t),
            Fact::Missing => Fact::Missing,
            Fact::Unknown(e) => Fact::Unknown(e.clone()),
        }
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Fact<U> {
        match self {
            Fact::Found(t) => Fact::Found(f(t)),
            Fact::Missing => Fact::Missing,
            Fact::Unknown(e) => Fact::Unknown(e),
        }
    }

    pub fn found(&self) -> Option<&T> {
        match self {
            Fact::Found(t) => Some(t),
            _ => None,
        }
    }
}

impl<T> Fact<Vec<T>> {
    /// The first of what was found (`Missing` when nothing was).
    pub fn first(self) -> Fact<T> {
        match self {
            Fact::Found(v) => v.into_iter().next().map_or(Fact::Missing, Fact::Found),
            Fact::Missing => Fact::Missing,
            Fact::Unknown(e) => Fact::Unknown(e),
        }
    }
}
