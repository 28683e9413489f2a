//! The force-delete rule's allow-list (rules.md §2d row 7: `--force-delete-allow-user`,
//! `--force-delete-allow-group`, the chart's `forceDeleteAllow`) as one value for its three
//! readers: serve allows it whatever the pod, the registration answers it in the apiserver (one
//! condition of that rule's entries, and an annotation naming the list the configuration was
//! rendered for), and the controller's drift check expects both. Their flags are one struct.

use super::conditions::{NOT_ALLOW_LISTED, not_allow_listed};
use serde_json::{Value, json};

/// The identities the force-delete rule allows whatever the pod (rules.md §2d row 7:
/// `--force-delete-allow-user`, `--force-delete-allow-group`, the chart's `forceDeleteAllow`).
/// Registered as one more condition of that rule's entries, so the apiserver answers their force
/// deletes itself: a fencing controller's or a node agent's deletes never wait on volguard.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AllowList {
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub groups: Vec<String>,
}

/// The annotation on each configuration naming the allow-list its force-delete entries were
/// rendered for (`{"groups": [...], "users": [...]}`; absent: nobody). A controller whose own
/// `--force-delete-allow-*` differ leaves the configuration alone, as for its failure mode: during
/// a rollout the old controller must not put back an identity the new chart took out.
pub const ALLOW_ANNOTATION: &str = "volguard.io/force-delete-allow";

impl AllowList {
    /// `ALLOW_ANNOTATION`'s value, `None` when nobody is allow-listed (no annotation).
    pub fn annotation(&self) -> Option<String> {
        self.condition()
            .map(|_| json!({"groups": self.groups, "users": self.users}).to_string())
    }

    /// Read `ALLOW_ANNOTATION`'s value (absent: nobody).
    pub fn from_annotation(value: Option<&str>) -> Result<AllowList, String> {
        match value {
            None => Ok(AllowList::default()),
            Some(v) => serde_json::from_str(v).map_err(|e| e.to_string()),
        }
    }

    /// The condition, `None` when nobody is allow-listed (nothing to skip).
    pub fn condition(&self) -> Option<Value> {
        (!self.users.is_empty() || !self.groups.is_empty()).then(|| {
            json!({
                "name": NOT_ALLOW_LISTED,
                "expression": not_allow_listed(&self.users, &self.groups),
            })
        })
    }
}

/// The allow-list's flags, the same for serve, the controller and `manifests admission-dir`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct AllowListArgs {
    /// Users always allowed to force-delete running pods (e.g. a fencing controller); the
    /// registration answers them in the apiserver (rules.md §2d row 7).
    #[arg(
        long = "force-delete-allow-user",
        value_delimiter = ',',
        env = "VOLGUARD_FORCE_DELETE_ALLOW_USERS"
    )]
    pub users: Vec<String>,
    /// Groups always allowed to force-delete running pods.
    #[arg(
        long = "force-delete-allow-group",
        value_delimiter = ',',
        env = "VOLGUARD_FORCE_DELETE_ALLOW_GROUPS"
    )]
    pub groups: Vec<String>,
}

impl AllowListArgs {
    pub fn list(&self) -> AllowList {
        AllowList {
            users: self.users.clone(),
            groups: self.groups.clone(),
        }
    }
}
