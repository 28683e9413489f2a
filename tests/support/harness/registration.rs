//! volguard serve, the no-op webhooks, and their registration (by the project's manifests, or
//! per namespace for the interleaved benches); cert-manager.

use super::*;

impl ControlPlane {
    /// Start `volguard serve` against this apiserver and register the project's webhook
    /// manifests with a loopback URL and the dev CA.
    pub async fn start_webhook(&mut self) {
        let extra = self.serve_extra.clone();
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let (serve, probe) = self
            .spawn_serve("volguard-serve", self.webhook_port, &extra)
            .await;
        self.serve = Some(serve);
        self.serve_port = self.webhook_port;
        self.serve_probe = probe;
        self.register_webhooks().await;
    }

    /// Make `next` (listening on `port`, probes on `probe`) the harness's serve; returns the one
    /// it replaces. Routing is the caller's (`route_webhooks_to`).
    pub fn replace_serve(&mut self, next: Proc, port: u16, probe: u16) -> Option<Proc> {
        self.serve_port = port;
        self.serve_probe = probe;
        self.serve.replace(next)
    }

    /// One `volguard serve` replica on `port` with the webhook identity and this cluster's serving
    /// certificate, once it is ready: its process and its probe port. Registers nothing.
    pub async fn spawn_serve(&mut self, name: &str, port: u16, extra: &[&str]) -> (Proc, u16) {
        let d = self.dir.path().to_path_buf();
        if self.webhook_ca.is_empty() && self.secret_sync.is_none() {
            let pki = volguard::devcerts::generate(&["127.0.0.1".into(), "localhost".into()])
                .expect("pki");
            volguard::devcerts::write(&d.join("webhook-certs"), &pki).expect("write");
            self.webhook_ca = pki.ca_pem;
        }
        let kc = self.sa_kubeconfig_file("volguard-webhook");
        let serve = Proc::spawn(
            name,
            Command::new(env!("CARGO_BIN_EXE_volguard"))
                .args(["--log-format", "json", "serve"])
                .arg(format!("--listen=127.0.0.1:{port}"))
                // Port 0, read back from its log: a port picked free here and passed on can be
                // taken by an outgoing connection before serve binds it (seen in CI with two
                // clusters side by side: "Address already in use" on a restart).
                .arg("--probe-listen=127.0.0.1:0")
                .arg(format!(
                    "--tls-cert={}",
                    d.join("webhook-certs/tls.crt").display()
                ))
                .arg(format!(
                    "--tls-key={}",
                    d.join("webhook-certs/tls.key").display()
                ))
                .arg(format!("--kubeconfig={}", kc.display()))
                .args(self.allow_flags())
                .args(extra)
                // Scenarios read every decision from the log; `make bench-scale` runs serve at
                // its production level (VOLGUARD_SERVE_LOG=info).
                .env(
                    "RUST_LOG",
                    std::env::var("VOLGUARD_SERVE_LOG")
                        .unwrap_or_else(|_| "volguard=debug,info".into()),
                ),
            &d,
        );
        let probe = match serve.logged_port("probes", Duration::from_secs(30)).await {
            Ok(p) => p,
            Err(e) => panic!("volguard serve did not start: {e}\n{}", serve.tail()),
        };
        if let Err(e) = wait_http_ok(
            &format!("http://127.0.0.1:{probe}/readyz"),
            // At bench-scale's sizes a cold start is measured, not refused: minutes, not seconds.
            Duration::from_secs(180),
        )
        .await
        {
            panic!("volguard serve not ready: {e}\n{}", serve.tail());
        }
        (serve, probe)
    }

    /// The no-op webhook of `make bench` (the floor example, `VOLGUARD_BENCH_FLOOR`): it answers
    /// every review "allowed", with volguard's serving certificate, on its own port.
    pub fn spawn_floor(&self) -> (Proc, u16) {
        self.floor_process("floor (no-op webhook)", &[])
    }

    /// The writing floor: on each bind one resourceVersion-checked write onto the claim.
    pub fn spawn_writing_floor(&self) -> (Proc, u16) {
        self.spawn_writing_floor_as("floor-writer", &["system:masters"])
    }

    /// The writing floor acting as `user` in `groups` (outside `system:masters`, its requests
    /// are queued by the FlowSchemas that match `user`, as volguard's are by its own).
    pub fn spawn_writing_floor_as(&self, user: &str, groups: &[&str]) -> (Proc, u16) {
        let kc = self.kubeconfig_file(user, user, groups);
        let args = ["--write-claims".to_string(), kc.display().to_string()];
        self.floor_process("floor (writing no-op webhook)", &args)
    }

