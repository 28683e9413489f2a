//! Upstream's own e2e tests on the real nodes with volguard installed (deny mode): what Kubernetes
//! promises about claims, volumes and StatefulSets must still hold. Built from the same module as
//! the control plane (`e2e.test`), pointed at the images `make nodes` builds by its
//! KUBE_TEST_REPO_LIST, with the attachable test driver as the default StorageClass.

use super::*;

/// What `make test` runs: storage protection, the StatefulSet tests that use volumes, and a few of
/// the external-driver storage suites on both test drivers (`make upstream-storage` runs them all).
const FOCUS: &str = r"\[sig-storage\] (PVC|PV) Protection|\[sig-apps\] StatefulSet Basic StatefulSet functionality \[StatefulSetBasic\] should (provide basic identity|perform rolling updates and roll backs of template modifications with PVCs)|External Storage .*\[Testpattern: Dynamic PV \(default fs\)\] volumes should store data|External Storage .*\[Testpattern: Dynamic PV \(filesystem volmode\)\] multiVolume should access to two volumes with the same volume mode and retain data across pod recreation on different node";
/// `make upstream-storage`: every suite upstream runs against an installed CSI driver, on both
/// test drivers, as the external-driver tests are configured (a driver file each); the
/// PersistentVolumes tests that need no NFS server (the CSI lifecycle, the default class); and the
/// eviction API's (DisruptionController: evictions against PodDisruptionBudgets).
const STORAGE_FOCUS: &str = r"External Storage|\[sig-storage\] PersistentVolumes (CSI Conformance|Default StorageClass)|\[sig-apps\] DisruptionController";
const SKIP: &str = r"\[Disruptive\]|\[Flaky\]|\[Serial\]|\[Feature:";

/// Tests these nodes cannot host, skipped and reported as such (never counted as passed), each
/// with why. Every real node here shares the machine's kernel, PID namespace and root filesystem.
const NOT_ON_THESE_NODES: [(&str, &str); 1] = [(
    r"volumeMode should not mount / map unused volumes in a pod",
    "it reads the kubelet's pod directory at /var/lib/kubelet/pods on the node through a hostexec pod \
     that enters the mount namespace of PID 1; the nodes share the machine's PID namespace, so that is \
     the machine's, where no kubelet keeps its directory (each node's is under its own directory)",
)];

/// Upstream tests volguard refuses on purpose: the test's name, what its failure must say (the
/// webhook entry that refused), and the rule that requires it. Anything else that fails is a
/// failure.
const REFUSED_ON_PURPOSE: [(&str, &str, &str); 1] = [(
    "Verify that scheduling of a pod that uses PVC that is being deleted fails and the pod becomes Unschedulable",
    "admission webhook \"pod-create.volguard.io\" denied the request",
    "rules.md §2a pod-on-terminating-claim: a pod naming a claim being deleted is refused at CREATE instead of created and left Unschedulable, so a controller that recreates pods sees the reason at once",
)];

/// The external-driver test definition of a test driver (test/e2e/storage/external): its
/// StorageClass as installed, and what it can do. Both drivers keep a volume's bytes in one
/// directory of the machine that every node mounts (no block mode, no fsType, no snapshots).
fn driver_file(d: &Driver) -> String {
    format!(
        "StorageClass:\n  FromExistingClassName: {class}\nDriverInfo:\n  Name: {name}\n  \
         SupportedSizeRange: {{Min: 1Mi, Max: 1Gi}}\n  SupportedFsType: {{\"\": {{}}}}\n  Capabilities:\n    \
         persistence: true\n    exec: true\n    multipods: true\n    RWX: {rwx}\n    controllerExpansion: false\n    \
         nodeExpansion: false\n    onlineExpansion: false\n    offlineExpansion: false\n    topology: false\n",
        class = d.class,
        name = d.name,
        rwx = !d.attach,
    )
}

pub(super) async fn s_upstream(s: &mut Shared) {
    let (passed, _) = upstream(s, "upstream", FOCUS, "25m").await;
    assert!(passed >= 10, "too few upstream tests ran: {passed}");
}

