//! Objects for unit tests, built one way in every test module (`#[cfg(test)]` only): a
//! constructor per kind, then the few setters the rules' tests vary.

use super::*;

pub fn pod(ns: &str, name: &str) -> Pod {
    let mut p = Pod::default();
    p.metadata.namespace = ns.into();
    p.metadata.name = name.into();
    p
}

pub fn pvc(ns: &str, name: &str) -> Pvc {
    let mut p = Pvc::default();
    p.metadata.namespace = ns.into();
    p.metadata.name = name.into();
    p
}

pub fn node(name: &str) -> Node {
    let mut n = Node::default();
    n.metadata.name = name.into();
    n
}

/// Metadata carrying these annotations (none: no map at all).
/// Node n1's incident `n1-1` in `phase`, with (`released`) the release alice confirmed.
pub fn incident(phase: fence::Phase, released: bool) -> fence::NodeFence {
    let mut f = fence::NodeFence {
        spec: fence::NodeFenceSpec {
            node: "n1".into(),
            release: released.then(|| fence::Release {
                by: "alice".into(),
                proof: "confirmed".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    f.metadata.name = "n1-1".into();
    f.status.phase = phase;
    f
}

pub fn annotated(pairs: &[(&str, &str)]) -> Meta {
    let mut m = Meta::default();
    if !pairs.is_empty() {
        m.annotations = Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
    }
    m
}

pub fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        username: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    }
}

impl Pod {
    /// Scheduled to `node`; `None` leaves it unscheduled.
    pub fn on(mut self, node: Option<&str>) -> Pod {
        self.spec.node_name = node.map(Into::into);
        self
    }
    pub fn in_phase(mut self, phase: &str) -> Pod {
        self.status.phase = Some(phase.into());
        self
    }
    pub fn with_uid(mut self, uid: &str) -> Pod {
        self.metadata.uid = uid.into();
        self
    }
    /// Mounts `claim` through a persistentVolumeClaim volume.
    pub fn mounting(mut self, claim: &str) -> Pod {
        self.spec.volumes.push(Volume {
            name: "v".into(),
            persistent_volume_claim: Some(ClaimSource {
                claim_name: claim.into(),
                read_only: false,
            }),
            ..Default::default()
        });
        self
    }
}

impl Pvc {
    pub fn with_modes(mut self, modes: &[&str]) -> Pvc {
        for m in modes {
            self.spec.access_modes.insert(m);
        }
        self
    }
}

impl Meta {
    pub fn deleted_at(&mut self, at: &str) {
        self.deletion_timestamp = Some(at.into());
    }
    pub fn set_finalizers(&mut self, finalizers: &[&str]) {
        self.finalizers = Some(finalizers.iter().map(|f| f.to_string()).collect());
    }
}

impl Node {
    /// Carries the out-of-service taint (`nodeshutdown`, NoExecute), as kubectl taint writes it.
    pub fn out_of_service(mut self) -> Node {
        self.spec.taints.push(Taint {
            key: OUT_OF_SERVICE_TAINT.into(),
            value: Some("nodeshutdown".into()),
            effect: "NoExecute".into(),
        });
        self
    }
}