    pub(super) fn floor_process(&self, what: &str, extra: &[String]) -> (Proc, u16) {
        let floor_bin = std::env::var("VOLGUARD_BENCH_FLOOR")
            .expect("VOLGUARD_BENCH_FLOOR (the floor example) is set by `make bench`");
        let d = self.dir.path().to_path_buf();
        let port = free_port();
        let p = Proc::spawn(
            what,
            Command::new(floor_bin)
                .arg("--listen")
                .arg(format!("0.0.0.0:{port}"))
                .arg("--tls-cert")
                .arg(d.join("webhook-certs/tls.crt"))
                .arg("--tls-key")
                .arg(d.join("webhook-certs/tls.key"))
                .args(extra),
            &d,
        );
        (p, port)
    }

    /// Point every webhook at `port` (the URL the apiserver dials) and wait until it does.
    pub async fn route_webhooks_to(&mut self, port: u16) {
        self.webhook_port = port;
        self.register_webhooks().await;
    }

    /// `make bench`'s interleaved binds: volguard's registrations once per `(mode, port)`, each
    /// limited to the namespaces labelled `BENCH_MODE=<mode>`, so that calls of every mode can
    /// alternate one by one instead of round by round. The main registration is removed first (it
    /// would see those namespaces too); `route_webhooks_to` puts it back.
    pub async fn register_webhooks_by_namespace(&mut self, sets: &[(&str, u16)]) {
        self.unregister_webhooks().await;
        let (text, ca) = self.webhooks_manifest();
        let client = self.admin().await;
        let host = if self.secret_sync.is_some() {
            "localhost"
        } else {
            "127.0.0.1"
        };
        for (mode, port) in sets {
            for doc in serde_yaml::Deserializer::from_str(&text) {
                let mut v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
                let which = match v["kind"].as_str() {
                    Some("MutatingWebhookConfiguration") => "mutating",
                    Some("ValidatingWebhookConfiguration") => "validating",
                    _ => continue,
                };
                v["metadata"] =
                    serde_json::json!({"name": format!("volguard-bench-{mode}-{which}")});
                for h in v["webhooks"].as_array_mut().into_iter().flatten() {
                    self.with_allow_list(h);
                    // Named per mode (`x.bench-<mode>.volguard.io`): the apiserver's histogram
                    // of each mode's calls is its own series.
                    let name = h["name"].as_str().unwrap_or_default();
                    if let Some(webhook) = name.strip_suffix(".volguard.io") {
                        h["name"] =
                            serde_json::json!(format!("{webhook}.bench-{mode}.volguard.io"));
                    }
                    let path = h["clientConfig"]["service"]["path"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    h["clientConfig"] = serde_json::json!({
                        "url": format!("https://{host}:{port}{path}"), "caBundle": ca});
                    let only =
                        serde_json::json!({"key": BENCH_MODE, "operator": "In", "values": [mode]});
                    let sel = &mut h["namespaceSelector"];
                    if !sel.is_object() {
                        *sel = serde_json::json!({});
                    }
                    match sel["matchExpressions"].as_array_mut() {
                        Some(list) => list.push(only),
                        None => sel["matchExpressions"] = serde_json::json!([only]),
                    }
                }
                if which == "mutating" {
                    let w: MutatingWebhookConfiguration = serde_json::from_value(v).expect("mwc");
                    replace_or_create(Api::all(client.clone()), w).await;
                } else {
                    let w: ValidatingWebhookConfiguration = serde_json::from_value(v).expect("vwc");
                    replace_or_create(Api::all(client.clone()), w).await;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    /// Remove what `register_webhooks_by_namespace` registered for `modes`.
    pub async fn unregister_webhooks_by_namespace(&mut self, modes: &[&str]) {
        let client = self.admin().await;
        for mode in modes {
            let _ = Api::<MutatingWebhookConfiguration>::all(client.clone())
                .delete(
                    &format!("volguard-bench-{mode}-mutating"),
                    &Default::default(),
                )
                .await;
            let _ = Api::<ValidatingWebhookConfiguration>::all(client.clone())
                .delete(
                    &format!("volguard-bench-{mode}-validating"),
                    &Default::default(),
                )
                .await;
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    /// Remove volguard's webhook registrations and wait until the apiserver stops calling.
    pub async fn unregister_webhooks(&mut self) {
        let client = self.admin().await;
        let _ = Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete("volguard-mutating", &Default::default())
            .await;
        let _ = Api::<ValidatingWebhookConfiguration>::all(client)
            .delete("volguard-validating", &Default::default())
            .await;
        self.registered = false;
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    pub fn stop_webhook(&mut self) {
        if let Some(mut p) = self.serve.take() {
            p.kill();
        }
    }

    /// `--force-delete-allow-user` for each of `force_delete_allow_users` (serve's and the
    /// controller's flags alike).
    pub(super) fn allow_flags(&self) -> Vec<String> {
        self.force_delete_allow_users
            .iter()
            .map(|u| format!("--force-delete-allow-user={u}"))
            .collect()
    }

    fn allow_list(&self) -> volguard::registration::webhooks::AllowList {
        volguard::registration::webhooks::AllowList {
            users: self.force_delete_allow_users.clone(),
            groups: Vec::new(),
        }
    }

    /// `v`, a configuration, annotated with the allow-list it is rendered for, as the chart does.
    fn annotate_allow_list(&self, v: &mut serde_json::Value) {
        if let (Some(a), Some(list)) = (
            v["metadata"]["annotations"].as_object_mut(),
            self.allow_list().annotation(),
        ) {
            a.insert(
                volguard::registration::webhooks::ALLOW_ANNOTATION.into(),
                list.into(),
            );
        }
    }

    /// `h`, a registered entry, with the allow-list condition its rule earns
    /// (`force_delete_allow_users`), as the chart renders it.
    fn with_allow_list(&self, h: &mut serde_json::Value) {
        let allow = self.allow_list();
        let skips = volguard::registration::webhooks::entries()
            .any(|e| h["name"] == e.name && e.skips_allow_list());
        if let (true, Some(c)) = (skips, allow.condition()) {
            match h["matchConditions"].as_array_mut() {
                Some(list) => list.push(c),
                None => h["matchConditions"] = serde_json::json!([c]),
            }
        }
    }

    /// volguard's registrations as shipped, and the CA bundle the apiserver must trust. The base
    /// ships the policies too and registers the entries they cover `Ignore`; the harness installs
    /// the policies only in the scenarios about them, so `register_webhooks` puts back each
    /// entry's failure policy without them.
    pub(super) fn webhooks_manifest(&self) -> (String, String) {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/manifests/base/webhooks.yaml"
        ))
        .expect("manifest");
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.webhook_ca);
        (text, ca)
    }

    pub(super) async fn register_webhooks(&mut self) {
        let (text, ca) = self.webhooks_manifest();
        let client = self.admin().await;
        // With cert-manager, the issued certificate names `localhost` and its CA (the Secret's
        // ca.crt, read by `start_cert_manager`) is written here, as volguard's controller does
        // with --ca-secret: the configurations carry no cainjector annotation. Otherwise the dev CA.
        let by_cert_manager = self.secret_sync.is_some();
        // Re-registered after a restart: keep the bundle cainjector wrote (same CA) so that no
        // call meets an empty one.
        let keep_bundle = std::mem::replace(&mut self.registered, true);
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let mut v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
            if keep_bundle && self.cainjector_dropped_match_conditions {
                // Out of cainjector's reach: it would erase the conditions again on every sync.
                if let Some(a) = v["metadata"]["annotations"].as_object_mut() {
                    a.remove("cert-manager.io/inject-ca-from");
                }
            }
            // Registered without the policies (below), and so annotated: the controller's drift
            // check compares the annotation with its flags.
            if let Some(a) = v["metadata"]["annotations"].as_object_mut() {
                a.insert(
                    volguard::registration::webhooks::FAILURE_MODE_ANNOTATION.into(),
                    "enforcement=deny; policies=false; forceIgnore=false".into(),
                );
            }
            self.annotate_allow_list(&mut v);
            // Same rewrite for both kinds: service reference -> loopback URL.
            for h in v["webhooks"].as_array_mut().into_iter().flatten() {
                self.with_allow_list(h);
                if let Some(e) =
                    volguard::registration::webhooks::entries().find(|e| h["name"] == e.name)
                {
                    h["failurePolicy"] = e
                        .failure_policy(&volguard::registration::webhooks::FailureMode::default())
                        .into();
                }
                let cc = &mut h["clientConfig"];
                let path = cc["service"]["path"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let host = if by_cert_manager {
                    "localhost"
                } else {
                    "127.0.0.1"
                };
                *cc = serde_json::json!({"url": format!("https://{host}:{}{path}", self.webhook_port)});
                cc["caBundle"] = ca.clone().into();
            }
            match v["kind"].as_str() {
                Some("MutatingWebhookConfiguration") => {
                    let w: MutatingWebhookConfiguration = serde_json::from_value(v).expect("mwc");
                    replace_or_create(Api::all(client.clone()), w).await;
                }
                Some("ValidatingWebhookConfiguration") => {
                    let w: ValidatingWebhookConfiguration = serde_json::from_value(v).expect("vwc");
                    replace_or_create(Api::all(client.clone()), w).await;
                }
                _ => {}
            }
        }
        // The apiserver picks up webhook configurations through an informer: wait until it calls us.
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }

    /// cert-manager's controller and cainjector (v1.11.5, built from its Go module), with the
    /// project's own certificate chain (manifests/base/certificates.yaml) applied for real. The
    /// serving Certificate also names `localhost`, the host the apiserver dials here. Their
    /// identity is a cluster admin: their Helm chart's RBAC is not part of this project.
    pub async fn start_cert_manager(&mut self) {
        self.start_cert_manager_processes();
        let d = self.dir.path().to_path_buf();
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/manifests/base/certificates.yaml"
        ))
        .expect("certificates.yaml");
        let mut docs = Vec::new();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let mut v: serde_json::Value = serde::Deserialize::deserialize(doc).expect("yaml");
            if v["kind"] == "Certificate" && v["metadata"]["name"] == "volguard-webhook" {
                v["spec"]["dnsNames"]
                    .as_array_mut()
                    .expect("dnsNames")
                    .push("localhost".into());
            }
            docs.push(serde_yaml::to_string(&v).expect("yaml"));
        }
        let file = d.join("certificates.yaml");
        std::fs::write(&file, docs.join("---\n")).expect("write");
        apply_file(&self.admin().await, &file, false).await;
        let secrets = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
            self.admin().await,
            "volguard-system",
        );
        let issued = self
            .eventually(
                "cert-manager issues volguard-webhook-tls",
                Duration::from_secs(90),
                || {
                    let secrets = secrets.clone();
                    async move {
                        let data = secrets.get("volguard-webhook-tls").await.ok()?.data?;
                        let ca = data.get("ca.crt")?.0.clone();
                        data.contains_key("tls.crt").then_some(ca)
                    }
                },
            )
            .await;
        self.webhook_ca = String::from_utf8(issued).expect("ca pem");
        let out = d.join("webhook-certs");
        std::fs::create_dir_all(&out).expect("dir");
        sync_secret_once(&secrets, &out).await;
        self.secret_sync = Some(tokio::spawn(async move {
            loop {
                sync_secret_once(&secrets, &out).await;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }));
    }

    /// cert-manager's controller and cainjector alone (an install brings its own certificates).
    pub fn start_cert_manager_processes(&mut self) {
        let d = self.dir.path().to_path_buf();
        let bin = made("VOLGUARD_CERT_MANAGER_DIR");
        let kc = self.kubeconfig_file("cert-manager", "cert-manager", &["system:masters"]);
        let controller = Proc::spawn(
            "cert-manager-controller",
            Command::new(bin.join("controller"))
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg("--leader-elect=false")
                .arg("--cluster-resource-namespace=volguard-system")
                .arg(format!(
                    "--metrics-listen-address=127.0.0.1:{}",
                    free_port()
                ))
                .arg("--v=2"),
            &d,
        );
        let cainjector = Proc::spawn(
            "cert-manager-cainjector",
            Command::new(bin.join("cainjector"))
                .env("KUBECONFIG", &kc)
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg("--leader-elect=false")
                .arg("--v=2"),
            &d,
        );
        self.cert_manager = vec![controller, cainjector];
    }

    /// How many matchConditions the registered webhook configurations hold now.
    pub async fn match_conditions(&self) -> usize {
        let client = self.admin().await;
        let m = Api::<MutatingWebhookConfiguration>::all(client.clone())
            .get("volguard-mutating")
            .await
            .expect("mutating config");
        let v = Api::<ValidatingWebhookConfiguration>::all(client)
            .get("volguard-validating")
            .await
            .expect("validating config");
        let mutating: usize = m
            .webhooks
            .unwrap_or_default()
            .iter()
            .map(|w| w.match_conditions.as_ref().map_or(0, Vec::len))
            .sum();
        let validating: usize = v
            .webhooks
            .unwrap_or_default()
            .iter()
            .map(|w| w.match_conditions.as_ref().map_or(0, Vec::len))
            .sum();
        mutating + validating
    }
}
