//! The fencing controller's settings, from `volguard controller --fencing-*` and
//! `--fence-*` flags (checked at start, not at takeover).

use super::backend::{self, Backends};
use crate::model::fence::BackendKind;
use crate::rules::fencing::Limits;
use std::time::Duration;

/// The fencing controller's settings (`volguard controller --fencing-*`).
pub struct FencingConfig {
    pub interval: Duration,
    pub limits: Limits,
    /// The backends an `auto` incident tries, in order.
    pub chain: Vec<BackendKind>,
    pub backends: Backends,
    pub release_pods: crate::fencing::args::ReleasePods,
}

impl FencingConfig {
    pub fn from_args(a: &crate::fencing::args::FencingArgs) -> anyhow::Result<FencingConfig> {
        use anyhow::Context;
        let dur = |d: jiff::SignedDuration| Duration::try_from(d).unwrap_or(Duration::ZERO);
        let webhook = match &a.fence_webhook_url {
            None => None,
            Some(url) => Some(backend::WebhookConfig {
                url: url.clone(),
                ca_pem: match &a.fence_webhook_ca {
                    None => None,
                    Some(p) => {
                        Some(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?)
                    }
                },
                timeout: dur(a.fence_webhook_timeout),
            }),
        };
        let secret = match &a.networkfence_secret {
            None => None,
            Some(s) => Some(
                s.split_once('/')
                    .map(|(ns, n)| (ns.to_string(), n.to_string()))
                    .with_context(|| {
                        format!("--networkfence-secret {s:?}: expected NAMESPACE/NAME")
                    })?,
            ),
        };
        Ok(FencingConfig {
            interval: dur(a.fencing_interval).max(Duration::from_millis(200)),
            limits: Limits {
                partition_after: a.partition_after,
                max_unhealthy: a.max_unhealthy_nodes,
                max_concurrent: a.max_concurrent_fences.max(1),
            },
            chain: a.fence_backends.clone(),
            backends: Backends::new(
                webhook,
                backend::NetworkFenceConfig {
                    class: a.networkfence_class.clone(),
                    driver: a.networkfence_driver.clone(),
                    secret,
                    timeout: dur(a.networkfence_timeout),
                },
                dur(a.manual_fence_timeout),
            )?,
            release_pods: a.release_pods,
        })
    }
}
