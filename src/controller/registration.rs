//! The registration, watched (docs/rules.md §9): the leader reads volguard's two webhook
//! configurations every `--registration-check-interval`, compares them with the rule table
//! (`registration::drift`), and reports each difference as `volguard_registration_drift`, a
//! Warning Event on the configuration, a log line and a line of `/readyz`'s detail; with
//! `--repair-registration` it also writes back what drifted (resourceVersion-guarded replace,
//! so a concurrent writer is never overwritten blind). With `--ca-secret` it keeps every entry's
//! `caBundle` equal to the serving certificate's CA on each check, with or without
//! `--repair-registration`: the CA is what makes the webhook reachable at all, and with it in
//! volguard's hands cert-manager's cainjector (which before 1.12 erased the matchConditions at
//! each injection) has no reason to touch the configurations.

use crate::controller::args::RegistrationArgs;
use crate::registration::drift::{self, Drift};
use crate::registration::webhooks::{self, CONFIGURATIONS};
use crate::runtime::MetricsRegistry;
use crate::state::Write;
use crate::state::query;
use kube::api::DynamicObject;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DriftLabels {
    pub webhook: String,
    pub field: &'static str,
}

/// What `/readyz` shows: the last check's drift, one line.
#[derive(Clone, Default)]
pub struct Status(Arc<Mutex<Option<String>>>);

impl Status {
    pub fn get(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    fn set(&self, v: Option<String>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = v;
    }
}

pub struct Watch {
    /// Reads the configurations and the serving CA live.
    view: crate::state::View,
    /// Repairs, and announces drift (Events under "volguard-controller"; a writer of its own, so
    /// its Events' series are its own).
    writer: crate::state::Writer,
    namespace: String,
    /// The failure policies volguard's registration must hold (policies, warn, forced Ignore).
    mode: webhooks::FailureMode,
    /// The force-delete entries' allow-list condition (the webhook's `--force-delete-allow-*`).
    allow: webhooks::AllowList,
    repair: bool,
    /// The Secret (in `namespace`) whose `ca.crt` the entries' caBundle is kept equal to.
    ca_secret: Option<String>,
    interval: Duration,
    drift: Family<DriftLabels, Gauge>,
    repairs: prometheus_client::metrics::counter::Counter,
    checks: prometheus_client::metrics::counter::Counter,
    status: Status,
    /// Drift already announced (an Event once per appearance, not per check).
    announced: Mutex<BTreeSet<(String, &'static str)>>,
}

fn reference(kind: &str, name: &str) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("admissionregistration.k8s.io/v1".into()),
        kind: Some(kind.into()),
        name: Some(name.into()),
        ..Default::default()
    }
}

