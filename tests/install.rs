//! volguard installed the way operators install it: `helm install` of charts/volguard into a
//! namespace that is not `volguard-system`, on a cluster with kube-controller-manager,
//! kube-scheduler, kwok nodes and cert-manager (controller + cainjector). The apiserver reaches
//! the webhook through the chart's Service (`--enable-aggregator-routing`: Service →
//! EndpointSlice → pod IP), and the pod is the chart's own hostNetwork pod on a kwok node whose
//! address is this machine's, so its port is where the `volguard serve` below listens, started
//! with exactly the arguments the chart rendered. A real Prometheus scrapes serve and controller,
//! and every panel of the Grafana dashboard is queried. One test per scenario, each printing
//! `scenario NAME: ok`; `make e2e` runs them on the first Kubernetes version.

#[path = "install/release.rs"]
mod release;
mod support;

use support::harness::{self, ControlPlane, Proc, Profile};
use support::objects::*;
use support::shared::Body;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const NS: &str = "platform-storage";
const RELEASE: &str = "volguard";
/// The node the chart's pods are pinned to: its InternalIP is this machine's address.
const OPS_NODE: &str = "ops-0";

struct Shared {
    cp: ControlPlane,
    admin_kubeconfig: PathBuf,
    host_ip: String,
    /// The ports the chart was installed with (hostNetwork: they are this machine's).
    webhook_port: u16,
    webhook_probe: u16,
    controller_probe: u16,
    serve: Option<Proc>,
    controller: Option<Proc>,
    prometheus: Option<(Proc, u16)>,
    certs: PathBuf,
    _secret_sync: tokio::task::JoinHandle<()>,
}

static CLUSTER: std::sync::Mutex<Option<Shared>> = std::sync::Mutex::new(None);

fn helm_bin() -> PathBuf {
    std::env::var_os("VOLGUARD_HELM")
        .map(PathBuf::from)
        .expect("VOLGUARD_HELM is not set: run the e2e tests with `make e2e`")
}

/// Upgrades here run as the README's (which warns against `--reuse-values`). Needs no cluster.
#[test]
fn upgrades_use_the_values_flag_the_readme_recommends() {
    let args = release::upgrade_args(Vec::new(), "enforcement=deny");
    assert!(!args.iter().any(|a| a == "--reuse-values"), "{args:?}");
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("README.md");
    let recommended: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("helm upgrade "))
        .flat_map(|l| l.split_whitespace())
        .filter(|w| w.ends_with("-values"))
        .collect();
    assert!(!recommended.is_empty(), "the README shows an upgrade");
    for flag in recommended {
        assert!(args.iter().any(|a| a == flag), "{flag} not in {args:?}");
    }
}

fn chart() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("charts/volguard")
}

/// This machine's address on its default route: the address a pod on `ops-0` has.
fn host_ip() -> String {
    for probe in ["192.0.2.1:9", "10.255.255.1:9", "203.0.113.1:9"] {
        if let Ok(s) = std::net::UdpSocket::bind("0.0.0.0:0")
            && s.connect(probe).is_ok()
            && let Ok(a) = s.local_addr()
            && !a.ip().is_loopback()
            && !a.ip().is_unspecified()
        {
            return a.ip().to_string();
        }
    }
    panic!(
        "no non-loopback IPv4 address: the install e2e needs one for the apiserver to dial the webhook pod"
    )
}

