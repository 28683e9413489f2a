//! `v1` Pod, pruned to what the rules read: placement, volumes, phase, and (for a status
//! write only) whether a container still runs.

use super::*;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    #[serde(default)]
    pub metadata: Meta,
    #[serde(default)]
    pub spec: PodSpec,
    #[serde(default)]
    pub status: PodStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Only its shape: where the RWO placement hint appends its preferred term (rules.md §2f).
    /// Boxed and dropped from caches: admission of a pod CREATE is its only reader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Box<AffinityShape>>,
    /// Where the pod may run, read by `explain pod` (it must not advise a node the pod cannot
    /// land on). Boxed and dropped from caches, as `affinity`: no rule reads it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<Box<SmallMap>>,
    /// Only how long the pod tolerates `node.kubernetes.io/unreachable` (fencing's forgiveness,
    /// rules.md §7): the list is folded while it decodes, never kept.
    #[serde(
        default,
        rename = "tolerations",
        deserialize_with = "wire::unreachable_toleration",
        serialize_with = "wire::as_unreachable_toleration",
        skip_serializing_if = "Tolerates::is_not_at_all"
    )]
    pub tolerates_unreachable: Tolerates,
}

/// How long a pod tolerates `node.kubernetes.io/unreachable` with effect NoExecute. Seconds in
/// a `u32` (136 years; a negative toleration is 0, as the taint manager reads it): eight bytes in
/// every pod, which admission futures carry (`a_decision_future_stays_small_whatever_the_rule`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tolerates {
    #[default]
    NotAtAll,
    Seconds(u32),
    Forever,
}

impl Tolerates {
    pub fn is_not_at_all(&self) -> bool {
        *self == Tolerates::NotAtAll
    }
}

/// The taint a partitioned node gets from the node lifecycle controller.
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct AffinityShape {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<NodeAffinityShape>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct NodeAffinityShape {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_during_scheduling_ignored_during_execution: Option<Vec<PreferredTerm>>,
    /// Read by `explain pod` only; the placement hint adds preferred terms by JSON patch and never
    /// writes this back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_during_scheduling_ignored_during_execution: Option<RequiredNodeSelector>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct RequiredNodeSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector_terms: Option<Vec<NodeSelectorTerm>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_expressions: Option<Vec<NodeSelectorRequirement>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_fields: Option<Vec<NodeSelectorRequirement>>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirement {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub operator: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

impl NodeSelectorRequirement {
    /// As the scheduler's NodeAffinity filter reads one requirement against `value` (the label's,
    /// or the field's), `None` when the node has none.
    fn matches(&self, value: Option<&str>) -> bool {
        let values = self.values.as_deref().unwrap_or_default();
        let int = |v: &str| v.parse::<i64>().ok();
        let bound = values.first().and_then(|b| int(b));
        match (self.operator.as_str(), value) {
            ("In", Some(v)) => values.iter().any(|x| x == v),
            ("NotIn", Some(v)) => !values.iter().any(|x| x == v),
            ("NotIn" | "DoesNotExist", None) => true,
            ("Exists", Some(_)) => true,
            ("Gt", Some(v)) => matches!((int(v), bound), (Some(v), Some(b)) if v > b),
            ("Lt", Some(v)) => matches!((int(v), bound), (Some(v), Some(b)) if v < b),
            _ => false,
        }
    }
}

impl NodeSelectorTerm {
    /// Every requirement holds; an empty term matches no node (as the scheduler has it).
    fn matches(&self, name: &str, labels: Option<&SmallMap>) -> bool {
        let exprs = self.match_expressions.as_deref().unwrap_or_default();
        let fields = self.match_fields.as_deref().unwrap_or_default();
        if exprs.is_empty() && fields.is_empty() {
            return false;
        }
        exprs
            .iter()
            .all(|r| r.matches(labels.and_then(|l| l.get(&r.key))))
            && fields.iter().all(|r| {
                r.matches(match r.key.as_str() {
                    "metadata.name" => Some(name),
                    _ => None,
                })
            })
    }
}

/// A preferred scheduling term, as far as the hint needs it: which hostnames it names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PreferredTerm {
    /// A NodeSelectorTerm, compared whole; an object like every other nested field.
    #[serde(default, deserialize_with = "wire::object_value")]
    pub preference: serde_json::Value,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<ClaimSource>,
    /// Only presence matters: the claim is `<pod>-<volume>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<Present>,
    /// The sources whose data ends with the pod (rules.md §2d row 4): any other source — a claim,
    /// NFS, iSCSI, FC, CSI, hostPath, a kind newer than this list — is storage that outlives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<Present>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<Present>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Present>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projected: Option<Present>,
    #[serde(
        default,
        rename = "downwardAPI",
        skip_serializing_if = "Option::is_none"
    )]
    pub downward_api: Option<Present>,
}

impl Volume {
    /// Its data ends with the pod: emptyDir, configMap, secret, projected or downwardAPI.
    pub fn ends_with_pod(&self) -> bool {
        self.persistent_volume_claim.is_none()
            && self.ephemeral.is_none()
            && (self.empty_dir.is_some()
                || self.config_map.is_some()
                || self.secret.is_some()
                || self.projected.is_some()
                || self.downward_api.is_some())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct ClaimSource {
    #[serde(default)]
    pub claim_name: String,
    /// `readOnly: true`: the pod mounts the claim read-only, so it takes no RWO lock (rules.md §2f).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
}

/// A JSON object whose content is irrelevant (decodes from any object, encodes as `{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct Present {}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(remote = "Self")]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Box<str>>,
    /// The latest `containerStatuses[].state.terminated.finishedAt`, kept as it was written
    /// (decoded without a vector per pod: admission decodes every pod it reviews).
    #[serde(
        default,
        rename = "containerStatuses",
        deserialize_with = "wire::latest_finished_at",
        serialize_with = "wire::as_finished_container",
        skip_serializing_if = "Option::is_none"
    )]
    pub finished_at: Option<String>,
    /// The latest `conditions[].lastTransitionTime`.
    #[serde(
        default,
        rename = "conditions",
        deserialize_with = "wire::latest_transition",
        serialize_with = "wire::as_condition",
        skip_serializing_if = "Option::is_none"
    )]
    pub last_transition: Option<String>,
}

