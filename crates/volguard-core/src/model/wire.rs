//! Serde helpers for the wire format (no object shapes here): a compact string map, `null`-or-value
//! seeds, and object keys borrowed from the input. They keep decoding of 100k objects and of
//! every admission review cheap (see docs/performance.md).

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// A string map stored as a sorted boxed slice. Cached objects carry a handful of labels at most,
/// and a `BTreeMap` allocates a node for eleven entries whatever the count: this keeps a cache of
/// 100k objects small. Decodes from and encodes to a JSON object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SmallMap(Box<[(Box<str>, Box<str>)]>);

impl SmallMap {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &str) -> bool) {
        let kept: Vec<_> = std::mem::take(&mut self.0)
            .into_vec()
            .into_iter()
            .filter(|(k, v)| keep(k, v))
            .collect();
        self.0 = kept.into_boxed_slice();
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }
    /// Set `key` (rare: the offline lock table writes one annotation).
    pub fn insert(&mut self, key: &str, value: &str) {
        let mut m: Vec<(String, String)> = self
            .iter()
            .filter(|(k, _)| *k != key)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        m.push((key.to_string(), value.to_string()));
        *self = m.into_iter().collect();
    }
}

impl FromIterator<(String, String)> for SmallMap {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        // Through a BTreeMap: sorted, last value wins for a repeated key, as in JSON decoding.
        let m: BTreeMap<String, String> = iter.into_iter().collect();
        SmallMap(
            m.into_iter()
                .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
                .collect(),
        )
    }
}

impl<const N: usize> From<[(String, String); N]> for SmallMap {
    fn from(a: [(String, String); N]) -> Self {
        a.into_iter().collect()
    }
}

impl Serialize for SmallMap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for SmallMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(SmallMapVisitor { keep: |_| true })
    }
}

/// Decodes a JSON object of strings straight into the final slice (this runs for every admitted
/// object), keeping the keys `keep` accepts; the values of the others are skipped, not copied.
struct SmallMapVisitor {
    keep: fn(&str) -> bool,
}

impl<'de> serde::de::Visitor<'de> for SmallMapVisitor {
    type Value = SmallMap;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a map of strings")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<SmallMap, A::Error> {
        let mut v: Vec<(Box<str>, Box<str>)> = Vec::new();
        while let Some(FieldKey(k)) = a.next_key()? {
            if (self.keep)(&k) {
                let val: String = a.next_value()?;
                v.push((k.into(), val.into_boxed_str()));
            } else {
                a.next_value::<serde::de::IgnoredAny>()?;
            }
        }
        // Sorted for binary search; for a repeated key the last value wins, as in JSON.
        v.reverse();
        v.sort_by(|x, y| x.0.cmp(&y.0));
        v.dedup_by(|later, earlier| later.0 == earlier.0);
        Ok(SmallMap(v.into_boxed_slice()))
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for SmallMapVisitor {
    type Value = SmallMap;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<SmallMap, D::Error> {
        d.deserialize_map(self)
    }
}

/// `metadata.annotations` keeping only volguard's own (`volguard.io/...`) and `MIGRATED_TO`: no
/// rule reads any other, and a pod carries many (kubectl's last-applied configuration can be
/// kilobytes).
pub(super) fn volguard_annotations<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<SmallMap>, D::Error> {
    use serde::de::DeserializeSeed;
    let keep = SmallMapVisitor {
        keep: super::kept_annotation,
    };
    Ok(Optional(keep).deserialize(d)?.filter(|m| !m.is_empty()))
}

/// `null` or a value decoded by the inner seed.
pub struct Optional<S>(pub S);

impl<'de, S: serde::de::DeserializeSeed<'de>> serde::de::DeserializeSeed<'de> for Optional<S> {
    type Value = Option<S::Value>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, S: serde::de::DeserializeSeed<'de>> serde::de::Visitor<'de> for Optional<S> {
    type Value = Option<S::Value>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("null or an object")
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(d).map(Some)
    }
}

/// A JSON object key, borrowed from the input when it has no escapes.
pub struct FieldKey<'de>(pub Cow<'de, str>);

