//! Leader election on a coordination.k8s.io/v1 Lease, in the manner of client-go's: acquire when
//! free or expired, renew every `retry`, give up leadership when a renewal cannot be written
//! within the lease duration, and release on shutdown so a follower takes over at once.
//!
//! Why not a lease crate (kube-leader-election, kube-lease-manager): they build on k8s-openapi
//! versions other than ours (two copies of the API types, a second `links` key for the same
//! native library), and judge expiry by comparing the holder's `renewTime` with the local clock,
//! which clock skew turns into two leaders; this file is the client-go algorithm in 150 lines.

use crate::state::LeasePut;
use crate::state::query;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    pub identity: String,
    pub duration: Duration,
    pub retry: Duration,
    /// No successful renewal for this long ends leadership; each renewal is cut off at it.
    /// Must be shorter than `duration` (client-go's RenewDeadline).
    pub renew_deadline: Duration,
}

impl LeaseConfig {
    /// retry < renew deadline < duration, or leadership could outlive the lease in others' eyes.
    pub fn validate(&self) -> Result<(), String> {
        if self.renew_deadline >= self.duration {
            return Err(format!(
                "the lease renew deadline ({:?}) must be shorter than the lease duration ({:?})",
                self.renew_deadline, self.duration
            ));
        }
        if self.retry >= self.renew_deadline {
            return Err(format!(
                "the lease renew interval ({:?}) must be shorter than the renew deadline ({:?})",
                self.retry, self.renew_deadline
            ));
        }
        Ok(())
    }
}

/// The last Lease record this replica saw and when (by its own monotonic clock) it last changed.
/// Expiry is judged as client-go's leaderelection does: a holder's lease is expired when its
/// record has not changed for `leaseDurationSeconds` of *our* time. Comparing the holder's
/// `renewTime` with our wall clock would let clock skew between nodes make two leaders.
#[derive(Debug, Clone)]
pub struct Observed {
    record: LeaseSpec,
    at: std::time::Instant,
}

impl Observed {
    /// Note `spec` as seen at `now`; the clock restarts only when the record changed.
    pub fn observe(prev: Option<Observed>, spec: &LeaseSpec, now: std::time::Instant) -> Observed {
        match prev {
            Some(o) if o.record == *spec => o,
            _ => Observed {
                record: spec.clone(),
                at: now,
            },
        }
    }
}

/// Pure: may `me` take a lease whose record is `observed`, at local monotonic time `now`?
pub fn can_acquire(observed: Option<&Observed>, me: &str, now: std::time::Instant) -> bool {
    let Some(o) = observed else { return true };
    let holder = o.record.holder_identity.as_deref().unwrap_or("");
    if holder.is_empty() || holder == me {
        return true;
    }
    let duration = Duration::from_secs(o.record.lease_duration_seconds.unwrap_or(0).max(0) as u64);
    now.saturating_duration_since(o.at) > duration
}

pub struct Elector {
    view: crate::state::View,
    writer: crate::state::Writer,
    cfg: LeaseConfig,
    /// The Lease as we last wrote it: a renewal is then one conditional PUT (its resourceVersion
    /// guards against a concurrent taker), not a GET and a PUT.
    held: tokio::sync::Mutex<Option<Lease>>,
    /// The other holder's record as last seen, for expiry by our own clock.
    observed: std::sync::Mutex<Option<Observed>>,
}

impl Elector {
    pub fn new(view: crate::state::View, writer: crate::state::Writer, cfg: LeaseConfig) -> Self {
        Elector {
            view,
            writer,
            cfg,
            held: tokio::sync::Mutex::new(None),
            observed: std::sync::Mutex::new(None),
        }
    }

