//! volguard installed as operators install it, on the real nodes (docs/testing.md, "Installed as
//! operators install it"): the release bundle `make release-check` builds (target/dist) checked
//! against its signing key, a tampered copy refused; its image pushed to a registry on the test
//! bridge (go-containerregistry's) and its chart pushed there as an OCI chart; `helm install
//! oci://…` with only the registry named; the nodes' containerd pulling the image by digest; the
//! webhook and the controller running as pods, two replicas each, behind their Service, reached by
//! the apiserver and reaching it through kube-proxy; cert-manager 1.11.5's cainjector running beside
//! them. Then the chart upgraded under traffic and rolled back. The counts go to
//! target/e2e/adoption.json.

mod support;

use support::harness::{self, ControlPlane, Proc, Profile};
use support::nodes::RealNodes;
use support::objects::{denial, namespace, pod, pvc};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const NS: &str = "volguard-system";
const NODES: [&str; 2] = ["node-a", "node-b"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A command's stdout; a failure panics with its stderr.
fn sh(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn made(var: &str, what: &str) -> PathBuf {
    std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{var} is not set ({what}): run with `make e2e`"))
}

/// The release bundle: its directory, version and image digest (`IMAGE` is `volguard:V@sha256:…`).
struct Bundle {
    dir: PathBuf,
    version: String,
    digest: String,
}

fn bundle() -> Bundle {
    let dir = std::env::var_os("VOLGUARD_DIST")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/dist"));
    let image = std::fs::read_to_string(dir.join("IMAGE")).unwrap_or_else(|e| {
        panic!(
            "{}/IMAGE: {e}: the release bundle is built by `make release-check`",
            dir.display()
        )
    });
    let (name, digest) = image
        .trim()
        .split_once('@')
        .expect("IMAGE is NAME:V@DIGEST");
    let version = name.rsplit_once(':').expect("IMAGE names a version").1;
    Bundle {
        dir,
        version: version.to_string(),
        digest: digest.to_string(),
    }
}

/// The operator's check before installing: the bundle verifies against the key that signed it,
/// and `.ci/release-check.sh` refuses a tampered copy re-signed by another key. The bundle
/// `make release-check` left was signed by a key it deleted, so a copy is signed here by the
/// test's own release key, as the release manager signs. Returns whether the tampered copy was
/// refused.
fn tamper_refused(b: &Bundle, work: &Path) -> bool {
    let copy = work.join("bundle");
    sh(Command::new("cp").arg("-a").arg(&b.dir).arg(&copy));
    let key = work.join("release.pem");
    let public = work.join("release.pub");
    sh(Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
        ])
        .arg(&key));
    sh(Command::new("openssl")
        .args(["pkey", "-pubout", "-in"])
        .arg(&key)
        .arg("-out")
        .arg(&public));
    for e in std::fs::read_dir(&copy).expect("bundle").flatten() {
        let sig = e.path();
        if sig.extension().is_some_and(|x| x == "sig") {
            let signed = sig.with_extension("");
            sh(Command::new("openssl")
                .args(["dgst", "-sha256", "-sign"])
                .arg(&key)
                .arg("-out")
                .arg(work.join("sig.der"))
                .arg(&signed));
            let b64 = sh(Command::new("base64").arg("-w0").arg(work.join("sig.der")));
            std::fs::write(&sig, b64).expect("signature");
        }
    }
    let out = Command::new(repo().join(".ci/release-check.sh"))
        .arg(&copy)
        .arg(&public)
        .current_dir(repo())
        .output()
        .expect("release-check.sh");
    let text = String::from_utf8_lossy(&out.stdout);
    println!("{}", text.trim());
    out.status.success()
        && text.contains("refused as it must: a tampered bundle re-signed by another key, against the committed key")
}