impl<'de> Deserialize<'de> for FieldKey<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = FieldKey<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                v: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(FieldKey(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(FieldKey(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_identifier(V)
    }
}

/// The latest of the strings a sequence yields for each element (RFC 3339 times written by the
/// apiserver compare as strings), without a vector: `pick` reads one element.
fn latest_of<'de, D, E>(
    d: D,
    pick: fn(E) -> Option<Cow<'de, str>>,
) -> Result<Option<String>, D::Error>
where
    D: serde::Deserializer<'de>,
    E: Deserialize<'de>,
{
    struct V<'de, E>(fn(E) -> Option<Cow<'de, str>>);
    impl<'de, E: Deserialize<'de>> serde::de::Visitor<'de> for V<'de, E> {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("null or a list")
        }
        fn visit_unit<Er: serde::de::Error>(self) -> Result<Self::Value, Er> {
            Ok(None)
        }
        fn visit_none<Er: serde::de::Error>(self) -> Result<Self::Value, Er> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut a: A,
        ) -> Result<Self::Value, A::Error> {
            let mut latest: Option<Cow<'de, str>> = None;
            while let Some(e) = a.next_element::<E>()? {
                if let Some(t) = (self.0)(e)
                    && latest.as_ref().is_none_or(|l| **l < *t)
                {
                    latest = Some(t);
                }
            }
            Ok(latest.map(Cow::into_owned))
        }
    }
    d.deserialize_option(V(pick))
}

#[derive(Deserialize)]
#[serde(remote = "Self")]
struct Terminated<'a> {
    #[serde(borrow, rename = "finishedAt")]
    finished_at: Option<Cow<'a, str>>,
}
#[derive(Deserialize)]
#[serde(remote = "Self")]
struct State<'a> {
    #[serde(borrow)]
    terminated: Option<Terminated<'a>>,
}
#[derive(Deserialize)]
#[serde(remote = "Self")]
struct ContainerStatus<'a> {
    #[serde(borrow)]
    state: Option<State<'a>>,
}
#[derive(Deserialize)]
#[serde(remote = "Self")]
struct Condition<'a> {
    #[serde(borrow, rename = "lastTransitionTime")]
    last_transition_time: Option<Cow<'a, str>>,
}

pub(super) fn latest_finished_at<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<String>, D::Error> {
    latest_of(d, |c: ContainerStatus<'de>| {
        c.state?.terminated?.finished_at
    })
}

pub(super) fn latest_transition<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<String>, D::Error> {
    latest_of(d, |c: Condition<'de>| c.last_transition_time)
}

#[derive(Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
struct Toleration<'a> {
    #[serde(borrow)]
    key: Option<Cow<'a, str>>,
    #[serde(borrow)]
    operator: Option<Cow<'a, str>>,
    #[serde(borrow)]
    effect: Option<Cow<'a, str>>,
    toleration_seconds: Option<i64>,
}

/// How long `spec.tolerations` tolerate `node.kubernetes.io/unreachable` (NoExecute): the
/// longest, `Forever` for one without seconds. Folded while decoding (no vector per pod).
pub(super) fn unreachable_toleration<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<super::Tolerates, D::Error> {
    use super::Tolerates;
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = Tolerates;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("null or a list of tolerations")
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Tolerates, E> {
            Ok(Tolerates::NotAtAll)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Tolerates, E> {
            Ok(Tolerates::NotAtAll)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Tolerates, D::Error> {
            d.deserialize_seq(self)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Tolerates, A::Error> {
            let mut out = Tolerates::NotAtAll;
            while let Some(t) = a.next_element_seed(Tol)? {
                let key_matches = match t.key.as_deref() {
                    Some(k) if !k.is_empty() => k == super::UNREACHABLE_TAINT,
                    _ => t.operator.as_deref() == Some("Exists"),
                };
                let effect_matches = t
                    .effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == "NoExecute");
                if key_matches && effect_matches {
                    out = out.max(match t.toleration_seconds {
                        None => Tolerates::Forever,
                        Some(s) => Tolerates::Seconds(u32::try_from(s.max(0)).unwrap_or(u32::MAX)),
                    });
                }
            }
            Ok(out)
        }
    }
    struct Tol;
    impl<'de> serde::de::DeserializeSeed<'de> for Tol {
        type Value = Toleration<'de>;
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            object(d)
        }
    }
    d.deserialize_option(V)
}

pub(super) fn as_unreachable_toleration<S: serde::Serializer>(
    t: &super::Tolerates,
    s: S,
) -> Result<S::Ok, S::Error> {
    let mut v = serde_json::json!({"key": super::UNREACHABLE_TAINT, "operator": "Exists", "effect": "NoExecute"});
    if let super::Tolerates::Seconds(secs) = t {
        v["tolerationSeconds"] = (*secs).into();
    }
    [v].serialize(s)
}