    /// One attempt to acquire or renew. Ok(true): we hold the lease now.
    pub async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let mut held = self.held.lock().await;
        if let Some(mut lease) = held.take() {
            let spec = lease.spec.clone().unwrap_or_default();
            let acquired = spec.acquire_time.map(|t| t.0).unwrap_or(now);
            lease.spec = Some(self.spec(acquired, now, spec.lease_transitions.unwrap_or(0)));
            match self.writer.apply(LeasePut(&lease)).await {
                Ok(written) => {
                    *held = Some(written);
                    return Ok(true);
                }
                // Changed under us (or gone): fall through to a fresh read.
                Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        let existing = self
            .view
            .read(query::Lease(&self.cfg.namespace, &self.cfg.name))
            .await?;
        let Some(mut lease) = existing else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(self.spec(now, now, 0)),
            };
            return match self.writer.apply(LeasePut(&lease)).await {
                Ok(written) => {
                    *held = Some(written);
                    Ok(true)
                }
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let mono = std::time::Instant::now();
        let free = {
            let mut o = self.observed.lock().unwrap_or_else(|e| e.into_inner());
            let seen = Observed::observe(o.take(), &spec, mono);
            let free = can_acquire(Some(&seen), &self.cfg.identity, mono);
            *o = Some(seen);
            free
        };
        if !free {
            return Ok(false);
        }
        let ours = spec.holder_identity.as_deref() == Some(self.cfg.identity.as_str());
        let acquired = if ours {
            spec.acquire_time.map(|t| t.0).unwrap_or(now)
        } else {
            now
        };
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
        lease.spec = Some(self.spec(acquired, now, transitions));
        // replace carries resourceVersion: a concurrent taker makes this a 409, not a split brain.
        match self.writer.apply(LeasePut(&lease)).await {
            Ok(written) => {
                *held = Some(written);
                Ok(true)
            }
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn spec(&self, acquired: Timestamp, renewed: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.cfg.identity.clone()),
            lease_duration_seconds: Some(self.cfg.duration.as_secs() as i32),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(renewed)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// Give the lease up (holder cleared) so a follower need not wait for expiry.
    pub async fn release(&self) {
        *self.held.lock().await = None;
        let Ok(Some(mut lease)) = self
            .view
            .read(query::Lease(&self.cfg.namespace, &self.cfg.name))
            .await
        else {
            return;
        };
        let Some(spec) = lease.spec.as_mut() else {
            return;
        };
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        match self.writer.apply(LeasePut(&lease)).await {
            Ok(_) => tracing::info!(lease = %self.cfg.name, "leadership released"),
            Err(e) => tracing::warn!(error = %e, "could not release the lease"),
        }
    }

    /// Block until we are leader.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(identity = %self.cfg.identity, lease = %self.cfg.name, "became leader");
                    return;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "lease acquisition failed"),
            }
            tokio::time::sleep(self.cfg.retry).await;
        }
    }

    /// Renew until no renewal has succeeded for the renew deadline; returns when leadership is
    /// lost. Each attempt is cut off at the deadline: kube's own read timeout is minutes, and a
    /// renewal that hangs must end leadership before a follower may take the lease.
    pub async fn hold(&self) {
        let mut last_ok = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(self.cfg.retry).await;
            let left = self.cfg.renew_deadline.saturating_sub(last_ok.elapsed());
            match tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => last_ok = tokio::time::Instant::now(),
                Ok(Ok(false)) => {
                    tracing::error!("lease taken by another replica");
                    return;
                }
                Ok(Err(e)) => tracing::warn!(error = %e, "lease renewal failed"),
                Err(_) => {
                    tracing::error!(deadline = ?self.cfg.renew_deadline, "lease renewal hung past the renew deadline");
                    return;
                }
            }
            // Stop before the next attempt could only end past the deadline.
            if last_ok.elapsed() + self.cfg.retry >= self.cfg.renew_deadline {
                tracing::error!("could not renew the lease in time");
                return;
            }
        }
    }
}

#[cfg(test)]
#[path = "leader_tests.rs"]
mod tests;
