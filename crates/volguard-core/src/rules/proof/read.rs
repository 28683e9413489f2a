//! Reading a stored proof (rules.md §8): the one function every guard's proof comes through.
//! A confirmation counts when it is `"true"`, stamped by a person, not expired and break glass
//! is on; a guard receives a [`Proof`] only then, and a [`Proof`] is built nowhere else, so no
//! guard can be a step behind the others on what a proof is.

use super::keys::{CONFIRMED_AT, CONFIRMED_BY, Key};
use super::{BreakGlass, stamp_is_person};
use crate::model::Meta;

/// How stored proofs are read: the break-glass mode and, with `--break-glass-expiry`, how long
/// one counts (and the clock it is read with).
#[derive(Debug, Clone, Copy)]
pub struct Reader {
    pub mode: BreakGlass,
    pub expiry: Option<Expiry>,
}

/// A confirmation that counts: which one, and the person whose stamp it carries. Only
/// [`Reader::read`] builds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proof {
    key: Key,
    by: String,
}

impl Proof {
    pub fn key(&self) -> Key {
        self.key
    }

    /// The person who set it (its stamp).
    pub fn by(&self) -> &str {
        &self.by
    }

    /// Whether this proof is of `key`: a guard accepts only the kind it needs.
    pub fn is(&self, key: Key) -> bool {
        self.key == key
    }
}

/// What one stored object says of one proof.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// Not there.
    Absent,
    Valid(Proof),
    /// There, but it counts for nothing: the warning says why.
    Ignored(String),
}

impl Read {
    /// The proof, when it counts.
    pub fn proof(&self) -> Option<&Proof> {
        match self {
            Read::Valid(p) => Some(p),
            Read::Absent | Read::Ignored(_) => None,
        }
    }

    /// Why a proof that is there does not count.
    pub fn ignored(&self) -> Option<&str> {
        match self {
            Read::Ignored(w) => Some(w),
            Read::Absent | Read::Valid(_) => None,
        }
    }
}

impl Reader {
    /// Offline and in tests: break glass as `mode`, no expiry.
    pub const fn new(mode: BreakGlass) -> Self {
        Reader { mode, expiry: None }
    }

    /// The proof `key` on the **stored** object `stored` (never the request's new object: a
    /// proof is set by an earlier request, judged when it was written).
    pub fn read(&self, stored: &Meta, key: Key) -> Read {
        match counts(stored, key.annotation(), self.mode, self.expiry) {
            Ok(false) => Read::Absent,
            Ok(true) => Read::Valid(Proof {
                key,
                by: stored
                    .annotation(CONFIRMED_BY)
                    .unwrap_or_default()
                    .to_string(),
            }),
            Err(why) => Read::Ignored(why),
        }
    }

    /// The proof `key` on `stored` when it counts.
    pub fn valid(&self, stored: &Meta, key: Key) -> Option<Proof> {
        match self.read(stored, key) {
            Read::Valid(p) => Some(p),
            Read::Absent | Read::Ignored(_) => None,
        }
    }
}

/// How long a stored override counts after it was set (`--break-glass-expiry`), and the clock.
#[derive(Debug, Clone, Copy)]
pub struct Expiry {
    pub after: jiff::SignedDuration,
    pub now: jiff::Timestamp,
}

/// A `confirmed-at` this far ahead of volguard's clock is a hand-written one, not clock skew.
const SKEW: jiff::SignedDuration = jiff::SignedDuration::from_secs(300);

/// Whether the stored override `key` counts: set to `"true"`, stamped by a person and, with an
/// `expiry`, set less than that long ago. `Err` says why it does not (for the warning), `Ok(false)`
/// that it is not there at all.
pub(super) fn counts(
    stored: &Meta,
    key: &str,
    mode: BreakGlass,
    expiry: Option<Expiry>,
) -> Result<bool, String> {
    if !stored.annotation_true(key) {
        return Ok(false);
    }
    if mode == BreakGlass::Off {
        return Err(format!(
            "{key}=true ignored: break glass is off (--break-glass=off)"
        ));
    }
    match stored.annotation(CONFIRMED_BY) {
        Some(who) if stamp_is_person(who) => {}
        Some(who) => {
            return Err(format!(
                "{key}=true ignored: it was set by {who:?}, a service account or system identity, whose word \
                 proves nothing; a person sets it"
            ));
        }
        None => {
            return Err(format!(
                "{key}=true ignored: it carries no {CONFIRMED_BY} stamp (set before volguard judged it, or while \
                 volguard was down); a person sets it again"
            ));
        }
    }
    let Some(Expiry { after, now }) = expiry else {
        return Ok(true);
    };
    let set = stored
        .annotation(CONFIRMED_AT)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    match set {
        Some(set) if set > now + SKEW => Err(format!(
            "{key}=true ignored: its {CONFIRMED_AT} ({set}) is in the future, so it was not volguard's \
             clock that wrote it; a person sets it again"
        )),
        Some(set) if now.duration_since(set) >= after => Err(format!(
            "{key}=true ignored: it expired (set at {set}, break glass counts for {after:#} after it is set: \
             --break-glass-expiry); if the risk is still accepted, a person sets it again"
        )),
        Some(_) => Ok(true),
        None => Err(format!(
            "{key}=true ignored: it carries no valid {CONFIRMED_AT} time, so it cannot expire; a person sets \
             it again (volguard stamps the time)"
        )),
    }
}

#[cfg(any(test, feature = "testing"))]
impl Proof {
    /// A proof as if read from a stored object: for the rules' own tests.
    pub fn for_test(key: Key, by: &str) -> Proof {
        Proof {
            key,
            by: by.to_string(),
        }
    }
}

/// For the rules' own tests, whose subject is the rule and not the reader: the proof `key`
/// whenever `meta` says `"true"`, stamp and time unchecked.
#[cfg(any(test, feature = "testing"))]
pub fn assumed(meta: &Meta, key: Key) -> Option<Proof> {
    meta.annotation_true(key.annotation())
        .then(|| Proof::for_test(key, meta.annotation(CONFIRMED_BY).unwrap_or("a-person")))
}

/// [`assumed`], as a [`Read`].
#[cfg(any(test, feature = "testing"))]
pub fn assumed_read(meta: &Meta, key: Key) -> Read {
    assumed(meta, key).map_or(Read::Absent, Read::Valid)
}
