//! What an operator types: kubectl against volguard's refusals, `explain pod`.

use super::*;

/// Issue 44 point 1 on the live cluster: two pods, one ReadWriteOnce claim, the second placed on
/// another node and stuck Pending; `kubectl volguard explain pod` (the binary, as the plugin runs
/// it) names the pod and node holding the claim and the safe next step, never "delete the
/// VolumeAttachment"; the first pod has no storage problem.
pub(super) async fn explain_pod_multi_attach(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    claim(cp, ns, "data").await;
    let pods = Api::<Pod>::namespaced(c.clone(), ns);
    pods.create(
        &PostParams::default(),
        &claim_pod("first", "data", Some("kwok-1")),
    )
    .await
    .expect("first");
    running(cp, ns, "first").await;
    pods.create(
        &PostParams::default(),
        &claim_pod("second", "data", Some("kwok-2")),
    )
    .await
    .expect("second");
    let kc = cp.kubeconfig_file("explainer-pod", "e2e-user", &["system:masters"]);
    let explain = |name: &'static str| {
        let kc = kc.clone();
        async move {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_volguard"))
                .args(["explain", "pod", name, "-n", ns])
                .arg(format!("--kubeconfig={}", kc.display()))
                .output()
                .expect("run explain pod");
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        }
    };
    // The scheduler's bind of `second` to kwok-2 is refused: it stays Pending.
    let explained = cp
        .eventually("second refused and explained", WAIT, || async {
            let p = pods.get("second").await.ok()?;
            if p.spec.as_ref()?.node_name.is_some() {
                panic!("second was placed beside the RWO holder's node: {p:?}");
            }
            let (ok, out, _) = explain("second").await;
            (ok && out.contains("blocked by:") && out.contains("first") && out.contains("kwok-1"))
                .then_some(out)
        })
        .await;
    assert!(
        !explained
            .to_lowercase()
            .contains("delete the volumeattachment"),
        "{explained}"
    );
    let (ok, first, err) = explain("first").await;
    assert!(ok && !first.contains("blocked by:"), "{first}{err}");
    println!(
        "explain-pod-multi-attach: kubectl volguard explain pod second:\n{}",
        explained.trim_end()
    );
    pods.delete("second", &DeleteParams::default())
        .await
        .expect("delete second");
}

/// What users see in kubectl: force delete, finalizer strip and a pod on a terminating claim
/// refused with volguard's message; a pod on a missing claim allowed with volguard's warning.
pub(super) async fn kubectl_ux(cp: &ControlPlane, ns: &str) {
    let c = cp.admin().await;
    claim(cp, ns, "ux-data").await;
    Api::<Pod>::namespaced(c.clone(), ns)
        .create(&PostParams::default(), &claim_pod("ux", "ux-data", None))
        .await
        .expect("pod");
    running(cp, ns, "ux").await;
    let (ok, out) = kubectl(
        cp,
        &[
            "delete",
            "pod",
            "ux",
            "-n",
            ns,
            "--force",
            "--grace-period=0",
        ],
    );
    assert!(!ok, "{out}");
    assert!(out.contains("Warning: Immediate deletion"), "{out}");
    assert!(
        out.contains("admission webhook \"force-delete.volguard.io\" denied the request")
            && out.contains("force delete of pod \"ux\" refused"),
        "{out}"
    );
    println!("kubectl-ux: $ kubectl delete pod ux --force --grace-period=0\n{out}");
    let (ok, out) = kubectl(
        cp,
        &[
            "patch",
            "pvc",
            "ux-data",
            "-n",
            ns,
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    assert!(!ok, "{out}");
    assert!(
        out.contains("admission webhook \"finalizer-guard.volguard.io\" denied the request"),
        "{out}"
    );
    println!(
        "kubectl-ux: $ kubectl patch pvc ux-data -p '{{\"metadata\":{{\"finalizers\":null}}}}'\n{out}"
    );
    // rules.md §2c "every write path counts": the status subresource stores metadata too.
    let (ok, out) = kubectl(
        cp,
        &[
            "patch",
            "pvc",
            "ux-data",
            "-n",
            ns,
            "--subresource=status",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
    );
    assert!(!ok, "{out}");
    assert!(
        out.contains("admission webhook \"finalizer-guard.volguard.io\" denied the request")
            && out.contains("in use by pod(s) ux"),
        "{out}"
    );
    println!(
        "kubectl-ux: $ kubectl patch pvc ux-data --subresource=status (finalizers removed)\n{out}"
    );
    // A status write that keeps the finalizers never reaches volguard's decision (matchConditions).
    let (ok, out) = kubectl(
        cp,
        &[
            "patch",
            "pvc",
            "ux-data",
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"touched":"yes"}}}"#,
        ],
    );
    assert!(ok, "{out}");
    let (ok, out) = kubectl(cp, &["delete", "pvc", "ux-data", "-n", ns, "--wait=false"]);
    assert!(ok, "{out}");
    let manifest = cp.dir.path().join("ux-pod.json");
    std::fs::write(
        &manifest,
        serde_json::to_string(&claim_pod("ux-2", "ux-data", None)).expect("json"),
    )
    .expect("write");
    let (ok, out) = kubectl(
        cp,
        &["create", "-n", ns, "-f", manifest.to_str().expect("path")],
    );
    assert!(!ok, "{out}");
    assert!(
        out.contains("admission webhook \"pod-create.volguard.io\" denied the request")
            && out.contains("is being deleted"),
        "{out}"
    );
    println!("kubectl-ux: $ kubectl create -f ux-pod.json (claim terminating)\n{out}");
    std::fs::write(
        &manifest,
        serde_json::to_string(&claim_pod("ux-3", "not-yet", None)).expect("json"),
    )
    .expect("write");
    let (ok, out) = kubectl(
        cp,
        &["create", "-n", ns, "-f", manifest.to_str().expect("path")],
    );
    assert!(ok, "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("Warning:") && l.contains("not-yet")),
        "{out}"
    );
    println!("kubectl-ux: $ kubectl create -f ux-pod.json (claim missing)\n{out}");
}