/// The image built from the released binary by `.ci/image.sh` as `version`, with the released
/// image's time and revision (from its config): its archive and digest. As the released version
/// it must be the released image (same digest); as another version it stands for the next release
/// (same binary, its own labels, so its own digest).
fn build_image(b: &Bundle, work: &Path, version: &str) -> (PathBuf, String) {
    let unpacked = work.join("binary");
    std::fs::create_dir_all(&unpacked).expect("dir");
    sh(Command::new("tar")
        .arg("xzf")
        .arg(
            b.dir
                .join(format!("volguard-{}-linux-amd64.tar.gz", b.version)),
        )
        .arg("-C")
        .arg(&unpacked));
    let config: Value = serde_json::from_str(&sh(Command::new("skopeo")
        .args(["inspect", "--config"])
        .arg(format!(
            "oci-archive:{}",
            b.dir
                .join(format!("volguard-{}.oci.tar", b.version))
                .display()
        ))))
    .expect("the released image's config");
    let created: jiff::Timestamp = config["created"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .expect("the released image's creation time");
    let revision = config["config"]["Labels"]["org.opencontainers.image.revision"]
        .as_str()
        .expect("the released image's revision")
        .to_string();
    let out = work.join(format!("image-{version}"));
    sh(Command::new(repo().join(".ci/image.sh"))
        .arg(unpacked.join("volguard"))
        .arg(version)
        .arg(&out)
        .env("SOURCE_DATE_EPOCH", created.as_second().to_string())
        .env("IMAGE_REVISION", revision)
        .current_dir(repo()));
    let archive = out.join("volguard.oci.tar");
    let digest = sh(Command::new("skopeo")
        .args(["inspect", "--format", "{{.Digest}}"])
        .arg(format!("oci-archive:{}", archive.display())))
    .trim()
    .to_string();
    (archive, digest)
}

struct Cluster {
    /// Dropped first: the nodes' processes, mounts and links go before the control plane.
    nodes: RealNodes,
    cp: ControlPlane,
    _registry: Proc,
    registry: String,
    /// The registry's CA (the cluster's), for skopeo and helm.
    ca_dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Cluster {
    fn helm(&self, args: &[&str]) -> String {
        sh(Command::new(made("VOLGUARD_HELM", "helm"))
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig))
    }

    fn logs(&self) -> String {
        format!("{}\n{}", self.cp.logs(), self.nodes.logs())
    }

    /// As `ControlPlane::eventually`, failing with the nodes' logs too.
    async fn eventually<T, F, Fut>(&self, what: &str, within: Duration, f: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        harness::poll_until(what, within, f, || self.logs()).await
    }
}

async fn start(work: &Path) -> Cluster {
    let mut cp = ControlPlane::start_with(
        Profile::Cluster,
        &[
            "--enable-aggregator-routing=true",
            "--kubelet-preferred-address-types=InternalIP",
        ],
    )
    .await;
    cp.install_cert_manager_crds().await;
    cp.start_cert_manager_processes();
    let mut nodes = RealNodes::start(&cp).await;
    nodes.serve_services(&cp).await;
    let registry = format!("{}:{}", nodes.host_ip(), harness::free_port());
    let ca_dir = work.join("registry-ca");
    std::fs::create_dir_all(&ca_dir).expect("dir");
    std::fs::write(ca_dir.join("ca.crt"), &cp.pki.ca_pem).expect("ca");
    let pair = cp.pki.issue("registry", &[], &[nodes.host_ip()]);
    std::fs::write(work.join("registry.crt"), &pair.cert_pem).expect("cert");
    std::fs::write(work.join("registry.key"), &pair.key_pem).expect("key");
    let reg = Proc::spawn(
        "registry",
        Command::new(made("VOLGUARD_NODES_DIR", "the real nodes' parts").join("registry"))
            .arg(format!("--listen={registry}"))
            .arg(format!("--cert={}", work.join("registry.crt").display()))
            .arg(format!("--key={}", work.join("registry.key").display())),
        work,
    );
    nodes.trust_registry(&registry);
    for n in NODES {
        nodes.add(&cp, n).await;
    }
    let kubeconfig = cp.kubeconfig_file("operator", "operator", &["system:masters"]);
    Cluster {
        nodes,
        cp,
        _registry: reg,
        registry,
        ca_dir,
        kubeconfig,
    }
}

/// The chart's pods of `component` that are Ready: name, the image its spec names, and the
/// image the runtime resolved it to (`imageID`, by digest).
async fn ready_pods(c: &kube::Client, component: &str) -> Vec<(String, String, String)> {
    Api::<Pod>::namespaced(c.clone(), NS)
        .list(
            &ListParams::default().labels(&format!("app.kubernetes.io/name=volguard-{component}")),
        )
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| {
            let image = p.spec?.containers.first()?.image.clone()?;
            let st = p.status?;
            let ready = st
                .conditions?
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            let cs = st.container_statuses?.into_iter().next()?;
            ready.then(|| (p.metadata.name.unwrap_or_default(), image, cs.image_id))
        })
        .collect()
}