/// `make upstream-storage` (by hand: about an hour): upstream's storage suites against both test
/// drivers with volguard installed in deny mode. `VOLGUARD_UPSTREAM_STORAGE_FOCUS` runs instead the
/// upstream tests a regular expression names (`make upstream-storage FOCUS='External Storage.*subPath'`).
pub(super) async fn s_upstream_storage(s: &mut Shared) {
    let focus = std::env::var("VOLGUARD_UPSTREAM_STORAGE_FOCUS")
        .ok()
        .filter(|f| !f.is_empty());
    let narrowed = focus.is_some();
    let focus = focus.unwrap_or_else(|| STORAGE_FOCUS.to_string());
    let (passed, refused) = upstream(s, "upstream-storage", &focus, "150m").await;
    let least = if narrowed { 1 } else { 20 };
    assert!(
        passed + refused >= least,
        "too few upstream storage tests ran under {focus:?}: {passed} passed, {refused} refused on purpose"
    );
}

/// What the run skips: upstream's own classes, and the tests these nodes cannot host.
fn skip() -> String {
    std::iter::once(SKIP)
        .chain(NOT_ON_THESE_NODES.iter().map(|(t, _)| *t))
        .collect::<Vec<_>>()
        .join("|")
}

/// Run upstream's e2e tests matching `focus` against the real nodes, volguard installed (deny),
/// the attachable driver the default StorageClass; write `target/e2e/NAME.json` and fail on any
/// failure that is not a refusal on purpose. Returns (passed, refused on purpose).
async fn upstream(s: &mut Shared, name: &str, focus: &str, timeout: &str) -> (usize, usize) {
    volguard(s, true).await;
    let c = s.cp.admin().await;
    Api::<k8s_openapi::api::storage::v1::StorageClass>::all(c.clone())
        .patch(
            ATTACHED.class,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}})),
        )
        .await
        .expect("default class");
    let d = s.cp.dir.path().join(name);
    std::fs::create_dir_all(&d).expect("dir");
    let repos = d.join("repo-list.yaml");
    std::fs::write(
        &repos,
        "promoterE2eRegistry: e2e.volguard.io/e2e-test-images\ngcRegistry: e2e.volguard.io\n\
         buildImageRegistry: e2e.volguard.io/build-image\ngcEtcdRegistry: e2e.volguard.io\n\
         sigStorageRegistry: e2e.volguard.io/sig-storage\ninvalidRegistry: invalid.volguard.invalid\n\
         privateRegistry: e2e.volguard.io/private\ndockerLibraryRegistry: e2e.volguard.io/library\n\
         cloudProviderGcpRegistry: e2e.volguard.io/cloud-provider-gcp\n",
    )
    .expect("repo list");
    let mut drivers = Vec::new();
    for drv in [&ATTACHED, &SHARED_FS] {
        let f = d.join(format!("{}.yaml", drv.class));
        std::fs::write(&f, driver_file(drv)).expect("driver file");
        drivers.push(format!("--storage.testdriver={}", f.display()));
    }
    let kubeconfig =
        s.cp.kubeconfig_file("upstream-e2e", "e2e-upstream", &["system:masters"]);
    let report = d.join("report.json");
    let bin = PathBuf::from(std::env::var("VOLGUARD_NODES_DIR").expect("VOLGUARD_NODES_DIR"))
        .join("e2e.test");
    let t = Instant::now();
    let out = tokio::process::Command::new(&bin)
        .env("KUBE_TEST_REPO_LIST", &repos)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg("--provider=skeleton")
        .arg(format!(
            "--kubectl-path={}",
            harness::bin_dir().join("kubectl").display()
        ))
        .args(&drivers)
        .arg(format!("--ginkgo.focus={focus}"))
        .arg(format!("--ginkgo.skip={}", skip()))
        .arg(format!("--ginkgo.json-report={}", report.display()))
        .arg(format!("--ginkgo.timeout={timeout}"))
        .args(["--ginkgo.no-color", "--allowed-not-ready-nodes=0"])
        .arg(format!("--report-dir={}", d.display()))
        .current_dir(&d)
        // A scenario given up on takes its e2e.test with it.
        .kill_on_drop(true)
        .output()
        .await
        .expect("run e2e.test");
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/e2e");
    let _ = std::fs::create_dir_all(&dir);
    std::fs::write(dir.join(format!("{name}-e2e.log")), &log).expect("log");
    let reports: serde_json::Value = std::fs::read_to_string(&report)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("e2e.test wrote no report:\n{}", tail(&log, 60)));
    let (mut passed, mut failed, mut refused, mut skipped) =
        (Vec::new(), Vec::new(), Vec::new(), 0usize);
    let mut suites = BTreeSet::new();
    for spec in reports
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["SpecReports"].as_array().cloned().unwrap_or_default())
    {
        if spec["LeafNodeType"] != "It" {
            continue;
        }
        let texts: Vec<&str> = spec["ContainerHierarchyTexts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t.as_str())
            .collect();
        let name = format!(
            "{} {}",
            texts.join(" "),
            spec["LeafNodeText"].as_str().unwrap_or_default()
        );
        let state = spec["State"].as_str().unwrap_or_default();
        if state == "skipped" || state == "pending" {
            skipped += 1;
            continue;
        }
        suites.insert(suite(&texts));
        match state {
            "passed" => passed.push(name),
            state => {
                let message = spec["Failure"]["Message"].as_str().unwrap_or_default();
                match REFUSED_ON_PURPOSE
                    .iter()
                    .find(|(test, says, _)| name.ends_with(test) && message.contains(says))
                {
                    Some((_, _, rule)) => {
                        refused.push(json!({"test": name, "rule": rule, "refusal": message}))
                    }
                    None => failed.push(json!({"test": name, "state": state, "message": message})),
                }
            }
        }
    }
    let not_here: Vec<_> = NOT_ON_THESE_NODES
        .iter()
        .map(|(test, why)| json!({"test": test, "why": why}))
        .collect();
    let summary = json!({"focus": focus, "skip": skip(), "skipped_not_on_these_nodes": not_here,
        "suites": suites, "passed": passed.len(),
        "failed": failed.len(), "refused_on_purpose": refused, "skipped": skipped,
        "seconds": t.elapsed().as_secs(), "passed_tests": passed, "failures": failed});
    let _ = std::fs::write(
        dir.join(format!("{name}.json")),
        serde_json::to_string_pretty(&summary).unwrap_or_default(),
    );
    println!(
        "\n{name}: upstream e2e (k8s.io/kubernetes/test/e2e v1.37.2) with volguard installed, focus {focus:?}:\n  \
         suites {suites:?}\n  passed {}, failed {}, refused by volguard on purpose {}, skipped {} (outside the focus, or \
         not for these drivers) in {} s",
        passed.len(),
        failed.len(),
        refused.len(),
        skipped,
        t.elapsed().as_secs()
    );
    for (test, why) in NOT_ON_THESE_NODES {
        println!("  skipped, not on these nodes: {test}: {why}");
    }
    for p in &passed {
        println!("  passed: {p}");
    }
    for r in &refused {
        println!(
            "  refused on purpose: {}\n    {}\n    rule: {}",
            r["test"], r["refusal"], r["rule"]
        );
    }
    for f in &failed {
        println!("  FAILED: {}\n    {}", f["test"], f["message"]);
    }
    let _ = Api::<k8s_openapi::api::storage::v1::StorageClass>::all(c)
        .patch(
            ATTACHED.class,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"storageclass.kubernetes.io/is-default-class": null}}})),
        )
        .await;
    assert!(
        failed.is_empty(),
        "upstream tests failed with volguard installed:\n{}",
        tail(&log, 80)
    );
    (passed.len(), refused.len())
}

/// A test's suite: for the external-driver tests the suite after the driver and pattern
/// (`volumes`, `provisioning`, …), else its outermost container.
fn suite(texts: &[&str]) -> String {
    // "... [Testpattern: Dynamic PV (default fs)] volumes ...": the word after the pattern.
    let all = texts.join(" ");
    all.split_once("[Testpattern:")
        .and_then(|(_, rest)| rest.split_once("] "))
        .and_then(|(_, tail)| tail.split_whitespace().next())
        .or_else(|| texts.first().copied())
        .unwrap_or("?")
        .to_string()
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