async fn start_cluster() -> Shared {
    let mut cp =
        ControlPlane::start_with(Profile::Cluster, &["--enable-aggregator-routing=true"]).await;
    let version = cp.admin().await.apiserver_version().await.expect("version");
    println!(
        "\nkube-apiserver {} (aggregator routing), kube-controller-manager, kube-scheduler, kwok nodes, cert-manager",
        version.git_version
    );
    cp.install_cert_manager_crds().await;
    cp.start_cert_manager_processes();
    let host_ip = host_ip();
    cp.kwok_node_at(OPS_NODE, &host_ip).await;
    cp.kwok_node("kwok-1").await;
    let admin_kubeconfig = cp.kubeconfig_file("helm", "helm-admin", &["system:masters"]);
    let certs = cp.dir.path().join("chart-certs");
    std::fs::create_dir_all(&certs).expect("certs dir");
    let secrets = Api::<Secret>::namespaced(cp.admin().await, NS);
    let out = certs.clone();
    let secret_sync = tokio::spawn(async move {
        loop {
            harness::sync_secret_once(&secrets, &out).await;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    let mut s = Shared {
        cp,
        admin_kubeconfig,
        host_ip,
        webhook_port: harness::free_port(),
        webhook_probe: harness::free_port(),
        controller_probe: harness::free_port(),
        serve: None,
        controller: None,
        prometheus: None,
        certs,
        _secret_sync: secret_sync,
    };
    s.install().await;
    s.eventually(
        "cert-manager issues the chart's serving certificate",
        Duration::from_secs(90),
        || {
            let p = s.certs.join("tls.crt");
            async move { p.exists().then_some(()) }
        },
    )
    .await;
    s.start_serve().await;
    s.start_controller().await;
    namespace(&s.cp.admin().await, "team").await;
    s.wait_serving("team").await;
    s
}

async fn prepare(s: &mut Shared) {
    if s.serve
        .as_mut()
        .is_none_or(|p| !matches!(p.child.try_wait(), Ok(None)))
    {
        s.start_serve().await;
    }
}

fn scenario(name: &str, f: impl for<'a> FnOnce(&'a mut Shared) -> Body<'a>) {
    support::shared::scenario(
        &CLUSTER,
        || Box::pin(start_cluster()),
        |s| Box::pin(prepare(s)),
        |s| s.cp.logs(),
        name,
        f,
    );
}

fn webhook_configs_text(v: &[Value]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

async fn events_about(c: &kube::Client, ns: &str, kind: &str, name: &str) -> Vec<Event> {
    Api::<Event>::namespaced(c.clone(), ns)
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| {
            e.reporting_controller.as_deref() == Some("volguard.io/webhook")
                && e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                })
        })
        .collect()
}

/// A running pod with a bound ReadWriteOnce claim, placed by the scheduler.
async fn running_pod_with_claim(s: &Shared, ns: &str, name: &str) {
    let c = s.cp.admin().await;
    pv(&c, &format!("{ns}-{name}-pv"), &[]).await;
    pvc(
        &c,
        ns,
        &format!("{name}-data"),
        Some(&format!("{ns}-{name}-pv")),
    )
    .await
    .expect("claim");
    pod(&c, ns, name, None, &[&format!("{name}-data")])
        .await
        .expect("pod");
    let pods = Api::<Pod>::namespaced(c, ns);
    let name = name.to_string();
    s.eventually(&format!("{name} Running"), Duration::from_secs(60), || {
        let pods = pods.clone();
        let name = name.clone();
        async move {
            let p = pods.get(&name).await.ok()?;
            (p.status?.phase.as_deref() == Some("Running")).then_some(())
        }
    })
    .await;
}