/// The pod CREATEs the webhook pods themselves counted as denied (their `/metrics`, by pod IP),
/// summed over every webhook pod; `None` unless every pod answered.
async fn webhook_denials(c: &kube::Client) -> Option<u64> {
    let pods = Api::<Pod>::namespaced(c.clone(), NS)
        .list(&ListParams::default().labels("app.kubernetes.io/name=volguard-webhook"))
        .await
        .ok()?
        .items;
    if pods.is_empty() {
        return None;
    }
    let mut sum = 0;
    for p in pods {
        let ip = p.status.and_then(|s| s.pod_ip)?;
        let r = reqwest_get(&format!("http://{ip}:8080/metrics"))
            .await
            .ok()?;
        sum += r
            .lines()
            .filter(|l| {
                l.starts_with("volguard_admission_requests_total{")
                    && l.contains("kind=\"Pod\"")
                    && l.contains("operation=\"CREATE\"")
                    && l.contains("decision=\"denied\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64;
    }
    Some(sum)
}

async fn reqwest_get(url: &str) -> Result<String, String> {
    let out = tokio::process::Command::new("curl")
        .args(["-sf", "--max-time", "5", url])
        .output()
        .await
        .map_err(|e| e.to_string())?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        .ok_or_else(|| format!("curl {url}: {}", out.status))
}

/// The matchConditions of every webhook, by name, as the apiserver holds them; and the
/// configurations that ask cainjector to inject a CA (`cert-manager.io/inject-ca-from`).
async fn conditions(c: &kube::Client) -> (Vec<(String, usize)>, Vec<String>) {
    let (mut v, mut injected) = (Vec::new(), Vec::new());
    for kind in [
        "validatingwebhookconfigurations",
        "mutatingwebhookconfigurations",
    ] {
        let req = http::Request::get(format!("/apis/admissionregistration.k8s.io/v1/{kind}"))
            .body(Vec::new())
            .expect("req");
        let list: Value = c.request(req).await.expect("registrations");
        for cfg in list["items"].as_array().into_iter().flatten() {
            if cfg["metadata"]["annotations"]
                .get("cert-manager.io/inject-ca-from")
                .is_some()
            {
                injected.push(cfg["metadata"]["name"].to_string());
            }
            for w in cfg["webhooks"].as_array().into_iter().flatten() {
                v.push((
                    w["name"].as_str().unwrap_or_default().to_string(),
                    w["matchConditions"].as_array().map_or(0, Vec::len),
                ));
            }
        }
    }
    v.sort();
    (v, injected)
}

/// The matchConditions of every webhook as the release rendered them (`helm get manifest`).
fn rendered_conditions(cl: &Cluster) -> Vec<(String, usize)> {
    let manifest = cl.helm(&["get", "manifest", "volguard", "--namespace", NS]);
    let mut v: Vec<(String, usize)> = serde_yaml::Deserializer::from_str(&manifest)
        .filter_map(|d| serde::Deserialize::deserialize(d).ok())
        .filter(|d: &Value| {
            matches!(
                d["kind"].as_str(),
                Some("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration")
            )
        })
        .flat_map(|d| d["webhooks"].as_array().cloned().unwrap_or_default())
        .map(|w| {
            (
                w["name"].as_str().unwrap_or_default().to_string(),
                w["matchConditions"].as_array().map_or(0, Vec::len),
            )
        })
        .collect();
    v.sort();
    v
}

/// What the apiserver counted of its calls to volguard's webhooks: (calls made, calls that failed
/// — errored, timed out, or an internal error — fail-open ones included).
async fn volguard_calls(c: &kube::Client) -> (u64, u64) {
    let req = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("req");
    let text = c.request_text(req).await.expect("the apiserver's /metrics");
    let sum = |keep: &dyn Fn(&str) -> bool| {
        text.lines()
            .filter(|l| l.contains("name=\"") && l.contains(".volguard.io\"") && keep(l))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    let calls =
        sum(&|l| l.starts_with("apiserver_admission_webhook_admission_duration_seconds_count{"));
    let failed = sum(&|l| {
        (l.starts_with("apiserver_admission_webhook_rejection_count{")
            && !l.contains("error_type=\"no_error\""))
            || l.starts_with("apiserver_admission_webhook_fail_open_count{")
    });
    (calls, failed)
}

/// A pod on a terminating claim: only volguard refuses it. Returns the refusal's message.
async fn guard_answers(c: &kube::Client, ns: &str, claim: &str) -> Result<String, String> {
    pvc(c, ns, claim, None).await.map_err(|e| e.to_string())?;
    pod(c, ns, &format!("{claim}-user"), None, &[claim])
        .await
        .map_err(|e| e.to_string())?;
    Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns)
        .delete(claim, &DeleteParams::default())
        .await
        .map_err(|e| e.to_string())?;
    match pod(c, ns, &format!("{claim}-late"), None, &[claim]).await {
        Ok(_) => Err("a pod on a terminating claim was admitted".into()),
        Err(e) => Ok(denial(e).1),
    }
}

/// The chart before the CRD moved from `crds/` to templates: the earliest chart an operator may
/// have installed. Built from the repository's history, as a release of it would have been.
const BEFORE_CRD_MOVE: &str = "962b018";

/// Package the chart of `commit` (or the work tree's, already packaged in the bundle) with the
/// released image pinned, as `.ci/release.sh` packages it. Returns the .tgz and its version.
fn package_chart_of(commit: &str, b: &Bundle, work: &Path) -> (PathBuf, String) {
    let tree = work.join(format!("tree-{commit}"));
    std::fs::create_dir_all(&tree).expect("dir");
    let archive = Command::new("git")
        .args(["archive", commit, "charts", "manifests", "LICENSE"])
        .current_dir(repo())
        .output()
        .expect("git");
    assert!(
        archive.status.success(),
        "git archive {commit}: {} (the upgrade scenario builds the earlier chart from the repository's history: a full clone)",
        String::from_utf8_lossy(&archive.stderr)
    );
    std::fs::write(work.join("tree.tar"), &archive.stdout).expect("tar");
    sh(Command::new("tar")
        .arg("xf")
        .arg(work.join("tree.tar"))
        .arg("-C")
        .arg(&tree));
    let chart = work.join(format!("chart-{commit}"));
    sh(Command::new("cp")
        .arg("-rL")
        .arg(tree.join("charts/volguard"))
        .arg(&chart));
    let values = chart.join("values.yaml");
    let text = std::fs::read_to_string(&values).expect("values");
    let text = text
        .replace("  tag: \"\"", &format!("  tag: \"{}\"", b.version))
        .replace("  digest: \"\"", &format!("  digest: \"{}\"", b.digest));
    std::fs::write(&values, text).expect("values");
    let version = format!("{}-{commit}", b.version);
    let out = work.join("charts");
    std::fs::create_dir_all(&out).expect("dir");
    sh(Command::new(made("VOLGUARD_HELM", "helm"))
        .args([
            "package",
            "--version",
            &version,
            "--app-version",
            &b.version,
            "--destination",
        ])
        .arg(&out)
        .arg(&chart));
    (out.join(format!("volguard-{version}.tgz")), version)
}

/// Admission traffic while a chart rolls: claims and pods created and deleted in `ns`, each
/// judged by volguard (the claim's finalizer, the pod's placement, the deletes).
struct Traffic {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// (requests, pod CREATEs among them, the ones that failed).
    task: tokio::task::JoinHandle<(u64, u64, Vec<String>)>,
}

impl Traffic {
    fn start(c: &kube::Client, ns: &str, tag: &str) -> Traffic {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (c, ns, tag, flag) = (c.clone(), ns.to_string(), tag.to_string(), stop.clone());
        let task = tokio::spawn(async move {
            let (mut calls, mut creates, mut failed) = (0u64, 0u64, Vec::new());
            let pods = Api::<Pod>::namespaced(c.clone(), &ns);
            let claims = Api::<PersistentVolumeClaim>::namespaced(c.clone(), &ns);
            let mut i = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                let name = format!("{tag}-{i}");
                let mut note = |what: &str, r: Result<(), kube::Error>| {
                    calls += 1;
                    if let Err(e) = r {
                        failed.push(format!("{what} {name}: {e}"));
                    }
                };
                note("create claim", pvc(&c, &ns, &name, None).await.map(drop));
                note(
                    "create pod",
                    pod(&c, &ns, &name, None, &[&name]).await.map(drop),
                );
                creates += 1;
                note(
                    "delete pod",
                    pods.delete(&name, &DeleteParams::default()).await.map(drop),
                );
                note(
                    "delete claim",
                    claims
                        .delete(&name, &DeleteParams::default())
                        .await
                        .map(drop),
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            (calls, creates, failed)
        });
        Traffic { stop, task }
    }

    async fn finish(self) -> (u64, u64, Vec<String>) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.task.await.expect("traffic")
    }
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "real nodes and a registry: run with `make e2e`"]
async fn installed_from_a_registry() {
    let t0 = Instant::now();
    let report_path = repo().join("target/e2e/adoption.json");
    // A run that stops early leaves no report of an earlier one behind.
    let _ = std::fs::remove_file(&report_path);
    let b = bundle();
    let work = tempfile::tempdir().expect("tmp");
    let tamper = tamper_refused(&b, work.path());
    assert!(tamper, "the tampered bundle was not refused");
    let (_, rebuilt) = build_image(&b, work.path(), &b.version);
    let next_version = format!("{}-next", b.version);
    let (next_archive, next) = build_image(&b, work.path(), &next_version);
    assert_ne!(next, b.digest, "the next image has its own digest");
    println!(
        "image {}: rebuilt from the released binary as {rebuilt}",
        b.digest
    );
    let (earlier, earlier_version) = package_chart_of(BEFORE_CRD_MOVE, &b, work.path());

    let cl = start(work.path()).await;
    let c = cl.cp.admin().await;
    let version = c.apiserver_version().await.expect("version");
    println!(
        "kube-apiserver {}, 2 real nodes with kube-proxy, registry {} ({:.0}s)",
        version.git_version,
        cl.registry,
        t0.elapsed().as_secs_f64()
    );

    // The operator's push: the image as released (its digest unchanged), the next image, and the
    // charts as OCI charts.
    let image_ref = format!("{}/volguard", cl.registry);
    let released = b.dir.join(format!("volguard-{}.oci.tar", b.version));
    for (archive, tag, digest) in [
        (&released, &b.version, &b.digest),
        (&next_archive, &next_version, &next),
    ] {
        sh(Command::new("skopeo")
            .args(["copy", "--quiet", "--dest-cert-dir"])
            .arg(&cl.ca_dir)
            .arg(format!("oci-archive:{}", archive.display()))
            .arg(format!("docker://{image_ref}:{tag}")));
        let pushed = sh(Command::new("skopeo")
            .args(["inspect", "--format", "{{.Digest}}", "--cert-dir"])
            .arg(&cl.ca_dir)
            .arg(format!("docker://{image_ref}:{tag}")))
        .trim()
        .to_string();
        assert_eq!(&pushed, digest, "the registry holds {tag} as built");
    }
    let ca = cl.ca_dir.join("ca.crt").display().to_string();
    let charts = format!("oci://{}/charts", cl.registry);
    for tgz in [b.dir.join(format!("volguard-{}.tgz", b.version)), earlier] {
        cl.helm(&[
            "push",
            &tgz.display().to_string(),
            &charts,
            "--ca-file",
            &ca,
        ]);
    }
    let chart_ref = format!("{charts}/volguard");
    let repository = format!("image.repository={image_ref}");
    namespace(&c, "team").await;

    // 1. The earlier chart, installed as an operator installed it then.
    let t = Instant::now();
    let out = helm_async(
        &cl,
        &[
            "install",
            "volguard",
            &chart_ref,
            "--version",
            &earlier_version,
            "--ca-file",
            &ca,
            "--namespace",
            NS,
            "--create-namespace",
            "--wait",
            "--timeout",
            "5m",
            "--set",
            &repository,
        ],
    )
    .await;
    println!(
        "helm install {chart_ref} --version {earlier_version} ({:.0}s): {}",
        t.elapsed().as_secs_f64(),
        first_lines(&out)
    );
    pods_by_digest(&cl, &c, &b.digest).await;
    guards_answer(&cl, &c).await;
    // Objects of the chart's CRDs that must outlive every upgrade and rollback: an incident
    // record made under the earlier chart, and (below) the audit trail this release's refusals
    // write (the earlier chart had no AuditReport CRD).
    let fences = dynamic(&c, "NodeFence", "nodefences", None);
    let record: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "volguard.io/v1alpha1", "kind": "NodeFence",
        "metadata": {"name": "kept-record"}, "spec": {"node": "node-gone"}}))
    .expect("record");
    let fence_uid = fences
        .create(&kube::api::PostParams::default(), &record)
        .await
        .expect("a NodeFence record")
        .metadata
        .uid
        .expect("uid");

    // 2. Upgraded to this release under traffic, as the README says. Without `--take-ownership`
    //    Helm refuses: the earlier chart installed the CRD from crds/, unowned by the release.
    let upgrade_to = |extra: &[&str]| -> Vec<String> {
        let base = [
            "upgrade",
            "volguard",
            &chart_ref,
            "--version",
            &b.version,
            "--ca-file",
            &ca,
            "--namespace",
            NS,
            "--reset-then-reuse-values",
            "--wait",
            "--timeout",
            "5m",
            "--set",
            &repository,
        ];
        base.iter().chain(extra).map(|a| a.to_string()).collect()
    };
    let plain = upgrade_to(&[]);
    let refused = Command::new(made("VOLGUARD_HELM", "helm"))
        .args(&plain)
        .arg("--kubeconfig")
        .arg(&cl.kubeconfig)
        .output()
        .expect("helm");
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && why.contains("nodefences.volguard.io"),
        "an upgrade from the chart before the CRD move without --take-ownership: {why}"
    );
    println!(
        "without --take-ownership, as docs/runbooks.md says: {}",
        why.trim()
    );
    let mut errors = 0;
    let (next_tag, next_digest) = (
        format!("image.tag={next_version}"),
        format!("image.digest={next}"),
    );
    let upgrade = upgrade_to(&[
        "--take-ownership",
        "--set",
        &next_tag,
        "--set",
        &next_digest,
    ]);
    let upgrade: Vec<&str> = upgrade.iter().map(String::as_str).collect();
    errors += roll(&cl, &c, "upgrade", &upgrade).await;
    let pods_ready = pods_by_digest(&cl, &c, &next).await;
    // Every Ready pod of both components ran the image by digest (pods_by_digest asserts each).
    let by_digest = pods_ready["webhook"] == 2 && pods_ready["controller"] == 2;
    let refusal = guards_answer(&cl, &c).await;
    println!("refused through the Service: {refusal}");
    let kept = cl
        .eventually(
            "namespace team's AuditReport",
            Duration::from_secs(60),
            || {
                let c = c.clone();
                async move { objects_kept(&c).await }
            },
        )
        .await;
    assert_eq!(
        kept.0, fence_uid,
        "the NodeFence record outlived the upgrade"
    );
    let crd_owner = crd_release(&c).await;
    assert_eq!(
        crd_owner.as_deref(),
        Some("volguard"),
        "the NodeFence CRD is the release's after the upgrade"
    );

    // cainjector 1.11.5 runs beside the chart, and the chart gives it nothing to inject (no
    // `inject-ca-from`: volguard's controller keeps the caBundle): 20 s on, every webhook's
    // matchConditions are what the release rendered.
    let rendered = rendered_conditions(&cl);
    assert!(rendered.iter().any(|(_, k)| *k > 0), "{rendered:?}");
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (live, injected) = conditions(&c).await;
    let live: Vec<_> = live
        .into_iter()
        .filter(|(name, _)| rendered.iter().any(|(r, _)| r == name))
        .collect();
    let intact = live == rendered && injected.is_empty();
    assert!(
        intact,
        "with cainjector running: rendered {rendered:?}, live {live:?}, asking cainjector to inject: {injected:?}"
    );
    let cm_version = made("VOLGUARD_CERT_MANAGER_DIR", "cert-manager")
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();

    // 3. Rolled back under traffic, then forward again.
    errors += roll(
        &cl,
        &c,
        "rollback",
        &[
            "rollback",
            "volguard",
            "1",
            "--namespace",
            NS,
            "--wait",
            "--timeout",
            "5m",
        ],
    )
    .await;
    pods_by_digest(&cl, &c, &b.digest).await;
    guards_answer(&cl, &c).await;
    let history: Value = serde_json::from_str(&cl.helm(&[
        "history",
        "volguard",
        "--namespace",
        NS,
        "--output",
        "json",
    ]))
    .expect("helm history");
    let last = history
        .as_array()
        .and_then(|h| h.last())
        .cloned()
        .unwrap_or_default();
    let rollback_ok = last["status"] == "deployed"
        && last["description"]
            .as_str()
            .is_some_and(|d| d.contains("Rollback to 1"));
    assert!(rollback_ok, "helm history after the rollback: {history}");
    errors += roll(&cl, &c, "upgrade again", &upgrade).await;
    pods_by_digest(&cl, &c, &next).await;
    let after = objects_kept(&c).await;
    assert_eq!(
        after,
        Some(kept.clone()),
        "the NodeFence record and the AuditReport were kept"
    );
    guards_answer(&cl, &c).await;

    let report = json!({
        "image": {"by_digest": by_digest, "reproducible": rebuilt == b.digest, "digest": b.digest},
        "pods_ready": pods_ready,
        "tamper_refused": tamper,
        "cainjector": {"version": cm_version, "conditions_intact": intact},
        "upgrade": {"from": [format!("chart {BEFORE_CRD_MOVE} (before the CRD move) with the released image")],
                    "to": format!("this chart with the next image ({next_version}, {next})"),
                    "admission_errors": errors, "rollback_ok": rollback_ok,
                    "objects_kept": {"nodefence": kept.0, "auditreport": kept.1}},
        "seconds": t0.elapsed().as_secs(),
    });
    std::fs::create_dir_all(report_path.parent().expect("dir")).expect("dir");
    std::fs::write(
        &report_path,
        serde_json::to_string_pretty(&report).expect("json"),
    )
    .expect("write");
    println!("wrote {}: {report}", report_path.display());
    assert_eq!(
        rebuilt, b.digest,
        "two builds of one binary give one digest"
    );
    assert_eq!(errors, 0, "admission errors while the chart rolled");
    println!("scenario installed-from-a-registry: ok");
}