impl Pod {
    pub fn node_name(&self) -> Option<&str> {
        self.spec.node_name.as_deref().filter(|n| !n.is_empty())
    }
    /// rules.md "scheduled pod": `spec.nodeName != ""`.
    pub fn is_scheduled(&self) -> bool {
        self.node_name().is_some()
    }
    /// rules.md "terminal pod": phase Succeeded or Failed.
    pub fn is_terminal(&self) -> bool {
        matches!(self.status.phase.as_deref(), Some("Succeeded" | "Failed"))
    }
    /// rules.md "shut-down pod": being deleted with grace period 0.
    pub fn is_shut_down(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
            && self.metadata.deletion_grace_period_seconds == Some(0)
    }
    pub fn phase(&self) -> &str {
        self.status.phase.as_deref().unwrap_or("Unknown")
    }
    /// When a terminal pod stopped using its volumes: its last container's `finishedAt`, else
    /// its latest condition transition (rules.md §4). `None` for running pods or when unrecorded.
    pub fn ended_at(&self) -> Option<jiff::Timestamp> {
        if !self.is_terminal() {
            return None;
        }
        let parse = |t: &Option<String>| t.as_deref().and_then(|t| t.parse().ok());
        parse(&self.status.finished_at).or_else(|| parse(&self.status.last_transition))
    }
    /// Whether the pod's nodeSelector and required node affinity allow the node `name` with
    /// `labels` (the scheduler's NodeAffinity filter; taints and resources aside).
    pub fn may_run_on(&self, name: &str, labels: Option<&SmallMap>) -> bool {
        let selected = self.spec.node_selector.as_deref().is_none_or(|sel| {
            sel.iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        });
        let required = self
            .spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            });
        selected
            && required.is_none_or(|r| {
                r.node_selector_terms
                    .as_deref()
                    .unwrap_or_default()
                    .iter()
                    .any(|t| t.matches(name, labels))
            })
    }

    /// Whether the pod constrains its nodes at all (`may_run_on` needs the node's labels).
    pub fn has_node_constraints(&self) -> bool {
        self.spec
            .node_selector
            .as_ref()
            .is_some_and(|s| !s.is_empty())
            || self
                .spec
                .affinity
                .as_ref()
                .and_then(|a| a.node_affinity.as_ref())
                .is_some_and(|n| {
                    n.required_during_scheduling_ignored_during_execution
                        .is_some()
                })
    }

    /// For caches: only a terminal pod's end time is ever read.
    pub fn prune_status(&mut self) {
        self.spec.affinity = None;
        self.spec.node_selector = None;
        if !self.is_terminal() {
            self.status.finished_at = None;
            self.status.last_transition = None;
        }
    }
}

// ---------------------------------------------------------------- PVC

/// A pod's containers as the attach/detach controller reads them (rules.md §2h): it treats a
/// terminating pod none of whose containers runs (each `terminated` or `waiting`) as stopped and
/// detaches its volumes. Decoded only for a `pods/status` review.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ContainerStates {
    #[serde(default)]
    status: Option<ContainerStatesStatus>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ContainerStatesStatus {
    #[serde(default, rename = "initContainerStatuses")]
    init_container_statuses: Option<Vec<ContainerStateOf>>,
    #[serde(default, rename = "containerStatuses")]
    container_statuses: Option<Vec<ContainerStateOf>>,
    #[serde(default, rename = "ephemeralContainerStatuses")]
    ephemeral_container_statuses: Option<Vec<ContainerStateOf>>,
}

/// One of a pod's three container status lists (upstream's `IsPodTerminated` reads all three).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerList {
    Init,
    Regular,
    Ephemeral,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ContainerStateOf {
    #[serde(default)]
    state: Option<ContainerStateKeys>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ContainerStateKeys {
    #[serde(default)]
    waiting: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    terminated: Option<serde::de::IgnoredAny>,
}

impl ContainerStates {
    /// Some container runs: its state is neither `terminated` nor `waiting` (upstream's
    /// `notRunning`, inverted). No statuses: none runs.
    pub fn any_running(&self) -> bool {
        self.any_running_in(ContainerList::Regular)
    }

    /// `any_running` over one list: `status.initContainerStatuses`, `status.containerStatuses`
    /// or `status.ephemeralContainerStatuses`.
    pub fn any_running_in(&self, list: ContainerList) -> bool {
        let statuses = self.status.as_ref().and_then(|s| match list {
            ContainerList::Init => s.init_container_statuses.as_deref(),
            ContainerList::Regular => s.container_statuses.as_deref(),
            ContainerList::Ephemeral => s.ephemeral_container_statuses.as_deref(),
        });
        statuses.unwrap_or_default().iter().any(|c| {
            c.state
                .as_ref()
                .is_none_or(|s| s.waiting.is_none() && s.terminated.is_none())
        })
    }
}
