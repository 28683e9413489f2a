//! Proofs, model-checked (issue 54 point 2): one object carrying an override and its stamp,
//! written by every kind of caller through the functions the webhook calls (`rules::stamp::stamp`,
//! the mutating rule; `rules::proof::judge`, the validating rule), with the mutating stamp run or
//! skipped (volguard's mutating entry is `Ignore`), and every write the callers may send: set or
//! remove the override, keep, remove or type any stamp.
//!
//! Invariant: a stored override counts (`rules::proof::counts`) only when the person who set it
//! may use the break-glass verb, and its stamp names that person — a forged stamp never makes a
//! proof. A deliberately broken rule (the authorizer never asked) must yield a counterexample,
//! so the model checks something.

use stateright::{Checker, Model, Property};
use volguard::model::{Meta, UserInfo};
use volguard::rules::proof::{self, Authority, BreakGlass, CONFIRMED_BY, Key, Reader};

const CONFIRM_FORCE_DELETE: &str = Key::ConfirmForceDelete.annotation();

/// Who writes: a person granted volguard-break-glass, a person without it, a service account, a
/// kubelet.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Who {
    Alice,
    Eve,
    Robot,
    Kubelet,
}

const EVERYONE: [Who; 4] = [Who::Alice, Who::Eve, Who::Robot, Who::Kubelet];

impl Who {
    fn user(self) -> UserInfo {
        let (name, group) = match self {
            Who::Alice => ("alice", "system:authenticated"),
            Who::Eve => ("eve", "system:authenticated"),
            Who::Robot => ("system:serviceaccount:ns:robot", "system:serviceaccounts"),
            Who::Kubelet => ("system:node:n1", "system:nodes"),
        };
        UserInfo {
            username: name.into(),
            groups: vec![group.into()],
            ..Default::default()
        }
    }
    /// What RBAC answers for `use` on breakglass.volguard.io.
    fn may_break_glass(self) -> bool {
        self == Who::Alice
    }
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Stamp {
    Keep,
    Remove,
    Type(Who),
}

#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Write {
    who: Who,
    /// `Some(true)`: set the override; `Some(false)`: remove it; `None`: leave it.
    set: Option<bool>,
    stamp: Stamp,
    /// volguard's mutating stamp ran on this request.
    mutated: bool,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, Default)]
struct S {
    overridden: bool,
    stamp: Option<String>,
    /// Ghost: who set the override now stored.
    setter: Option<Who>,
}

impl S {
    fn meta(&self) -> Meta {
        let mut a = std::collections::BTreeMap::new();
        if self.overridden {
            a.insert(CONFIRM_FORCE_DELETE.to_string(), "true".to_string());
        }
        if let Some(s) = &self.stamp {
            a.insert(CONFIRMED_BY.to_string(), s.clone());
        }
        let mut m = Meta::default();
        if !a.is_empty() {
            m.annotations = Some(a.into_iter().collect());
        }
        m
    }
}

struct ProofModel {
    /// The broken rule: it never asks the authorizer.
    broken: bool,
}

impl Model for ProofModel {
    type State = S;
    type Action = Write;

    fn init_states(&self) -> Vec<S> {
        vec![S::default()]
    }

    fn actions(&self, _: &S, out: &mut Vec<Write>) {
        for who in EVERYONE {
            for set in [Some(true), Some(false), None] {
                let mut stamps = vec![Stamp::Keep, Stamp::Remove];
                stamps.extend(EVERYONE.map(Stamp::Type));
                for stamp in stamps {
                    for mutated in [true, false] {
                        out.push(Write {
                            who,
                            set,
                            stamp,
                            mutated,
                        });
                    }
                }
            }
        }
    }

    fn next_state(&self, s: &S, w: Write) -> Option<S> {
        let user = w.who.user();
        let old = s.meta();
        let mut new = s.clone();
        if let Some(set) = w.set {
            new.overridden = set;
        }
        match w.stamp {
            Stamp::Keep => {}
            Stamp::Remove => new.stamp = None,
            Stamp::Type(t) => new.stamp = Some(t.user().username),
        }
        if w.mutated {
            let d = volguard::rules::stamp::stamp(&user, false, Some(&old), &new.meta(), None);
            let mut v = serde_json::json!({"metadata": serde_json::to_value(new.meta()).ok()?});
            if let Some(p) = &d.patch {
                json_patch::patch(&mut v, &p.ops()).ok()?;
            }
            new.stamp = v["metadata"]["annotations"][CONFIRMED_BY]
                .as_str()
                .map(str::to_string);
        }
        let set = proof::newly_set(Some(&old), &new.meta(), false);
        let asked: Vec<_> = match self.broken {
            true => set.iter().map(|o| (*o, Authority::Allowed)).collect(),
            false => set
                .iter()
                .map(|o| {
                    let a = match w.who.may_break_glass() {
                        true => Authority::Allowed,
                        false => Authority::Denied,
                    };
                    (*o, a)
                })
                .collect(),
        };
        let d = proof::judge(
            &user,
            &[],
            Some(&old),
            &new.meta(),
            false,
            BreakGlass::Rbac,
            &asked,
        );
        if !d.allowed {
            return None;
        }
        if !set.is_empty() {
            new.setter = Some(w.who);
        }
        if !new.overridden {
            new.setter = None;
        }
        (new != *s).then_some(new)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![Property::always(
            "a proof counts only from a person with the verb",
            |_, s: &S| {
                let counts = Reader::new(BreakGlass::Rbac)
                    .valid(&s.meta(), Key::ConfirmForceDelete)
                    .is_some();
                !counts
                    || (s.setter.is_some_and(Who::may_break_glass)
                        && s.stamp.as_deref() == Some("alice"))
            },
        )]
    }
}

fn depth() -> usize {
    std::env::var("VOLGUARD_MODEL_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(6)
}

fn check(broken: bool, depth: usize) -> (usize, Option<String>) {
    let c = ProofModel { broken }
        .checker()
        .target_max_depth(depth)
        .spawn_bfs()
        .join();
    let found = c
        .discovery("a proof counts only from a person with the verb")
        .map(|p| format!("{:#?}", p.into_actions()));
    (c.unique_state_count(), found)
}

#[test]
fn model_proof_holds_to_its_depth() {
    let depth = depth();
    let (states, found) = check(false, depth);
    if let Some(path) = found {
        panic!("model proof: a proof counted that nobody proved, after {states} states:\n{path}");
    }
    let (deeper, _) = check(false, depth + 4);
    let every = if deeper == states {
        "every reachable state"
    } else {
        "to its depth"
    };
    let writes = states * 4 * 3 * 6 * 2;
    println!(
        "model proof: {states} states and {writes} writes explored (depth {depth}, {every}; 4 callers × set/remove/keep × 6 stamps × the mutating stamp run or not): a stored override counts only when set by a person with the break-glass verb and stamped with their name"
    );
}

#[test]
fn model_proof_finds_the_unasked_authorizer() {
    let (states, found) = check(true, depth());
    let path = found.unwrap_or_else(|| {
        panic!("the broken rule (authorizer never asked) survived {states} states: the model checks nothing")
    });
    println!(
        "model proof, broken rule (authorizer never asked): a proof counted that nobody proved\n{path}"
    );
}