#[test]
#[ignore = "needs the control plane, helm and cert-manager: make e2e"]
fn helm_install_into_another_namespace() {
    scenario("helm-install", |s| {
        Box::pin(async move {
            let status: Value =
                serde_json::from_str(&s.helm(&["status", RELEASE, "-n", NS, "-o", "json"]))
                    .expect("status json");
            assert_eq!(status["info"]["status"], "deployed", "{status}");
            let manifest = s.helm(&["get", "manifest", RELEASE, "-n", NS]);
            assert!(
                !manifest.contains("volguard-system"),
                "the release names volguard-system"
            );
            let list: Value = serde_json::from_str(&s.helm(&["list", "-n", NS, "-o", "json"]))
                .expect("list json");
            println!(
                "helm status: {}, chart {}, {} objects, none naming volguard-system",
                status["info"]["status"],
                list[0]["chart"],
                manifest.matches("\nkind: ").count() + 1
            );
            let c = s.cp.admin().await;
            // volguard's controller filled the CA from the serving Secret's ca.crt (no cainjector
            // annotation: cainjector before 1.12 erased the matchConditions at each injection).
            let ca = Api::<Secret>::namespaced(c.clone(), NS)
                .get("volguard-webhook-tls")
                .await
                .expect("serving Secret")
                .data
                .and_then(|mut d| d.remove("ca.crt"))
                .expect("cert-manager wrote ca.crt");
            let ca = {
                use base64::Engine;
                base64::engine::general_purpose::STANDARD.encode(&ca.0)
            };
            let configs: Vec<Value> = [
                "mutatingwebhookconfigurations/volguard-mutating",
                "validatingwebhookconfigurations/volguard-validating",
            ]
            .iter()
            .map(|p| {
                let text = Command::new(made_kubectl())
                    .args(["get", p, "-o", "json", "--kubeconfig"])
                    .arg(&s.admin_kubeconfig)
                    .output()
                    .expect("kubectl");
                serde_json::from_slice(&text.stdout).expect("config json")
            })
            .collect();
            for cfg in &configs {
                for w in cfg["webhooks"].as_array().expect("webhooks") {
                    assert!(
                        w["clientConfig"]["caBundle"]
                            .as_str()
                            .is_some_and(|b| !b.is_empty()),
                        "{}: no caBundle injected",
                        w["name"]
                    );
                    assert_eq!(
                        w["clientConfig"]["caBundle"], ca,
                        "{}: caBundle is not the serving Secret's ca.crt",
                        w["name"]
                    );
                    assert_eq!(w["clientConfig"]["service"]["namespace"], NS);
                }
                assert!(
                    cfg["metadata"]["annotations"]
                        .get("cert-manager.io/inject-ca-from")
                        .is_none(),
                    "{}: cainjector is asked to inject",
                    cfg["metadata"]["name"]
                );
            }
            assert!(!webhook_configs_text(&configs).contains("volguard-system"));
            let conditions: usize = configs
                .iter()
                .flat_map(|c| c["webhooks"].as_array().cloned().unwrap_or_default())
                .map(|w| w["matchConditions"].as_array().map_or(0, Vec::len))
                .sum();
            // What volguard registers for the entries present (the RWO entries may be left out).
            let want: usize = configs
                .iter()
                .flat_map(|c| c["webhooks"].as_array().cloned().unwrap_or_default())
                .filter_map(|w| {
                    volguard::registration::webhooks::entries().find(|e| w["name"] == e.name)
                })
                .map(|e| e.conditions.len())
                .sum();
            assert_eq!(conditions, want, "matchConditions after the CA was filled");
            assert!(want > 0);
            // cert-manager 1.11.5's cainjector runs all along (it erased them at each injection
            // when the configurations carried its annotation, every few seconds): 30 s of
            // watching, the conditions stay and nobody rewrites the configurations.
            let validating = Api::<ValidatingWebhookConfiguration>::all(c.clone());
            let before = validating
                .get("volguard-validating")
                .await
                .expect("configuration")
                .metadata
                .resource_version;
            for _ in 0..15 {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let live = validating
                    .get("volguard-validating")
                    .await
                    .expect("configuration");
                let erased: Vec<String> = live
                    .webhooks
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|w| {
                        volguard::registration::webhooks::entries()
                            .any(|e| e.name == w.name && !e.conditions.is_empty())
                            && w.match_conditions.as_ref().is_none_or(Vec::is_empty)
                    })
                    .map(|w| w.name)
                    .collect();
                assert!(erased.is_empty(), "matchConditions erased on {erased:?}");
                assert_eq!(
                    live.metadata.resource_version, before,
                    "volguard-validating rewritten while nothing changed"
                );
            }
            println!(
                "caBundle filled by the controller from volguard-webhook-tls's ca.crt; {conditions} matchConditions \
                 intact over 30 s with cert-manager 1.11.5's cainjector running"
            );
            // The chart's pod is where the apiserver sends requests: its IP is this machine's.
            let pods = Api::<Pod>::namespaced(c.clone(), NS)
                .list(&ListParams::default().labels("app.kubernetes.io/name=volguard-webhook"))
                .await
                .expect("pods");
            let ip = pods.items[0]
                .status
                .as_ref()
                .and_then(|st| st.pod_ip.clone());
            assert_eq!(
                ip.as_deref(),
                Some(s.host_ip.as_str()),
                "hostNetwork pod IP"
            );
            // The controller took its Lease in the release namespace (POD_NAMESPACE, no flag).
            let lease = Api::<Lease>::namespaced(c.clone(), NS);
            s.eventually(
                "the controller holds its Lease in platform-storage",
                Duration::from_secs(30),
                || {
                    let lease = lease.clone();
                    async move {
                        let l = lease.get("volguard-controller").await.ok()?;
                        l.spec?
                            .holder_identity
                            .filter(|h| h.starts_with("volguard-controller-e2e"))
                            .map(|_| ())
                    }
                },
            )
            .await;
            // The mutating webhook, called through the Service.
            let created = pvc(&c, "team", "fresh", None).await.expect("pvc");
            assert!(
                finalizers(&created).contains(&"kubernetes.io/pvc-protection".to_string()),
                "{:?}",
                finalizers(&created)
            );
            println!(
                "apiserver -> Service volguard-webhook.{NS} -> {}:{} (chart pod) -> volguard serve: finalizer added, terminating-claim pod refused",
                s.host_ip, s.webhook_port
            );
        })
    });
}

fn made_kubectl() -> PathBuf {
    let dir = std::env::var_os("VOLGUARD_CONTROLPLANE_DIR")
        .map(PathBuf::from)
        .expect("VOLGUARD_CONTROLPLANE_DIR is not set: make e2e");
    dir.join("kubectl")
}

