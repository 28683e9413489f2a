//! Clients and kubeconfigs: as a user, a ServiceAccount (impersonated), the admin, a kubelet.

use super::*;

impl ControlPlane {
    /// A kubeconfig with a client certificate for `user` in `groups`.
    pub fn kubeconfig_yaml(&self, user: &str, groups: &[&str]) -> String {
        self.kubeconfig_impersonating(user, groups, None)
    }

    /// As `kubeconfig_yaml`, acting as the ServiceAccount `namespace/name` (impersonation): the
    /// process then holds exactly the RBAC the manifests give that ServiceAccount.
    pub fn kubeconfig_impersonating(
        &self,
        user: &str,
        groups: &[&str],
        sa: Option<(&str, &str)>,
    ) -> String {
        let pair = self.pki.issue(user, groups, &[]);
        let imp = match sa {
            Some((ns, name)) => format!(
                "    as: system:serviceaccount:{ns}:{name}\n    as-groups: [system:serviceaccounts, \"system:serviceaccounts:{ns}\", system:authenticated]\n"
            ),
            None => String::new(),
        };
        let identity = match sa {
            Some((ns, name)) => format!("system:serviceaccount:{ns}:{name}"),
            None => user.to_string(),
        };
        let server = self
            .metered
            .get(&identity)
            .map_or(self.api_url.as_str(), |m| m.url.as_str());
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers:\n- name: u\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n{imp}contexts:\n- name: c\n  context: {{cluster: e2e, user: u}}\ncurrent-context: c\n",
            server,
            b64(&self.pki.ca_pem),
            b64(&pair.cert_pem),
            b64(&pair.key_pem)
        )
    }

    /// Count what the apiserver sends `identity` (a user, or `system:serviceaccount:NS:NAME`)
    /// from now on: the kubeconfigs written for it afterwards name a relay that counts.
    pub fn meter(&mut self, identity: &str) -> meter::Meter {
        let apiserver = self.api_url.trim_start_matches("https://").to_string();
        self.metered
            .entry(identity.to_string())
            .or_insert_with(|| meter::Meter::start(apiserver))
            .clone()
    }

    pub fn sa_kubeconfig_file(&self, sa: &str) -> PathBuf {
        self.sa_kubeconfig_in("volguard-system", sa)
    }

    /// A kubeconfig acting as the ServiceAccount `namespace/sa`.
    pub fn sa_kubeconfig_in(&self, namespace: &str, sa: &str) -> PathBuf {
        let p = self.dir.path().join(format!("{namespace}-{sa}.kubeconfig"));
        let text = self.kubeconfig_impersonating(
            "e2e-impersonator",
            &["system:masters"],
            Some((namespace, sa)),
        );
        std::fs::write(&p, text).expect("write kubeconfig");
        p
    }

    pub async fn sa_client(&self, sa: &str) -> kube::Client {
        let text = self.kubeconfig_impersonating(
            "e2e-impersonator",
            &["system:masters"],
            Some(("volguard-system", sa)),
        );
        let kc: kube::config::Kubeconfig = serde_yaml::from_str(&text).expect("kubeconfig");
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .expect("config");
        kube::Client::try_from(cfg).expect("client")
    }

    pub fn kubeconfig_file(&self, name: &str, user: &str, groups: &[&str]) -> PathBuf {
        let p = self.dir.path().join(format!("{name}.kubeconfig"));
        std::fs::write(&p, self.kubeconfig_yaml(user, groups)).expect("write kubeconfig");
        p
    }

    pub async fn client_as(&self, user: &str, groups: &[&str]) -> kube::Client {
        let kc: kube::config::Kubeconfig =
            serde_yaml::from_str(&self.kubeconfig_yaml(user, groups)).expect("kubeconfig");
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .expect("config");
        kube::Client::try_from(cfg).expect("client")
    }

    pub async fn admin(&self) -> kube::Client {
        self.client_as("e2e-admin", &["system:masters"]).await
    }

    /// The kubelet of `node`, as the Node authorizer knows it.
    pub async fn kubelet(&self, node: &str) -> kube::Client {
        self.client_as(&format!("system:node:{node}"), &["system:nodes"])
            .await
    }
}
