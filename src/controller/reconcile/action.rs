//! What one key's reconcile (or one object of the overrides sweep) decided, as a value: the
//! writes to make, in order, what each one's success changes in this process, then how the key
//! ends (kube-runtime's `Action`, with the writes it makes). A reconcile reads and decides;
//! `Reconciler::execute` makes the writes, and no step of a reconcile or sweep writes by itself.

use super::*;

/// One write of an action.
pub(super) struct Step {
    write: Write,
    done: Done,
    /// Only told people something (an Event): its failure is warned and the key goes on, since
    /// what volguard tells must not hold up what it does. Any other write's failure ends the
    /// action and the key is retried (or is done: its object is gone).
    told: Option<Told>,
}

/// An Event's failure: which one, and the announcement to forget so the next change says it again.
pub(super) struct Told {
    reason: &'static str,
    forget: Option<(String, String)>,
}

/// What a write's success changes here: counted, logged, forgotten.
pub(super) enum Done {
    Nothing,
    /// A protection finalizer backfilled on a claim (`namespace/name`) or a volume.
    FinalizerAdded {
        resource: &'static str,
        object: String,
    },
    /// A volume's finalizer removed: it is bound to nothing.
    VolumeReleased {
        name: String,
    },
    /// A claim's finalizer removed on a consistent read: no pod uses it.
    ClaimReleased {
        namespace: String,
        name: String,
    },
    /// The claim's unused-since mark written: its clock starts over.
    UnusedWritten {
        namespace: String,
        name: String,
    },
    /// A person's expired overrides lifted from a claim or volume (`object`): `lifted` keys, and
    /// why, logged.
    OverrideLifted {
        resource: &'static str,
        object: String,
        lifted: u64,
        why: String,
    },
    /// A RWO lock nobody holds cleared.
    LockCleared {
        namespace: String,
        name: String,
        pod: String,
        node: String,
        why: &'static str,
    },
}

/// The writes of one key, then how the key ends.
pub(super) struct Action {
    steps: Vec<Step>,
    then: Outcome,
}

impl Action {
    /// Nothing to write; the key ends as `then`.
    pub fn then(then: Outcome) -> Action {
        Action {
            steps: Vec::new(),
            then,
        }
    }

    pub fn done() -> Action {
        Action::then(Outcome::Done)
    }

    /// One write (a patch with its `test`, uid or resourceVersion), then done.
    pub fn write(write: Write, done: Done) -> Action {
        Action {
            steps: vec![Step {
                write,
                done,
                told: None,
            }],
            then: Outcome::Done,
        }
    }

    /// An Event about the key, written before this action's writes.
    pub fn telling(mut self, event: Option<(Write, Told)>) -> Action {
        if let Some((write, told)) = event {
            self.steps.insert(
                0,
                Step {
                    write,
                    done: Done::Nothing,
                    told: Some(told),
                },
            );
        }
        self
    }

    /// An Event about what this action's writes did, written after them (not when one failed).
    pub fn told_after(mut self, write: Write, told: Told) -> Action {
        self.steps.push(Step {
            write,
            done: Done::Nothing,
            told: Some(told),
        });
        self
    }

    /// Whether the key is retried whatever its writes do.
    pub fn retries(&self) -> bool {
        matches!(self.then, Outcome::Retry(_))
    }

    /// This action, then `next`: the writes of both, in order; the earlier look again wins.
    pub fn and(mut self, next: Action) -> Action {
        self.steps.extend(next.steps);
        self.then = match (self.then, next.then) {
            (Outcome::Retry(r), _) | (_, Outcome::Retry(r)) => Outcome::Retry(r),
            (Outcome::RequeueAfter(a), Outcome::RequeueAfter(b)) => Outcome::RequeueAfter(a.min(b)),
            (Outcome::RequeueAfter(a), Outcome::Done)
            | (Outcome::Done, Outcome::RequeueAfter(a)) => Outcome::RequeueAfter(a),
            (Outcome::Done, Outcome::Done) => Outcome::Done,
        };
        self
    }
}

impl Told {
    pub fn new(reason: &'static str, forget: Option<(String, String)>) -> Told {
        Told { reason, forget }
    }
}

impl Reconciler {
    /// Make `action`'s writes in order, each paced by the controller's limiter: a write's failure
    /// ends the action there (404: done; 409/422 `Retry::Changed`, anything else `Retry::Api`: a
    /// key is retried with backoff after the watch delivers fresh state, the overrides sweep
    /// says what each means for its object), an Event's is warned. Then the action ends as it says.
    pub(super) async fn execute(&self, action: Action) -> Outcome {
        for step in action.steps {
            self.limiter.acquire().await;
            match (self.writer.apply(step.write).await, step.told) {
                (Ok(()), _) => self.made(step.done),
                (Err(e), Some(told)) => {
                    tracing::warn!(error = %e, "could not publish {} event", told.reason);
                    if let Some(key) = told.forget {
                        self.lock_announced().remove(&key);
                    }
                }
                (Err(e), None) => {
                    if let Err(o) = classify(Err(e)) {
                        return o;
                    }
                }
            }
        }
        action.then
    }