#[test]
#[ignore = "needs the control plane, helm and cert-manager: make e2e"]
fn refusals_and_warnings_are_events() {
    scenario("audit-events", |s| {
        Box::pin(async move {
            let c = s.cp.admin().await;
            namespace(&c, "audit").await;
            running_pod_with_claim(s, "audit", "db-0").await;
            let pods = Api::<Pod>::namespaced(c.clone(), "audit");
            // The chart installs the policies where the apiserver serves them: a force delete is
            // refused by the apiserver itself, and leaves no Event (its audit record instead).
            let (code, msg) = denial(pods.delete("db-0", &force()).await.expect_err("refused"));
            assert_eq!(code, 403);
            assert!(
                msg.contains("ValidatingAdmissionPolicy 'volguard-force-delete'"),
                "the default install has the policies: {msg}"
            );
            // A finalizer strip of the claim the running pod uses is the webhook's alone (it reads
            // the pods): refused, and a loop of them makes one Event with a count.
            let pvcs = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "audit");
            let strip = kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}}));
            for _ in 0..12 {
                let e = pvcs
                    .patch("db-0-data", &kube::api::PatchParams::default(), &strip)
                    .await
                    .expect_err("refused");
                assert_eq!(denial(e).0, 403);
            }
            let ev = s
                .eventually(
                    "one Denied Event on the claim, its series counting the repeats",
                    Duration::from_secs(40),
                    || {
                        let c = c.clone();
                        async move {
                            let evs =
                                events_about(&c, "audit", "PersistentVolumeClaim", "db-0-data")
                                    .await;
                            let denied: Vec<_> = evs
                                .iter()
                                .filter(|e| e.reason.as_deref() == Some("Denied"))
                                .collect();
                            (denied.len() == 1
                                && denied[0].series.as_ref().is_some_and(|s| s.count >= 12))
                            .then(|| denied[0].clone())
                        }
                    },
                )
                .await;
            // `kubectl describe pvc` lists it: the reference carries the claim's UID.
            let uid = pvcs.get("db-0-data").await.expect("claim").metadata.uid;
            assert_eq!(
                ev.regarding.as_ref().and_then(|r| r.uid.clone()),
                uid,
                "the Event's reference names the claim's UID"
            );
            let described = Command::new(made_kubectl())
                .args([
                    "describe",
                    "pvc",
                    "db-0-data",
                    "-n",
                    "audit",
                    "--kubeconfig",
                ])
                .arg(&s.admin_kubeconfig)
                .output()
                .expect("kubectl describe");
            let described = String::from_utf8_lossy(&described.stdout);
            assert!(
                described.contains("Denied") && described.contains("pvc-protection"),
                "kubectl describe pvc db-0-data does not show the refusal:\n{described}"
            );
            println!(
                "kubectl describe pvc db-0-data: {}",
                described
                    .lines()
                    .find(|l| l.contains("Denied"))
                    .unwrap_or_default()
                    .trim()
            );
            println!(
                "Event {}: reason {:?}, action {:?}, count {}, note {:?}",
                ev.metadata.name.unwrap_or_default(),
                ev.reason.unwrap_or_default(),
                ev.action.unwrap_or_default(),
                ev.series.map_or(1, |s| s.count),
                ev.note.unwrap_or_default()
            );
            // A pod that does not exist yet: the Event is on its namespace.
            let claim = "held";
            pvc(&c, "audit", claim, None).await.expect("claim");
            pod(&c, "audit", "holder", Some(OPS_NODE), &[claim])
                .await
                .expect("holder");
            Api::<PersistentVolumeClaim>::namespaced(c.clone(), "audit")
                .delete(claim, &DeleteParams::default())
                .await
                .expect("delete claim");
            let e = pod(&c, "audit", "late", None, &[claim])
                .await
                .expect_err("refused");
            assert_eq!(denial(e).0, 403);
            s.eventually(
                "a Denied Event on namespace audit",
                Duration::from_secs(30),
                || {
                    let c = c.clone();
                    async move {
                        let evs = events_about(&c, "audit", "Namespace", "audit").await;
                        evs.iter()
                            .any(|e| {
                                e.reason.as_deref() == Some("Denied")
                                    && e.note
                                        .as_deref()
                                        .is_some_and(|n| n.contains("pod-on-terminating-claim"))
                            })
                            .then_some(())
                    }
                },
            )
            .await;
            // Warn mode through the chart: helm upgrade, the webhook restarted with the
            // Deployment's new args (as the rollout would), the force delete let through.
            s.upgrade("enforcement=force-delete=warn").await;
            running_pod_with_claim(s, "audit", "db-1").await;
            pods.delete("db-1", &force())
                .await
                .expect("warn mode lets it through");
            s.eventually("a WouldDeny Event on db-1", Duration::from_secs(30), || {
                let c = c.clone();
                async move {
                    let evs = events_about(&c, "audit", "Pod", "db-1").await;
                    evs.iter()
                        .any(|e| e.reason.as_deref() == Some("WouldDeny"))
                        .then_some(())
                }
            })
            .await;
            println!(
                "warn mode (helm upgrade --set enforcement=force-delete=warn): force delete allowed, WouldDeny Event recorded"
            );
            // Warn never blocks: every rule that can warn in warn, then volguard stopped (an
            // outage during the first rollout). The warned entries are Ignore and the policies
            // Warn, so a force delete of a running pod is not refused. With drift repair on, the
            // controller (given the same --enforcement) keeps them Ignore. cert-manager 1.11's
            // cainjector runs, but the configurations carry no annotation of its: it no longer
            // erases their matchConditions, so a claim update meets no Fail entry it is not for.
            s.upgrade("registration.repair=true").await;
            s.upgrade("enforcement=warn").await;
            let configs = Api::<ValidatingWebhookConfiguration>::all(c.clone());
            let warned_ignore = || {
                let configs = configs.clone();
                async move {
                    let live = configs.get("volguard-validating").await.ok()?;
                    let hooks = live.webhooks.unwrap_or_default();
                    let mut warned = 0;
                    for w in &hooks {
                        let e = volguard::registration::webhooks::entries()
                            .find(|e| e.name == w.name)?;
                        if e.rule.def().warnable {
                            if w.failure_policy.as_deref() != Some("Ignore") {
                                return None;
                            }
                            warned += 1;
                        }
                    }
                    (warned > 0).then_some(warned)
                }
            };
            let warned = s
                .eventually(
                    "every warnable entry Ignore",
                    Duration::from_secs(30),
                    warned_ignore,
                )
                .await;
            // Two repair periods later (10 s each) they are still Ignore.
            tokio::time::sleep(Duration::from_secs(21)).await;
            assert_eq!(
                warned_ignore().await,
                Some(warned),
                "drift repair kept the warned entries Ignore"
            );
            running_pod_with_claim(s, "audit", "db-2").await;
            if let Some(mut p) = s.serve.take() {
                p.kill();
            }
            // Each warnable rule a first rollout meets, with volguard stopped: what its entry
            // (Ignore) or its policy (bound [Audit]) would refuse in deny passes.
            pod(&c, "audit", "late-2", None, &["held"])
                .await
                .expect("warn, volguard down: a pod on a terminating claim is not refused (pod-on-terminating-claim)");
            pods.delete("db-2", &force())
                .await
                .expect("warn, volguard down: the force delete is not refused (force-delete)");
            // A claim update meets delete-protection's entry too, which cannot warn and stays
            // Fail: its matchConditions keep it to updates of the protection annotation, and
            // nothing erases them any more (cainjector is not asked to inject).
            let live = configs
                .get("volguard-validating")
                .await
                .expect("configuration");
            // Each Fail entry holds the conditions volguard registers for it (fence-record has
            // none: it meets only NodeFences).
            let erased: Vec<String> = live
                .webhooks
                .unwrap_or_default()
                .into_iter()
                .filter(|w| {
                    w.failure_policy.as_deref() == Some("Fail")
                        && volguard::registration::webhooks::entries()
                            .any(|e| e.name == w.name && !e.conditions.is_empty())
                        && w.match_conditions.as_ref().is_none_or(Vec::is_empty)
                })
                .map(|w| w.name)
                .collect();
            assert!(
                erased.is_empty(),
                "Fail entries lost their matchConditions with cainjector running: {erased:?}"
            );
            let claim_updates = {
                let claims = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "audit");
                let lock = volguard::rules::rwo_lock::RWO_LOCK.replace('/', "~1");
                let remove_lock: json_patch::Patch = serde_json::from_value(json!([
                    {"op": "remove", "path": format!("/metadata/annotations/{lock}")}
                ]))
                .expect("patch");
                claims
                    .patch("db-2-data", &kube::api::PatchParams::default(), &kube::api::Patch::<()>::Json(remove_lock))
                    .await
                    .expect("warn, volguard down: removing the RWO lock of a claim is not refused (claim-metadata)");
                claims
                    .patch(
                        "db-2-data",
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(json!({"metadata": {"finalizers": null}})),
                    )
                    .await
                    .expect("warn, volguard down: stripping a claim's finalizer is not refused (finalizer-removal)");
                "the RWO lock removed and the finalizer stripped from a claim"
            };
            println!(
                "warn mode (enforcement=warn), drift repair on: {warned} warnable entries Ignore and kept so; with \
                 volguard stopped, none refused: a pod on a terminating claim, a force delete of a running pod; \
                 {claim_updates}"
            );
            // The rollout back to deny, the old (warn) controller still leading for two check
            // periods: it leaves the configuration rendered for deny alone and says so (drift
            // failureMode), where it used to put its Ignore back and take the field from Helm,
            // whose next upgrade then failed on a server-side apply conflict.
            s.helm_upgrade("enforcement=deny");
            tokio::time::sleep(Duration::from_secs(21)).await;
            let live = configs
                .get("volguard-validating")
                .await
                .expect("configuration");
            let weakened: Vec<String> = live
                .webhooks
                .unwrap_or_default()
                .into_iter()
                .filter(|w| {
                    volguard::registration::webhooks::entries().any(|e| {
                        e.name == w.name
                            && e.rule.def().warnable
                            && w.failure_policy.as_deref() == Some("Ignore")
                            && e.failure_policy(
                                &volguard::registration::webhooks::FailureMode::policies(true),
                            ) == "Fail"
                    })
                })
                .map(|w| w.name)
                .collect();
            assert!(
                weakened.is_empty(),
                "the old controller put warn back on {weakened:?}"
            );
            let metrics = metrics_text(s.controller_probe).await;
            assert!(
                metrics
                    .lines()
                    .any(|l| l.starts_with("volguard_registration_drift{")
                        && l.contains("field=\"failureMode\"")
                        && l.contains("volguard-validating")
                        && l.ends_with(" 1")),
                "the old controller reports the configuration rendered for another mode:\n{}",
                metrics
                    .lines()
                    .filter(|l| l.starts_with("volguard_registration_drift"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            println!(
                "rollout warn -> deny with the warn controller still leading: the deny configuration left alone, drift failureMode reported"
            );
            s.restart().await;
            s.upgrade("registration.repair=false").await;
        })
    });
}

