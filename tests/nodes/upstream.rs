//! Upstream's own e2e tests on the real nodes with volguard installed (deny mode): what Kubernetes
//! promises about claims, volumes and StatefulSets must still hold. Built from the same module as
//! the control plane (`e2e.test`), pointed at the images `make nodes` builds by its
//! KUBE_TEST_REPO_LIST, with the attachable test driver as the default StorageClass.

use super::*;

/// The focus: storage protection, and the StatefulSet tests that use volumes.
const FOCUS: &str = r"\[sig-storage\] (PVC|PV) Protection|\[sig-apps\] StatefulSet Basic StatefulSet functionality \[StatefulSetBasic\] should (provide basic identity|perform rolling updates and roll backs of template modifications with PVCs)";
const SKIP: &str = r"\[Disruptive\]|\[Flaky\]|\[Serial\]|\[Feature:";

/// Upstream tests volguard refuses on purpose: the test's name, what its failure must say (the
/// webhook entry that refused), and the rule that requires it. Anything else that fails is a
/// failure.
const REFUSED_ON_PURPOSE: [(&str, &str, &str); 1] = [(
    "Verify that scheduling of a pod that uses PVC that is being deleted fails and the pod becomes Unschedulable",
    "admission webhook \"pod-create.volguard.io\" denied the request",
    "rules.md §2a pod-on-terminating-claim: a pod naming a claim being deleted is refused at CREATE instead of created and left Unschedulable, so a controller that recreates pods sees the reason at once",
)];

pub(super) async fn s_upstream(s: &mut Shared) {
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
    let d = s.cp.dir.path().join("upstream");
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
        .arg(format!("--ginkgo.focus={FOCUS}"))
        .arg(format!("--ginkgo.skip={SKIP}"))
        .arg(format!("--ginkgo.json-report={}", report.display()))
        .args([
            "--ginkgo.no-color",
            "--ginkgo.timeout=25m",
            "--allowed-not-ready-nodes=0",
        ])
        .arg(format!("--report-dir={}", d.display()))
        .current_dir(&d)
        .output()
        .await
        .expect("run e2e.test");
    let log =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/e2e");
    let _ = std::fs::create_dir_all(&dir);
    std::fs::write(dir.join("upstream-e2e.log"), &log).expect("log");
    let suites: serde_json::Value = std::fs::read_to_string(&report)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("e2e.test wrote no report:\n{}", tail(&log, 60)));
    let (mut passed, mut failed, mut refused, mut skipped) =
        (Vec::new(), Vec::new(), Vec::new(), 0usize);
    for spec in suites
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["SpecReports"].as_array().cloned().unwrap_or_default())
    {
        if spec["LeafNodeType"] != "It" {
            continue;
        }
        let name = format!(
            "{} {}",
            spec["ContainerHierarchyTexts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t.as_str())
                .collect::<Vec<_>>()
                .join(" "),
            spec["LeafNodeText"].as_str().unwrap_or_default()
        );
        match spec["State"].as_str().unwrap_or_default() {
            "passed" => passed.push(name),
            "skipped" | "pending" => skipped += 1,
            state => {
                let message = spec["Failure"]["Message"].as_str().unwrap_or_default();
                match REFUSED_ON_PURPOSE
                    .iter()
                    .find(|(test, says, _)| name.ends_with(test) && message.contains(says))
                {
                    Some((_, _, why)) => {
                        refused.push(json!({"test": name, "refusal": message, "why": why}))
                    }
                    None => failed.push(json!({"test": name, "state": state, "message": message})),
                }
            }
        }
    }
    let summary = json!({"focus": FOCUS, "skip": SKIP, "passed": passed.len(), "failed": failed.len(),
        "refused_on_purpose": refused.len(), "skipped": skipped, "seconds": t.elapsed().as_secs(), "passed_tests": passed, "failures": failed, "refusals": refused});
    let _ = std::fs::write(
        dir.join("upstream.json"),
        serde_json::to_string_pretty(&summary).unwrap_or_default(),
    );
    println!(
        "\nupstream e2e (k8s.io/kubernetes/test/e2e v1.37.2) with volguard installed, focus {FOCUS:?}:\n  passed {}, failed {}, refused by volguard on purpose {}, skipped {} (every test outside the focus) in {} s",
        passed.len(),
        failed.len(),
        refused.len(),
        skipped,
        t.elapsed().as_secs()
    );
    for p in &passed {
        println!("  passed: {p}");
    }
    for r in &refused {
        println!(
            "  refused on purpose: {}\n    {}\n    why: {}",
            r["test"], r["refusal"], r["why"]
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
    assert!(
        passed.len() >= 6,
        "too few upstream tests ran: {passed:?}\n{}",
        tail(&log, 40)
    );
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
