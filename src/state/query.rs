//! A read as a value: everything a job asks of the cluster, asked through `View::read`, the one
//! door of every read but the looks at memory (`View::sweep` and its kin). Each kind of read is a
//! type naming its answer (`Query::Answer`) and, where the answer can come from a cache, the
//! freshness it needs (`Fresh`); the door notes every read it serves (`reads`: the webhook's
//! "answered without reading" count), so no read can be made around that note. The mirror of
//! the writes' `Apply`.

use super::authorizer::Ask;
use super::network_fences::Seen;
use super::view::{FencesOf, Fresh, PodsIn, Readable, View};
use super::write::Door;
use crate::model::fence::NodeFence;
use crate::model::{Attachment, Pod};
use crate::rules::Fact;
use kube::api::DynamicObject;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// A read the view makes, and the answer its caller acts on.
pub trait Query: Send {
    type Answer;
    /// Read through `view`: called by `View::read` with the `Door` only `state` can make.
    fn ask(self, view: &View, door: Door) -> impl Future<Output = Self::Answer> + Send;
}

impl View {
    /// Ask `query`: the one door of every read but the looks at memory with no request
    /// (`sweep`, `held`, `held_naming`, `pod_seen`, `pod_absent_since`, `synced`). The
    /// read's own future, not one around it: a request's future holds each read it makes (and
    /// moves with it through the timeouts).
    pub fn read<Q: Query>(&self, query: Q) -> impl Future<Output = Q::Answer> + Send {
        super::reads::note();
        query.ask(self, Door(()))
    }
}

/// One object of kind `K` (`Readable::named`): from the cache or the apiserver as `fresh` asks;
/// a kind or namespace this live view does not watch is read live, and answers `Unknown` to a
/// cache read.
pub struct Named<'a, K> {
    pub(super) namespace: &'a str,
    pub(super) name: &'a str,
    pub(super) fresh: Fresh,
    pub(super) kind: PhantomData<fn() -> K>,
}

impl<K: Readable> Query for Named<'_, K> {
    type Answer = Fact<Arc<K>>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.get::<K>(self.namespace, self.name, self.fresh)
    }
}

/// The pods that name claim `.1` of namespace `.0` in their volumes (the pod-by-claim index
/// when pods are watched and the freshness allows it, else a LIST of the namespace).
pub struct PodsNaming<'a>(pub &'a str, pub &'a str, pub Fresh);

impl Query for PodsNaming<'_> {
    type Answer = Fact<Vec<Arc<Pod>>>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.pods_naming(self.0, self.1, self.2)
    }
}

/// The pods `.0` names that `.1` accepts (only those are held while a LIST's pages stream by).
pub struct Pods<'a, F: Fn(&Pod) -> bool>(pub PodsIn<'a>, pub F, pub Fresh);

impl<F: Fn(&Pod) -> bool + Send + Sync> Query for Pods<'_, F> {
    type Answer = Fact<Vec<Pod>>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.pods(self.0, self.1, self.2)
    }
}

/// The NodeFence incidents and records `.0` names (never watched: read live, since they decide
/// a release; `Fresh::Unbounded` waits as long as the apiserver takes).
pub struct Fences<'a>(pub FencesOf<'a>, pub Fresh);

impl Query for Fences<'_> {
    type Answer = Fact<Vec<Arc<NodeFence>>>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.fences(self.0, self.1)
    }
}

/// Namespace `.0` (never watched; a file holds none: `Missing`).
pub struct Namespace<'a>(pub &'a str, pub Fresh);

impl Query for Namespace<'_> {
    type Answer = Fact<Arc<crate::model::Namespace>>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.namespace(self.0, self.1)
    }
}

/// Node `.0`'s Lease renewTime as written (`None`: no Lease, or never renewed).
pub struct RenewTime<'a>(pub &'a str, pub Fresh);

impl Query for RenewTime<'_> {
    type Answer = Fact<Option<String>>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.lease_renew_time(self.0, self.1)
    }
}

/// The VolumeAttachments naming volume `.0` (a file holds none: empty).
pub struct Attachments<'a>(pub &'a str, pub Fresh);

impl Query for Attachments<'_> {
    type Answer = Fact<Vec<Attachment>>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.attachments(self.0, self.1)
    }
}

/// csi-addons NetworkFence `.0`, read live.
pub struct NetworkFence<'a>(pub &'a str);

impl Query for NetworkFence<'_> {
    type Answer = Fact<Seen>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.network_fence(self.0)
    }
}

/// coordination.k8s.io Lease `.1` of namespace `.0` as the apiserver has it now, whole (leader
/// election's compare-and-swap).
pub struct Lease<'a>(pub &'a str, pub &'a str);

impl Query for Lease<'_> {
    type Answer = Result<Option<k8s_openapi::api::coordination::v1::Lease>, kube::Error>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.lease(self.0, self.1)
    }
}

/// The webhook configuration of kind `.0` named `.1` as the apiserver has it now (never
/// cached: its resourceVersion guards the repair).
pub struct Registration<'a>(pub &'a str, pub &'a str);

impl Query for Registration<'_> {
    type Answer = Result<Option<DynamicObject>, kube::Error>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.registration(self.0, self.1)
    }
}

/// The PEM of the CA that signed volguard's serving certificate: `ca.crt` of Secret `.1` in
/// namespace `.0` (`None` until cert-manager has issued it).
pub struct ServingCa<'a>(pub &'a str, pub &'a str);

impl Query for ServingCa<'_> {
    type Answer = Result<Option<Vec<u8>>, kube::Error>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.serving_ca(self.0, self.1)
    }
}

/// Who the apiserver says the caller is (a SelfSubjectReview).
pub struct WhoAmI;

impl Query for WhoAmI {
    type Answer = Result<Option<String>, kube::Error>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.whoami()
    }
}

/// The authorizer's answer to `.0` within `.1` (`Err`: why there is none).
pub struct May<'a>(pub Ask<'a>, pub Duration);

impl Query for May<'_> {
    type Answer = Result<bool, String>;
    fn ask(self, view: &View, _: Door) -> impl Future<Output = Self::Answer> + Send {
        view.may(self.0, self.1)
    }
}