#[test]
#[ignore = "needs the control plane, helm, cert-manager and prometheus: make e2e"]
fn every_dashboard_panel_has_data_in_prometheus() {
    scenario("dashboard", |s| {
        Box::pin(async move {
            let c = s.cp.admin().await;
            namespace(&c, "dash").await;
            // Traffic every panel shows: a mutation, a bind with its RWO lock, a refusal, and a
            // bound claim no pod uses (the unused panels).
            running_pod_with_claim(s, "dash", "app-0").await;
            pv(&c, "dash-idle-pv", &[]).await;
            pvc(&c, "dash", "idle", Some("dash-idle-pv"))
                .await
                .expect("idle claim");
            let e = Api::<Pod>::namespaced(c.clone(), "dash")
                .delete("app-0", &force())
                .await
                .expect_err("refused");
            assert_eq!(denial(e).0, 403);
            let port = match &s.prometheus {
                Some((_, p)) => *p,
                None => {
                    let port = harness::free_port();
                    let d = s.cp.dir.path().join("prometheus");
                    std::fs::create_dir_all(&d).expect("prometheus dir");
                    // kube-apiserver too (its webhook histograms), as a member of
                    // system:monitoring (the group the default RBAC lets read /metrics).
                    let me = s.cp.pki.issue("prometheus", &["system:monitoring"], &[]);
                    std::fs::write(d.join("client.crt"), &me.cert_pem).expect("client.crt");
                    std::fs::write(d.join("client.key"), &me.key_pem).expect("client.key");
                    std::fs::write(d.join("ca.crt"), &s.cp.pki.ca_pem).expect("ca.crt");
                    let apiserver = s.cp.api_url.trim_start_matches("https://").to_string();
                    std::fs::write(
                        d.join("prometheus.yml"),
                        format!(
                            "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
                             scrape_configs:\n\
                             - job_name: volguard-webhook\n  static_configs: [{{targets: ['127.0.0.1:{}']}}]\n\
                             - job_name: volguard-controller\n  static_configs: [{{targets: ['127.0.0.1:{}']}}]\n\
                             - job_name: kube-apiserver\n  scheme: https\n  scrape_interval: 5s\n  \
                               tls_config: {{ca_file: {d}/ca.crt, cert_file: {d}/client.crt, key_file: {d}/client.key}}\n  \
                               static_configs: [{{targets: ['{apiserver}']}}]\n",
                            s.webhook_probe,
                            s.controller_probe,
                            d = d.display()
                        ),
                    )
                    .expect("prometheus.yml");
                    let p = Proc::spawn(
                        "prometheus",
                        Command::new("prometheus")
                            .arg(format!(
                                "--config.file={}",
                                d.join("prometheus.yml").display()
                            ))
                            .arg(format!("--storage.tsdb.path={}", d.join("data").display()))
                            .arg(format!("--web.listen-address=127.0.0.1:{port}")),
                        &d,
                    );
                    s.prometheus = Some((p, port));
                    port
                }
            };
            let dashboard: Value = serde_json::from_str(
                &std::fs::read_to_string(
                    Path::new(env!("CARGO_MANIFEST_DIR"))
                        .join("manifests/monitoring/dashboard.json"),
                )
                .expect("dashboard"),
            )
            .expect("dashboard json");
            let http = reqwest::Client::new();
            let mut queries = Vec::new();
            for p in dashboard["panels"].as_array().expect("panels") {
                for t in p["targets"].as_array().expect("targets") {
                    let expr = t["expr"].as_str().expect("expr");
                    queries.push((
                        p["title"].as_str().unwrap_or_default().to_string(),
                        // The dashboard's variables as Grafana's "All" expands them.
                        expr.replace("$__rate_interval", "1m")
                            .replace("$job", "volguard-.*")
                            .replace("$cluster", ".*"),
                    ));
                }
            }
            let mut empty: Vec<(String, String)> = queries.clone();
            let deadline = std::time::Instant::now() + Duration::from_secs(90);
            while !empty.is_empty() && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_secs(3)).await;
                let mut still = Vec::new();
                for (title, q) in empty {
                    let r = http
                        .get(format!("http://127.0.0.1:{port}/api/v1/query"))
                        .query(&[("query", q.as_str())])
                        .send()
                        .await;
                    let n = match r {
                        Ok(r) => r.json::<Value>().await.ok().and_then(|v| {
                            assert_ne!(v["status"], "error", "{title}: {q}: {v}");
                            v["data"]["result"].as_array().map(Vec::len)
                        }),
                        Err(_) => None,
                    };
                    if n.unwrap_or(0) == 0 {
                        still.push((title, q));
                    }
                }
                empty = still;
            }
            assert!(
                empty.is_empty(),
                "dashboard queries without data after 90 s: {empty:#?}"
            );
            println!(
                "prometheus scraped serve, controller and kube-apiserver: all {} queries of {} panels return data",
                queries.len(),
                dashboard["panels"].as_array().map_or(0, Vec::len)
            );
        })
    });
}