fn first_lines(out: &str) -> String {
    out.lines().take(4).collect::<Vec<_>>().join(" | ")
}

/// helm on a blocking thread, so traffic keeps running on the runtime meanwhile. A failure
/// panics with what the chart's pods and their Events say (with `VOLGUARD_HOLD` set, after
/// keeping the cluster up 15 minutes to look at).
async fn helm_async(cl: &Cluster, args: &[&str]) -> String {
    let mut cmd = Command::new(made("VOLGUARD_HELM", "helm"));
    cmd.args(args).arg("--kubeconfig").arg(&cl.kubeconfig);
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("helm")
        .expect("run helm");
    if !out.status.success() {
        if std::env::var_os("VOLGUARD_HOLD").is_some() {
            eprintln!("HOLD: {}", String::from_utf8_lossy(&out.stderr));
            tokio::time::sleep(Duration::from_secs(900)).await;
        }
        panic!(
            "helm {args:?} failed:\n{}\n{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            pods_report(&cl.cp.admin().await).await,
            cl.logs()
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The chart's pods, their container states, and the namespace's Events.
async fn pods_report(c: &kube::Client) -> String {
    let mut out = String::new();
    for p in Api::<Pod>::namespaced(c.clone(), NS)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        let st = p.status.unwrap_or_default();
        out.push_str(&format!(
            "pod {} on {:?}: {:?} {}\n",
            p.metadata.name.unwrap_or_default(),
            p.spec.and_then(|s| s.node_name),
            st.phase,
            serde_json::to_string(&st.container_statuses).unwrap_or_default()
        ));
    }
    for e in Api::<k8s_openapi::api::core::v1::Event>::namespaced(c.clone(), NS)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
    {
        out.push_str(&format!(
            "event {:?} {:?}: {:?}\n",
            e.involved_object.name, e.reason, e.message
        ));
    }
    out
}

/// A helm rollout (upgrade or rollback) under traffic: the admission errors it caused, seen by
/// the clients (a call that failed but was not refused) and by the apiserver (calls to volguard
/// that failed, fail-open ones included).
async fn roll(cl: &Cluster, c: &kube::Client, what: &str, args: &[&str]) -> u64 {
    let (calls_before, failed_before) = volguard_calls(c).await;
    let old = pod_names(c).await;
    let traffic = Traffic::start(c, "team", &what.replace(' ', "-"));
    let t = Instant::now();
    let out = helm_async(cl, args).await;
    // The old replicas drain after helm's wait returns; the traffic runs until they are gone.
    for component in ["webhook", "controller"] {
        cl.eventually(
            &format!("the {component} rollout settles"),
            Duration::from_secs(120),
            || {
                let c = c.clone();
                async move { all_pods_ready(&c, component).await.then_some(()) }
            },
        )
        .await;
    }
    let (requests, pod_creates, failed) = traffic.finish().await;
    let (calls_after, failed_after) = volguard_calls(c).await;
    let new = pod_names(c).await;
    assert!(
        !old.is_empty() && !new.is_empty() && old.is_disjoint(&new),
        "helm {what} replaced no pod or only some: before {old:?}, after {new:?}"
    );
    let volguard = calls_after.saturating_sub(calls_before);
    // Every pod CREATE of the traffic is volguard's (`pod-create` matches a pod naming a claim):
    // fewer calls seen by the apiserver would mean its counters are not the ones read here.
    assert!(
        pod_creates > 0 && volguard >= pod_creates,
        "helm {what}: {pod_creates} pod creates, but the apiserver counted {volguard} calls to volguard"
    );
    let errors = failed.len() as u64 + failed_after.saturating_sub(failed_before);
    println!(
        "helm {what} ({:.0}s): {requests} requests under traffic, {volguard} calls to volguard, {} failed at the client, {} failed at the apiserver: {}",
        t.elapsed().as_secs_f64(),
        failed.len(),
        failed_after.saturating_sub(failed_before),
        first_lines(&out)
    );
    for f in failed.iter().take(5) {
        println!("  {f}");
    }
    errors
}

/// The chart's pods, every component.
async fn pod_names(c: &kube::Client) -> std::collections::BTreeSet<String> {
    Api::<Pod>::namespaced(c.clone(), NS)
        .list(&ListParams::default().labels("app.kubernetes.io/part-of=volguard"))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect()
}

/// Every pod of `component` Ready and none terminating: the rollout is over.
async fn all_pods_ready(c: &kube::Client, component: &str) -> bool {
    let pods = Api::<Pod>::namespaced(c.clone(), NS)
        .list(
            &ListParams::default().labels(&format!("app.kubernetes.io/name=volguard-{component}")),
        )
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    !pods.is_empty() && pods.len() == ready_pods(c, component).await.len()
}

/// Two Ready pods of each component, each running the image `digest` by digest.
async fn pods_by_digest(cl: &Cluster, c: &kube::Client, digest: &str) -> Value {
    let mut ready_counts = json!({});
    for component in ["webhook", "controller"] {
        let ready = cl
            .eventually(
                &format!("two {component} pods Ready"),
                Duration::from_secs(180),
                || {
                    let c = c.clone();
                    async move {
                        let r = ready_pods(&c, component).await;
                        (r.len() == 2 && all_pods_ready(&c, component).await).then_some(r)
                    }
                },
            )
            .await;
        for (name, image, id) in &ready {
            assert!(
                image.contains(digest) && id.ends_with(digest),
                "{name} runs {image} ({id}), not {digest}"
            );
        }
        ready_counts[component] = json!(ready.len());
    }
    ready_counts
}

/// The webhook pods' denied pod CREATEs, once every pod answers.
async fn denials_now(cl: &Cluster, c: &kube::Client) -> u64 {
    cl.eventually(
        "every webhook pod's /metrics",
        Duration::from_secs(30),
        || webhook_denials(c),
    )
    .await
}

/// The guards answer through the Service: a pod on a terminating claim is refused by volguard's
/// `pod-create` webhook, and the webhook pods themselves counted that denial.
async fn guards_answer(cl: &Cluster, c: &kube::Client) -> String {
    let before = denials_now(cl, c).await;
    let refusal = cl
        .eventually(
            "volguard's pods refuse a pod on a terminating claim",
            Duration::from_secs(60),
            || {
                let c = c.clone();
                async move {
                    let claim = format!("probe-{}", harness::free_port());
                    guard_answers(&c, "team", &claim).await.ok()
                }
            },
        )
        .await;
    assert!(
        refusal.contains("admission webhook \"pod-create.volguard.io\" denied the request"),
        "{refusal}"
    );
    let after = denials_now(cl, c).await;
    assert!(
        after > before,
        "the webhook pods counted no denied pod CREATE ({before} → {after})"
    );
    refusal
}

/// The Helm release that owns the NodeFence CRD (its `meta.helm.sh/release-name`).
async fn crd_release(c: &kube::Client) -> Option<String> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    Api::<CustomResourceDefinition>::all(c.clone())
        .get("nodefences.volguard.io")
        .await
        .ok()?
        .metadata
        .annotations?
        .get("meta.helm.sh/release-name")
        .cloned()
}

fn dynamic(
    c: &kube::Client,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<kube::api::DynamicObject> {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("volguard.io", "v1alpha1", kind),
        plural,
    );
    match ns {
        Some(ns) => Api::namespaced_with(c.clone(), ns, &ar),
        None => Api::all_with(c.clone(), &ar),
    }
}

/// The uids of the NodeFence record and of namespace team's AuditReport, once both exist: the
/// same uids later mean the same objects, kept (not deleted and created again).
async fn objects_kept(c: &kube::Client) -> Option<(String, String)> {
    let fence = dynamic(c, "NodeFence", "nodefences", None)
        .get_opt("kept-record")
        .await
        .ok()??;
    let report = dynamic(c, "AuditReport", "auditreports", Some("team"))
        .get_opt("volguard")
        .await
        .ok()??;
    Some((fence.metadata.uid?, report.metadata.uid?))
}
