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
    pub patch: Option<json_patch::Patch>,
    /// A denial let through because its rule runs in `warn` enforcement mode (rules.md §2g).
    pub warned: bool,
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

    pub fn with_warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// The label used for the `decision` metric dimension.
    pub fn outcome(&self) -> &'static str {
        match (self.allowed, self.patch.is_some(), self.code) {
            (true, _, _) if self.warned => "warned",
            (true, true, _) => "patched",
            (true, false, _) => "allowed",
            (false, _, 400) => "invalid",
            (false, _, 500) => "error",
            (false, _, _) => "denied",
        }
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