#[test]
#[ignore = "needs the control plane, helm and cert-manager: make e2e"]
fn uninstall_in_order_keeps_what_the_docs_say_then_reinstall() {
    scenario("uninstall", |s| {
        Box::pin(async move {
            let c = s.cp.admin().await;
            use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
            // An incident record (a past fence) and an annotated claim, to see what stays.
            let fences = support::objects::fence_api(&c);
            let nf: kube::api::DynamicObject = serde_json::from_value(json!({
                "apiVersion": "volguard.io/v1alpha1", "kind": "NodeFence",
                "metadata": {"name": "past-incident"},
                "spec": {"node": "gone-node", "backends": ["manual"]}
            }))
            .expect("nodefence");
            fences
                .create(&PostParams::default(), &nf)
                .await
                .expect("create nodefence");
            // The documented order: webhook registrations first, then the release.
            for p in [
                "validatingwebhookconfiguration/volguard-validating",
                "mutatingwebhookconfiguration/volguard-mutating",
            ] {
                let out = Command::new(made_kubectl())
                    .args(["delete", p, "--kubeconfig"])
                    .arg(&s.admin_kubeconfig)
                    .output()
                    .expect("kubectl");
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            s.helm(&["uninstall", RELEASE, "-n", NS, "--wait"]);
            let deployments = Api::<Deployment>::namespaced(c.clone(), NS);
            assert!(
                deployments
                    .list(&ListParams::default())
                    .await
                    .expect("list")
                    .items
                    .is_empty()
            );
            // With no registration left, nothing waits on volguard: a finalizer can be removed.
            let claims = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "team");
            let _ = claims.delete("fresh", &DeleteParams::default()).await;
            // What stays: the CRD and its incidents.
            Api::<CustomResourceDefinition>::all(c.clone())
                .get("nodefences.volguard.io")
                .await
                .expect("the NodeFence CRD stays (Helm never deletes CRDs)");
            fences.get("past-incident").await.expect("incidents stay");
            println!(
                "uninstalled: webhooks first, then the release; CRD nodefences.volguard.io and NodeFence past-incident kept"
            );
            // And back, for whatever runs next: the CRD already there is left alone by Helm.
            s.install().await;
            s.start_serve().await;
            s.wait_serving("team").await;
            fences
                .delete("past-incident", &DeleteParams::default())
                .await
                .expect("cleanup");
        })
    });
}

