//! volguard's controller, a fence agent, the manifests installed, and the components' logs.

use super::*;

impl ControlPlane {
    /// Start a `volguard controller` (leader election on) and return its index.
    /// Before a scenario: the webhook serves and one controller runs (an earlier scenario may
    /// have stopped them, as a crash would; the kubelet would restart them).
    pub async fn ensure_running(&mut self) {
        let alive = self
            .serve
            .as_mut()
            .is_some_and(|p| matches!(p.child.try_wait(), Ok(None)));
        if !alive {
            // Gone, or died: a new one on a new port (the old port may linger in TIME_WAIT).
            self.stop_webhook();
            self.webhook_port = free_port();
            self.start_webhook().await;
        } else if self.webhook_port != self.serve_port || !self.registered {
            // A scenario that stopped half-way may have left the webhooks routed to its own
            // forwarder or replica (gone with it), or unregistered: every later scenario would
            // then meet a dead endpoint, and the Ignore rules would let everything through.
            println!(
                "(webhooks routed to port {}: back to the harness's serve on {})",
                self.webhook_port, self.serve_port
            );
            self.route_webhooks_to(self.serve_port).await;
        }
        let mut live = Vec::new();
        for (mut p, probe) in std::mem::take(&mut self.controllers)
            .into_iter()
            .zip(std::mem::take(&mut self.controller_probes))
        {
            if matches!(p.child.try_wait(), Ok(None)) {
                live.push((p, probe));
            }
        }
        (self.controllers, self.controller_probes) = live.into_iter().unzip();
        if self.controllers.is_empty() {
            println!("(no controller runs: starting replica-a again)");
            self.start_controller("replica-a").await;
        }
    }

    /// volguard's reference fence agent (`volguard fence agent`, the HTTPS fence-agent contract)
    /// on `port`, serving with the webhook's certificate and running `fence.sh` / `unfence.sh`
    /// from `agent_dir` (its ledger there too).
    pub fn spawn_fence_agent(&self, agent_dir: &Path, port: u16) -> Proc {
        let d = self.dir.path();
        Proc::spawn(
            "fence-agent",
            Command::new(env!("CARGO_BIN_EXE_volguard"))
                .args(["--log-format", "json", "fence", "agent"])
                .arg(format!("--listen=127.0.0.1:{port}"))
                .arg(format!(
                    "--tls-cert={}",
                    d.join("webhook-certs/tls.crt").display()
                ))
                .arg(format!(
                    "--tls-key={}",
                    d.join("webhook-certs/tls.key").display()
                ))
                .arg(format!(
                    "--fence-command=sh {}",
                    agent_dir.join("fence.sh").display()
                ))
                .arg(format!(
                    "--verify-command=sh {}",
                    agent_dir.join("verify.sh").display()
                ))
                .arg(format!(
                    "--unfence-command=sh {}",
                    agent_dir.join("unfence.sh").display()
                ))
                .arg(format!(
                    "--state={}",
                    agent_dir.join("ledger.json").display()
                )),
            d,
        )
    }

    pub async fn start_controller(&mut self, identity: &str) -> usize {
        let d = self.dir.path().to_path_buf();
        let kc = self.sa_kubeconfig_file("volguard-controller");
        let probe = free_port();
        // Leader failover within seconds for the scenarios, claims marked unused 2 s after they
        // are seen so (the default waits 2 minutes) and retries within 2 s (the default backs off
        // to 2 minutes), unless `controller_extra` sets its own.
        let quick_leases = [
            "--lease-duration=6s",
            "--lease-renew=1s",
            "--lease-renew-deadline=4s",
            "--unused-grace=2s",
            "--backoff-base=100ms",
            "--backoff-max=2s",
        ];
        let overridden = |d: &&str| {
            let flag = d.split('=').next();
            self.controller_extra
                .iter()
                .any(|e| e.split('=').next() == flag)
        };
        let p = Proc::spawn(
            &format!("volguard-controller-{identity}"),
            Command::new(env!("CARGO_BIN_EXE_volguard"))
                .args(["--log-format", "json", "controller"])
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg(format!("--probe-listen=127.0.0.1:{probe}"))
                .args(["--leader-elect", "--lease-namespace=volguard-system"])
                .args(quick_leases.iter().filter(|d| !overridden(d)))
                .arg(format!("--identity={identity}"))
                .args(self.allow_flags())
                .args(&self.controller_extra),
            &d,
        );
        self.controllers.push(p);
        self.controller_probes.push(probe);
        wait_http_ok(
            &format!("http://127.0.0.1:{probe}/readyz"),
            // At bench-scale's sizes a cold start is measured, not refused: minutes, not seconds.
            Duration::from_secs(180),
        )
        .await
        .unwrap_or_else(|e| panic!("controller not ready: {e}"));
        self.controllers.len() - 1
    }

    /// Install the project's manifests: the namespace, RBAC and cert-manager CRDs for real, then
    /// every resource of manifests/base/kustomization.yaml with a server-side dry run.
    pub async fn install_manifests(&self) -> Vec<String> {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base");
        let mut applied = Vec::new();
        for f in [
            "namespace.yaml",
            "nodefence-crd.yaml",
            "auditreport-crd.yaml",
            "rbac.yaml",
        ] {
            applied.extend(apply_file(&self.admin().await, &base.join(f), false).await);
        }
        applied.extend(self.install_cert_manager_crds().await);
        let kustomization: serde_json::Value = serde_yaml::from_str(
            &std::fs::read_to_string(base.join("kustomization.yaml")).expect("kustomization"),
        )
        .expect("yaml");
        for r in kustomization["resources"].as_array().expect("resources") {
            let f = base.join(r.as_str().expect("resource path"));
            applied.extend(apply_file(&self.admin().await, &f, true).await);
        }
        applied
    }

    /// cert-manager's CRDs (from its module, built by `make e2e`).
    pub async fn install_cert_manager_crds(&self) -> Vec<String> {
        let mut applied = Vec::new();
        let crds = std::env::var("VOLGUARD_CERT_MANAGER_CRDS").unwrap_or_else(|_| {
            panic!("VOLGUARD_CERT_MANAGER_CRDS is not set: run the e2e tests with `make e2e`")
        });
        let mut crd_files: Vec<_> = std::fs::read_dir(&crds)
            .expect("crd dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        crd_files.sort();
        assert!(!crd_files.is_empty(), "no cert-manager CRDs in {crds}");
        for f in &crd_files {
            applied.extend(apply_file(&self.admin().await, f, false).await);
        }
        applied
    }

    pub fn logs(&self) -> String {
        let mut out = String::new();
        for p in [
            &self.etcd,
            &self.apiserver,
            &self.kcm,
            &self.scheduler,
            &self.serve,
        ]
        .into_iter()
        .flatten()
        .chain(self.kwoks.iter().map(|(_, p)| p))
        .chain(self.cert_manager.iter())
        .chain(self.controllers.iter())
        {
            out.push_str(&format!("==== {} ====\n{}\n", p.name, p.tail()));
        }
        out
    }
}
