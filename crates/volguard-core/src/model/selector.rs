//! Label selectors as `kubectl -l` takes them: `a=b`, `a==b`, `a!=b`, `a`, `!a`,
//! `a in (x,y)`, `a notin (x,y)`, comma-separated (all must hold).

use crate::model::SmallMap;

#[derive(Debug, Clone, PartialEq)]
enum Req {
    Eq(String, String),
    Ne(String, String),
    Exists(String),
    Absent(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// Why a selector does not parse; the message is what `-l` prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("invalid label selector {selector:?}: bad requirement {requirement:?}")]
    Requirement {
        selector: String,
        requirement: String,
    },
    #[error("invalid set {0:?}: expected (a,b)")]
    Set(String),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Selector {
    reqs: Vec<Req>,
    raw: String,
}

impl Selector {
    pub fn parse(s: &str) -> Result<Selector, SelectorError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
            let req = if let Some((k, rest)) = p.split_once(" notin ") {
                Req::NotIn(k.trim().into(), set(rest)?)
            } else if let Some((k, rest)) = p.split_once(" in ") {
                Req::In(k.trim().into(), set(rest)?)
            } else if let Some((k, v)) = p.split_once("!=") {
                Req::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                Req::Eq(k.trim().into(), v.trim().into())
            } else if let Some(k) = p.strip_prefix('!') {
                Req::Absent(k.trim().into())
            } else {
                Req::Exists(p.into())
            };
            let key = match &req {
                Req::Eq(k, _)
                | Req::Ne(k, _)
                | Req::Exists(k)
                | Req::Absent(k)
                | Req::In(k, _)
                | Req::NotIn(k, _) => k,
            };
            if key.is_empty() || key.contains(char::is_whitespace) {
                return Err(SelectorError::Requirement {
                    selector: s.to_string(),
                    requirement: p.to_string(),
                });
            }
            reqs.push(req);
        }
        Ok(Selector {
            reqs,
            raw: s.to_string(),
        })
    }

    pub fn matches(&self, labels: Option<&SmallMap>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k));
        self.reqs.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v),
            Req::Ne(k, v) => get(k) != Some(v),
            Req::Exists(k) => get(k).is_some(),
            Req::Absent(k) => get(k).is_none(),
            Req::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Req::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
        })
    }

    /// The selector as the API server takes it (for server-side filtering).
    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

/// Split on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn set(s: &str) -> Result<Vec<String>, SelectorError> {
    let s = s.trim();
    let inner = s
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .ok_or_else(|| SelectorError::Set(s.to_string()))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

#[cfg(test)]
#[path = "selector_tests.rs"]
mod tests;