/// `kubectl volguard` for a person who may read one namespace (the `view` role there, nothing
/// cluster-wide), with a KUBECONFIG that lists two files and a context namespace: it explains and
/// reports what it can read, says what it could not, and prints a refusal as kubectl does.
#[test]
#[ignore = "needs the control plane, helm and cert-manager: make e2e"]
fn plugin_for_a_namespace_user() {
    scenario("plugin-namespace-user", |s| {
        Box::pin(async move {
            use k8s_openapi::api::rbac::v1::RoleBinding;
            let c = s.cp.admin().await;
            namespace(&c, "dev-team").await;
            pv(&c, "dev-team-pv", &[]).await;
            pvc(&c, "dev-team", "notes", Some("dev-team-pv"))
                .await
                .expect("claim");
            let rb: RoleBinding = serde_json::from_value(json!({
                "metadata": {"name": "dev-view", "namespace": "dev-team"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "dev"}]
            }))
            .expect("binding");
            Api::<RoleBinding>::namespaced(c.clone(), "dev-team")
                .create(&PostParams::default(), &rb)
                .await
                .expect("bind view");
            // Two files, as KUBECONFIG lists them: contexts in one, nothing in the other; the
            // context's namespace is dev-team.
            let d = s.cp.dir.path().join("plugin");
            std::fs::create_dir_all(&d).expect("dir");
            let dev = s.cp.kubeconfig_yaml("dev", &[]).replace(
                "context: {cluster: e2e, user: u}",
                "context: {cluster: e2e, user: u, namespace: dev-team}",
            );
            std::fs::write(d.join("dev.yaml"), dev).expect("write");
            std::fs::write(
                d.join("empty.yaml"),
                "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n",
            )
            .expect("write");
            let list = format!(
                "{}:{}",
                d.join("empty.yaml").display(),
                d.join("dev.yaml").display()
            );
            std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_volguard"), d.join("kubectl-volguard"))
                .expect("symlink");
            let path = format!(
                "{}:{}",
                d.display(),
                std::env::var("PATH").unwrap_or_default()
            );
            let kubectl = |args: &[&str]| {
                let out = Command::new(made_kubectl())
                    .args(args)
                    .env("KUBECONFIG", &list)
                    .env("PATH", &path)
                    .env_remove("RUST_LOG")
                    .output()
                    .expect("kubectl");
                (
                    out.status.success(),
                    String::from_utf8_lossy(&out.stdout).into_owned(),
                    String::from_utf8_lossy(&out.stderr).into_owned(),
                )
            };
            let (ok, out, err) = kubectl(&["volguard", "explain", "pvc", "notes"]);
            assert!(ok, "explain as dev: {err}");
            assert!(
                out.starts_with("PersistentVolumeClaim dev-team/notes\n"),
                "{out}"
            );
            assert!(
                out.contains("bound to:     dev-team-pv (not read)"),
                "{out}"
            );
            assert!(
                out.contains("not read:     persistentvolumes (forbidden), nodefences (forbidden): you may not read them"),
                "{out}"
            );
            println!(
                "kubectl volguard explain pvc notes (user dev, KUBECONFIG of two files):\n{out}"
            );
            let (ok, out, err) = kubectl(&["volguard", "unused"]);
            assert!(ok, "unused as dev: {err}");
            assert!(out.contains("dev-team") && out.contains("notes"), "{out}");
            let rows: Vec<&str> = out.lines().skip(1).take_while(|l| !l.is_empty()).collect();
            assert!(
                !rows.is_empty() && rows.iter().all(|l| l.starts_with("dev-team ")),
                "only the context's namespace: {out}"
            );
            assert!(
                err.contains("note: persistentvolumes were not read (forbidden)"),
                "{err}"
            );
            println!("kubectl volguard unused (user dev):\n{out}{err}");
            let (ok, _, err) = kubectl(&["volguard", "explain", "pvc", "fresh", "-n", "team"]);
            assert!(!ok);
            assert_eq!(
                err.trim_end(),
                "Error from server (Forbidden): persistentvolumeclaims \"fresh\" is forbidden: User \"dev\" cannot get resource \"persistentvolumeclaims\" in API group \"\" in the namespace \"team\"",
            );
            println!("a claim of another namespace: {}", err.trim_end());
        })
    });
}