    /// What a write's success changes here.
    fn made(&self, done: Done) {
        match done {
            Done::Nothing => {}
            Done::FinalizerAdded { resource, object } => {
                self.metrics
                    .finalizers_added
                    .get_or_create(&ResourceLabel { resource })
                    .inc();
                tracing::info!(resource, object = %object, "protection finalizer backfilled");
            }
            Done::VolumeReleased { name } => {
                self.count_removed("pv");
                tracing::info!(pv = %name, "volume not bound; protection finalizer removed");
            }
            Done::ClaimReleased { namespace, name } => {
                self.forget_pvc(&namespace, &name);
                self.metrics
                    .blocked_pvcs
                    .set(self.lock_announced().len() as i64);
                self.count_removed("pvc");
                tracing::info!(pvc = %format!("{namespace}/{name}"),
                    "no pod uses the claim (consistent read); protection finalizer removed");
            }
            Done::UnusedWritten { namespace, name } => {
                self.seen_unused(&namespace, &name, false);
            }
            Done::OverrideLifted {
                resource,
                object,
                lifted,
                why,
            } => {
                self.metrics
                    .overrides_lifted
                    .get_or_create(&ResourceLabel { resource })
                    .inc_by(lifted);
                tracing::info!(resource, name = %object, "{why}");
            }
            Done::LockCleared {
                namespace,
                name,
                pod,
                node,
                why,
            } => {
                self.metrics.locks_cleared.inc();
                tracing::info!(pvc = %format!("{namespace}/{name}"), first_holder = %pod, node = %node,
                    reason = why, "ReadWriteOnce lock cleared (read live)");
            }
        }
    }

    fn count_removed(&self, resource: &'static str) {
        self.metrics
            .finalizers_removed
            .get_or_create(&ResourceLabel { resource })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(name: &str) -> Write {
        Write::Pv {
            name: name.into(),
            patch: Patch::Merge(serde_json::json!({})),
        }
    }

    fn names(a: &Action) -> Vec<String> {
        a.steps
            .iter()
            .map(|s| match &s.write {
                Write::Pv { name, .. } => name.clone(),
                Write::Event { note, .. } => note.reason.clone(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn two_actions_write_in_order_and_the_earlier_look_again_wins() {
        let after = |s| Action::then(Outcome::RequeueAfter(Duration::from_secs(s)));
        let a = Action::write(pv("lock"), Done::Nothing).and(after(30));
        assert_eq!(names(&a), ["lock"]);
        assert_eq!(a.then, Outcome::RequeueAfter(Duration::from_secs(30)));
        let b = after(60)
            .and(Action::write(pv("mark"), Done::Nothing))
            .and(after(10));
        assert_eq!(names(&b), ["mark"]);
        assert_eq!(b.then, Outcome::RequeueAfter(Duration::from_secs(10)));
        assert_eq!(Action::done().and(Action::done()).then, Outcome::Done);
    }

    #[test]
    fn a_retry_wins_over_any_look_again() {
        let retry = || Action::then(Outcome::Retry(Retry::UnexpectedPlan));
        assert!(retry().retries());
        let a = Action::then(Outcome::RequeueAfter(Duration::from_secs(1))).and(retry());
        assert!(a.retries());
        assert!(retry().and(Action::done()).retries());
        assert!(!Action::write(pv("x"), Done::Nothing).retries());
    }

    #[test]
    fn what_is_told_is_written_first() {
        let ev = Write::event(
            Default::default(),
            true,
            "MultiNodeRWO",
            "two nodes".into(),
            "Detect",
        );
        let a = Action::write(pv("finalizer"), Done::Nothing)
            .telling(Some((ev, Told::new("MultiNodeRWO", None))))
            .telling(None);
        assert_eq!(names(&a), ["MultiNodeRWO", "finalizer"]);
        assert!(a.steps[0].told.is_some() && a.steps[1].told.is_none());
    }

    #[test]
    fn what_a_write_did_is_told_after_it() {
        let ev = Write::event(
            Default::default(),
            false,
            "OverrideLifted",
            "lifted".into(),
            "Lift",
        );
        let a = Action::write(pv("override"), Done::Nothing)
            .told_after(ev, Told::new("OverrideLifted", None));
        assert_eq!(names(&a), ["override", "OverrideLifted"]);
        assert!(a.steps[0].told.is_none() && a.steps[1].told.is_some());
    }
}