/// An RFC 3339 time, or `None` when absent, `null` or not a time (never an error: one odd
/// timestamp must not make a whole object unreadable).
pub(super) fn lenient_time<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<jiff::Timestamp>, D::Error> {
    #[derive(Deserialize)]
    struct Text<'a>(#[serde(borrow)] Cow<'a, str>);
    Ok(Option::<Text<'de>>::deserialize(d)?.and_then(|t| parse_time(&t.0)))
}

/// An RFC 3339 time. The forms the apiserver and volguard write (`metav1.Time`:
/// `2006-01-02T15:04:05Z`; `MicroTime` and the lock's `at`: with a fraction of up to nine digits)
/// are read directly; anything else goes to jiff. Every object carries one (`creationTimestamp`),
/// and jiff's general parser took 670 instructions of it per review (`make profile`), this path
/// under 100.
/// A field that may be `null` on the wire, kept without an `Option`: `null` decodes as absent.
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

pub(crate) fn parse_time(text: &str) -> Option<jiff::Timestamp> {
    utc_time(text.as_bytes())
        .and_then(|(s, ns)| jiff::Timestamp::new(s, ns).ok())
        .or_else(|| text.parse().ok())
}

/// `parse_time` for a field that must be a time (a lock's `at`): an error names the text.
pub fn time<'de, D: serde::Deserializer<'de>>(d: D) -> Result<jiff::Timestamp, D::Error> {
    #[derive(Deserialize)]
    struct Text<'a>(#[serde(borrow)] Cow<'a, str>);
    let t = Text::deserialize(d)?;
    parse_time(&t.0)
        .ok_or_else(|| serde::de::Error::custom(format_args!("{:?} is not an RFC 3339 time", t.0)))
}

/// Seconds and nanoseconds since the epoch of exactly `YYYY-MM-DDTHH:MM:SS[.f{1,9}]Z`, with every
/// field in range; `None` for any other text (the caller then parses it in full).
fn utc_time(b: &[u8]) -> Option<(i64, i32)> {
    let (head, rest) = b.split_at_checked(19)?;
    let [
        y0,
        y1,
        y2,
        y3,
        b'-',
        m0,
        m1,
        b'-',
        d0,
        d1,
        b'T',
        h0,
        h1,
        b':',
        i0,
        i1,
        b':',
        s0,
        s1,
    ] = *head
    else {
        return None;
    };
    let nanos = match rest {
        [b'Z'] => 0,
        [b'.', frac @ .., b'Z'] if (1..=9).contains(&frac.len()) => {
            let n = digits(frac)?;
            // Scale to nanoseconds: ".5" is 500,000,000.
            let scale = 10i64.pow(9 - u32::try_from(frac.len()).ok()?);
            i32::try_from(n * scale).ok()?
        }
        _ => return None,
    };
    let (y, m, d) = (
        digits(&[y0, y1, y2, y3])?,
        digits(&[m0, m1])?,
        digits(&[d0, d1])?,
    );
    let (h, i, s) = (digits(&[h0, h1])?, digits(&[i0, i1])?, digits(&[s0, s1])?);
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let month_days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    // A leap second (`:60`) is left to jiff.
    if d < 1 || d > month_days || h > 23 || i > 59 || s > 59 {
        return None;
    }
    // Days from 1970-01-01 of a proleptic Gregorian date (H. Hinnant, "chrono-compatible
    // low-level date algorithms"), years counted from March so the leap day ends a year.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3_600 + i * 60 + s, nanos))
}

/// The decimal value of ASCII digits (`None` if any is not a digit).
fn digits(ds: &[u8]) -> Option<i64> {
    ds.iter().try_fold(0i64, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + i64::from(c - b'0'))
    })
}

/// The compact fields written back in their API shape (state files, `-o yaml`).
pub(super) fn as_finished_container<S: serde::Serializer>(
    t: &Option<String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    t.as_ref()
        .map(|t| [serde_json::json!({"state": {"terminated": {"finishedAt": t}}})])
        .serialize(s)
}

pub(super) fn as_condition<S: serde::Serializer>(
    t: &Option<String>,
    s: S,
) -> Result<S::Ok, S::Error> {
    t.as_ref()
        .map(|t| [serde_json::json!({"lastTransitionTime": t})])
        .serialize(s)
}

pub(crate) use super::object::{Derived, object, object_only, object_value};

object_only!(borrowed: Terminated, State, ContainerStatus, Condition, Toleration);

/// Decode JSON text as `T`; the error names the field that failed (`metadata.finalizers: invalid
/// type: ...`), so a 400 or a refused state file says where, not only at which column.
pub fn from_json<'de, T: Deserialize<'de>>(text: &'de str) -> Result<T, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = serde_path_to_error::deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(v)
}