/// The Event's action names what drifted (`CompareMatchConditions`, `CompareMissing,Rules`...):
/// the recorder folds Events of one action into a series that keeps its first note, so a
/// different drift must be a different action to be read.
fn action(drifts: &[Drift]) -> String {
    let mut fields: Vec<&str> = drifts.iter().map(|d| d.field).collect();
    fields.sort_unstable();
    fields.dedup();
    let named: Vec<String> = fields
        .iter()
        .map(|f| {
            let mut c = f.chars();
            c.next()
                .map(|h| h.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect();
    format!("Compare{}", named.join(","))
}

impl Watch {
    pub fn new(
        view: crate::state::View,
        writer: crate::state::Writer,
        args: &RegistrationArgs,
        metrics: &MetricsRegistry,
        status: Status,
    ) -> Watch {
        Watch {
            view,
            writer,
            namespace: crate::runtime::identity::install_namespace(),
            mode: webhooks::FailureMode {
                policies: args.policies_installed,
                enforcement: args.enforcement,
                force_ignore: args.force_failure_policy_ignore,
            },
            allow: args.force_delete_allow.list(),
            repair: args.repair_registration,
            ca_secret: args.ca_secret.clone().filter(|s| !s.is_empty()),
            interval: args.registration_check_interval,
            drift: metrics.add(
                "volguard_registration_drift",
                "1 while a live webhook entry differs from volguard's registration in field (missing, matchConditions, failurePolicy, rules, caBundle, path; failureMode: the configuration, in label webhook, was rendered for another failure mode or force-delete allow-list than the controller's flags)",
                Family::default(),
            ),
            repairs: metrics.add(
                "volguard_registration_repairs",
                "Webhook configurations written back by --repair-registration",
                Default::default(),
            ),
            checks: metrics.add(
                "volguard_registration_checks",
                "Comparisons of the live webhook configurations with volguard's that read both",
                Default::default(),
            ),
            status,
            announced: Mutex::new(BTreeSet::new()),
        }
    }

    pub async fn run(self: Arc<Self>) {
        if self.interval.is_zero() {
            return;
        }
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = self.check().await {
                // Unknown is not drift: keep what was last seen, say why.
                tracing::warn!(error = %e, "could not read the webhook configurations");
            }
        }
    }

    /// One comparison (and repair, when asked) of both configurations.
    pub async fn check(&self) -> Result<Vec<Drift>, kube::Error> {
        let mut expected = webhooks::expected(&self.namespace, &self.mode, &self.allow, true);
        if let Some(secret) = &self.ca_secret {
            // Unknown CA (not issued yet, or not readable): nothing filled, an empty caBundle
            // still reported; the configurations are still compared.
            match self
                .view
                .read(query::ServingCa(&self.namespace, secret))
                .await
            {
                Ok(Some(ca)) => drift::with_ca(&mut expected, &ca),
                Ok(None) => tracing::info!(secret = %secret,
                    "no ca.crt in the serving certificate's Secret yet: caBundle not filled"),
                Err(e) => tracing::warn!(secret = %secret, error = %e,
                    "could not read the serving certificate's CA: volguard's controller needs `get` on that \
                     Secret (Role volguard-controller-ca)"),
            }
        }
        let optional: Vec<&str> = webhooks::entries()
            .filter(|e| e.rwo_guard)
            .map(|e| e.name)
            .collect();
        let mut objects = Vec::new();
        let mut live = Vec::new();
        let mut noted = Vec::new();
        for (kind, name, entries) in CONFIGURATIONS {
            let mut o = self.view.read(query::Registration(kind, name)).await?;
            if let Some(obj) = &o {
                let annotation = |key: &str| {
                    obj.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(key))
                        .map(String::as_str)
                };
                let rendered = drift::rendered_for(
                    name,
                    annotation(webhooks::FAILURE_MODE_ANNOTATION),
                    &self.mode,
                    entries,
                )
                .and_then(|note| {
                    let allow = drift::allow_rendered_for(
                        name,
                        annotation(webhooks::ALLOW_ANNOTATION),
                        &self.allow,
                    )?;
                    Ok(note.into_iter().chain(allow).collect::<Vec<_>>())
                });
                match rendered {
                    Ok(note) => noted.extend(note),
                    Err(other) => {
                        // Neither compared nor repaired: its entries leave `expected` and it
                        // leaves `objects`; the difference itself is the drift reported.
                        noted.push(other);
                        expected.retain(|(n, _)| !entries.iter().any(|e| e.name == *n));
                        o = None;
                    }
                }
            }
            if let Some(o) = &o {
                let v = serde_json::to_value(o).unwrap_or_default();
                live.extend(v["webhooks"].as_array().cloned().unwrap_or_default());
            }
            objects.push((*kind, *name, o));
        }
        let mut drifts = drift::compare(&live, &expected, &optional);
        drifts.extend(noted);
        self.checks.inc();
        self.publish(&drifts, &objects).await;
        for (kind, name, o) in &objects {
            let Some(o) = o else { continue };
            let v = serde_json::to_value(o).unwrap_or_default();
            let Some(fixed) = drift::repaired(&v, &expected, &drifts, self.repair) else {
                continue;
            };
            let Ok(fixed) = serde_json::from_value::<DynamicObject>(fixed) else {
                continue;
            };
            // The resourceVersion read above goes with it: a concurrent write wins, and
            // the next check looks again.
            // A refused write is not a failed read: say what failed and go on checking.
            let repair = Write::Registration {
                kind: kind.to_string(),
                name: name.to_string(),
                fixed: Box::new(fixed),
            };
            if let Err(e) = self.writer.apply(repair).await {
                tracing::warn!(configuration = %name, error = %e,
                        "could not repair the webhook registration: volguard's controller needs `update` on \
                         its webhook configurations (the chart grants it with tls.certManager or \
                         registration.repair; the kustomize base grants it)");
                continue;
            }
            self.repairs.inc();
            tracing::warn!(configuration = %name, "repaired the webhook registration");
            let note = format!(
                "volguard put back its webhook registration ({})",
                drift::summary(&drifts)
            );
            let ev = Write::event(
                reference(kind, name),
                false,
                "RegistrationRepaired",
                note,
                "Repair",
            );
            if let Err(e) = self.writer.apply(ev).await {
                tracing::warn!(error = %e, "could not publish RegistrationRepaired event");
            }
        }
        Ok(drifts)
    }

    async fn publish(&self, drifts: &[Drift], objects: &[(&str, &str, Option<DynamicObject>)]) {
        let new = self.gauge(drifts);
        if new.is_empty() {
            return;
        }
        let summary = drift::summary(&new);
        tracing::warn!(drift = %summary, repair = self.repair, "the webhook registration differs from volguard's");
        for (kind, name, o) in objects {
            let entries: Vec<String> = o
                .as_ref()
                .map(|o| serde_json::to_value(o).unwrap_or_default())
                .and_then(|v| v["webhooks"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|w| w["name"].as_str().map(str::to_string))
                .collect();
            let mine: Vec<Drift> = new
                .iter()
                .filter(|d| {
                    d.webhook == *name
                        || entries.contains(&d.webhook)
                        || (d.field == "missing"
                            && CONFIGURATIONS.iter().any(|(k, _, es)| {
                                k == kind && es.iter().any(|e| e.name == d.webhook)
                            }))
                })
                .cloned()
                .collect();
            if !mine.is_empty() {
                self.announce(kind, name, &mine).await;
            }
        }
    }

    /// The drift gauges and the /readyz detail set to `drifts`; the drifts not seen before.
    fn gauge(&self, drifts: &[Drift]) -> Vec<Drift> {
        let now: BTreeSet<(String, &'static str)> = drifts
            .iter()
            .map(|d| (d.webhook.clone(), d.field))
            .collect();
        let new: Vec<Drift> = {
            let mut seen = self.announced.lock().unwrap_or_else(|e| e.into_inner());
            for (webhook, field) in seen.difference(&now) {
                self.drift
                    .get_or_create(&DriftLabels {
                        webhook: webhook.clone(),
                        field,
                    })
                    .set(0);
            }
            let new = drifts
                .iter()
                .filter(|d| !seen.contains(&(d.webhook.clone(), d.field)))
                .cloned()
                .collect();
            *seen = now;
            new
        };
        for d in drifts {
            self.drift
                .get_or_create(&DriftLabels {
                    webhook: d.webhook.clone(),
                    field: d.field,
                })
                .set(1);
        }
        self.status.set((!drifts.is_empty()).then(|| {
            format!(
                "registration drift: {}{}",
                drift::summary(drifts),
                if self.repair {
                    ""
                } else {
                    " (run the controller with --repair-registration, or re-apply volguard's manifests)"
                }
            )
        }));
        new
    }

    /// One Warning Event on configuration `kind`/`name` for its drifts.
    async fn announce(&self, kind: &str, name: &str, mine: &[Drift]) {
        let note = format!(
            "the webhook registration differs from volguard's: {}. {}",
            drift::summary(mine),
            if self.repair {
                "volguard puts it back."
            } else {
                "Re-apply volguard's manifests (helm upgrade, or kubectl apply -k), or run the controller with --repair-registration. An erased matchCondition sends every matching request to volguard; a Fail entry then refuses them while volguard is down."
            }
        );
        let ev = Write::event(
            reference(kind, name),
            true,
            "RegistrationDrift",
            note,
            &action(mine),
        );
        if let Err(e) = self.writer.apply(ev).await {
            tracing::warn!(error = %e, "could not publish RegistrationDrift event");
        }
    }
}
