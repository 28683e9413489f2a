//! The shared cluster's Helm release: install, upgrade with values, the chart's rendered
//! arguments, and volguard's processes started as the chart runs them.

use super::*;

impl Shared {
    /// Every process's log tail, the chart's volguard processes included.
    pub(super) fn logs(&self) -> String {
        let mut out = self.cp.logs();
        for p in [&self.serve, &self.controller].into_iter().flatten() {
            out.push_str(&format!("==== {} ====\n{}\n", p.name, p.tail()));
            // The audit trail's own lines, wherever they are in the log.
            let all = std::fs::read_to_string(&p.log).unwrap_or_default();
            for l in all.lines().filter(|l| l.contains("audit")) {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }

    pub(super) async fn eventually<T, F, Fut>(&self, what: &str, within: Duration, f: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        harness::poll_until(what, within, f, || self.logs()).await
    }

    pub(super) fn helm(&self, args: &[&str]) -> String {
        let out = Command::new(helm_bin())
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.admin_kubeconfig)
            .output()
            .expect("run helm");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "helm {args:?} failed:\n{stderr}\n{}",
            self.cp.logs()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub(super) fn install_args(&self) -> Vec<String> {
        let mut a: Vec<String> = [
            "--namespace",
            NS,
            "--set",
            "webhook.hostNetwork=true",
            "--set",
            "webhook.replicas=1",
            "--set",
            "controller.replicas=1",
            "--set",
            "webhook.nodeSelector.kubernetes\\.io/hostname=ops-0",
            "--set",
            "controller.nodeSelector.kubernetes\\.io/hostname=ops-0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for (k, v) in [
            ("webhook.securePort", self.webhook_port),
            ("webhook.probePort", self.webhook_probe),
            ("controller.probePort", self.controller_probe),
        ] {
            a.push("--set".into());
            a.push(format!("{k}={v}"));
        }
        a
    }

    pub(super) async fn install(&mut self) {
        let mut args: Vec<String> = vec!["install".into(), RELEASE.into()];
        args.push(chart().display().to_string());
        args.extend(self.install_args());
        args.extend(["--create-namespace", "--wait", "--timeout", "3m"].map(String::from));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.helm(&refs);
        println!(
            "helm install: {}",
            out.lines().take(6).collect::<Vec<_>>().join(" | ")
        );
    }

    /// `helm upgrade` as the README says (`upgrade_args`), then the webhook and the controller
    /// restarted with the Deployments' new args, as their rollouts would.
    pub(super) async fn upgrade(&mut self, value: &str) {
        self.helm_upgrade(value);
        self.restart().await;
    }

    /// `helm upgrade` alone (`upgrade_args`): the running processes keep their args, as the old
    /// pods of a rollout do until they are replaced.
    pub(super) fn helm_upgrade(&self, value: &str) {
        let args = upgrade_args(self.install_args(), value);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.helm(&refs);
    }

    /// The webhook and the controller restarted with the Deployments' args.
    pub(super) async fn restart(&mut self) {
        self.start_serve().await;
        if let Some(mut p) = self.controller.take() {
            p.kill();
        }
        self.start_controller().await;
    }

    /// The args the chart's Deployment gives `container`, with the Secret's files where this
    /// process finds them.
    pub(super) async fn rendered_args(&self, deployment: &str) -> Vec<String> {
        let d = Api::<Deployment>::namespaced(self.cp.admin().await, NS)
            .get(deployment)
            .await
            .expect("deployment");
        let c = &d.spec.expect("spec").template.spec.expect("pod").containers[0];
        c.args
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|a| a.replace("/etc/volguard/tls", &self.certs.display().to_string()))
            .collect()
    }

    /// (Re)start `volguard serve` as the chart's webhook pod runs it.
    pub(super) async fn start_serve(&mut self) {
        if let Some(mut p) = self.serve.take() {
            p.kill();
        }
        let args = self.rendered_args("volguard-webhook").await;
        assert!(
            args.contains(&format!("--listen=0.0.0.0:{}", self.webhook_port)),
            "{args:?}"
        );
        let kc = self.cp.sa_kubeconfig_in(NS, "volguard-webhook");
        let p = Proc::spawn(
            "volguard-serve (chart)",
            Command::new(env!("CARGO_BIN_EXE_volguard"))
                .args(&args)
                .arg(format!("--kubeconfig={}", kc.display()))
                .env("POD_NAMESPACE", NS)
                .env("POD_NAME", "volguard-webhook-e2e")
                .env("RUST_LOG", "volguard=debug,info"),
            self.cp.dir.path(),
        );
        self.serve = Some(p);
        harness::wait_http_ok(
            &format!("http://127.0.0.1:{}/readyz", self.webhook_probe),
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| panic!("chart's serve not ready: {e}\n{}", self.cp.logs()));
    }

    pub(super) async fn start_controller(&mut self) {
        let args = self.rendered_args("volguard-controller").await;
        let kc = self.cp.sa_kubeconfig_in(NS, "volguard-controller");
        self.controller = Some(Proc::spawn(
            "volguard-controller (chart)",
            Command::new(env!("CARGO_BIN_EXE_volguard"))
                .args(&args)
                .arg(format!("--kubeconfig={}", kc.display()))
                .env("POD_NAMESPACE", NS)
                .env("POD_NAME", "volguard-controller-e2e"),
            self.cp.dir.path(),
        ));
        harness::wait_http_ok(
            &format!("http://127.0.0.1:{}/readyz", self.controller_probe),
            Duration::from_secs(30),
        )
        .await
        .unwrap_or_else(|e| panic!("chart's controller not ready: {e}\n{}", self.cp.logs()));
    }

    /// Wait until the apiserver calls volguard through the Service: a PVC created in `ns` comes
    /// back with the protection finalizer volguard's mutating webhook adds... unless the
    /// apiserver's own admission already did; so the probe is a pod on a terminating claim,
    /// which only volguard refuses.
    pub(super) async fn wait_serving(&self, ns: &str) {
        let c = self.cp.admin().await;
        let claim = format!("probe-{}", harness::free_port());
        pvc(&c, ns, &claim, None).await.expect("probe claim");
        pod(&c, ns, &format!("{claim}-user"), Some(OPS_NODE), &[&claim])
            .await
            .expect("probe user");
        Api::<PersistentVolumeClaim>::namespaced(c.clone(), ns)
            .delete(&claim, &DeleteParams::default())
            .await
            .expect("delete probe claim");
        let ns = ns.to_string();
        self.eventually(
            "the apiserver calls volguard through the chart's Service",
            Duration::from_secs(60),
            || {
                let c = c.clone();
                let (ns, claim) = (ns.clone(), claim.clone());
                async move {
                    let name = format!("{claim}-{}", harness::free_port());
                    match pod(&c, &ns, &name, None, &[&claim]).await {
                        Err(e) => denial(e).1.contains("volguard").then_some(()),
                        Ok(_) => {
                            let _ = Api::<Pod>::namespaced(c, &ns)
                                .delete(&name, &DeleteParams::default())
                                .await;
                            None
                        }
                    }
                }
            },
        )
        .await;
    }
}

/// An upgrade as the README tells operators to run one: the install's values given again,
/// `--reset-then-reuse-values` (the new chart's defaults, then this release's earlier values: a
/// value a new chart version adds is not left empty, as `--reuse-values` leaves it), then VALUE.
pub(super) fn upgrade_args(install: Vec<String>, value: &str) -> Vec<String> {
    let mut args = vec![
        "upgrade".to_string(),
        RELEASE.into(),
        chart().display().to_string(),
    ];
    args.extend(install);
    args.extend([
        "--reset-then-reuse-values".to_string(),
        "--set".into(),
        value.into(),
    ]);
    args
}
