//! Real nodes beside a `ControlPlane`: per node a network namespace on one test bridge, a
//! containerd (v2, CRI) and a kubelet started inside it, the node's own cgroup in every
//! hierarchy (so "power off" and "hang" are one write), and the test CSI driver's node plugin;
//! once per cluster the driver's controller service with the real external-provisioner and
//! external-attacher. `make e2e` builds all of it into `.cache/nodes/` (VOLGUARD_NODES_DIR).
//!
//! Everything is torn down on drop, pass or fail: processes (containers included, through the
//! node cgroups), mounts under the cluster's directory, cgroups, namespaces and links.

use super::harness::{ControlPlane, Proc, free_port};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The test CSI driver (e2e/csi-driver) plays two drivers, each with its StorageClass (reclaim
/// policy Delete): block-like storage the attach/detach controller attaches to one node at a
/// time (VolumeAttachments, Multi-Attach), and a shared filesystem with no attach step (NFS-like),
/// where a volume is deleted as soon as its volume object is released.
pub struct Driver {
    pub name: &'static str,
    pub class: &'static str,
    pub attach: bool,
}
pub const ATTACHED: Driver = Driver {
    name: "hostpath.e2e.volguard.io",
    class: "e2e-csi",
    attach: true,
};
pub const SHARED_FS: Driver = Driver {
    name: "sharedfs.e2e.volguard.io",
    class: "e2e-sharedfs",
    attach: false,
};
const DRIVERS: [&Driver; 2] = [&ATTACHED, &SHARED_FS];
/// The one image every real-node pod runs (busybox and pause; e2e/nodes/image.sh).
pub const IMAGE: &str = "e2e.volguard.io/node:e2e";

fn bins() -> PathBuf {
    PathBuf::from(std::env::var("VOLGUARD_NODES_DIR").unwrap_or_else(|_| {
        panic!("VOLGUARD_NODES_DIR is not set: run the real-node tests with `make e2e` (it builds kubelet, containerd, the CSI sidecars and the test driver into .cache/nodes/)")
    }))
}

fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn must(args: &[&str]) {
    if let Err(e) = run(args) {
        panic!("{e}");
    }
}

/// The cgroup v1 hierarchies (and the unified one, where mounted) this machine has.
fn hierarchies() -> Vec<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && (f[2] == "cgroup" || f[2] == "cgroup2")).then(|| PathBuf::from(f[1]))
        })
        .collect()
}

/// The source addresses whose way to the apiserver is cut (a partition between a node and the
/// control plane only): the relay stops carrying their bytes, both ways, until restored.
type Cuts = std::sync::Arc<std::sync::RwLock<std::collections::HashSet<std::net::IpAddr>>>;

/// A TCP relay on the bridge's host address to the apiserver on loopback, on its own thread
/// and runtime (a test may block its own), so the nodes reach the apiserver as a real node would.
/// Bytes from or to a cut address wait, unread, as packets a dead link drops would be resent
/// once it is back: the kubelet's requests time out, its connections stay open.
fn relay(listen: std::net::SocketAddr, to: u16, cuts: Cuts) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = std::net::TcpListener::bind(listen).expect("relay bind");
    crate::support::harness::meter::accept_apart(l, move |inbound, peer| {
        let cuts = cuts.clone();
        async move {
            let cut = || cuts.read().is_ok_and(|c| c.contains(&peer.ip()));
            while cut() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let Ok(outbound) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await else {
                return;
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let (ri, wi) = inbound.into_split();
            let (ro, wo) = outbound.into_split();
            let pipe = |mut r: tokio::net::tcp::OwnedReadHalf,
                        mut w: tokio::net::tcp::OwnedWriteHalf| async move {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match r.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            while cut() {
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                            if w.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
                let _ = w.shutdown().await;
            };
            tokio::join!(pipe(ri, wo), pipe(ro, wi));
        }
    });
}

pub struct RealNode {
    pub name: String,
    pub ip: String,
    pub netns: String,
    /// The host side of the node's link: down is a partition.
    pub link: String,
    pub dir: PathBuf,
    /// The node's cgroup, relative to each hierarchy's root.
    pub cgroup: String,
    /// The machine's mount namespace (a file it is bound to); a new one each boot.
    mntns: PathBuf,
    pub boots: u32,
    containerd: Option<Proc>,
    kubelet: Option<Proc>,
    /// kube-proxy, on a cluster that serves Services to pods (`RealNodes::serve_services`).
    proxy: Option<Proc>,
    csi: Vec<Proc>,
}

pub struct RealNodes {
    pub id: String,
    /// The bridge's /16 (second octet by process, so two suites on one machine never share it).
    net: u8,
    host_ip: String,
    pub bridge: String,
    pub dir: PathBuf,
    /// The directory under which every volume's bytes live (shared by all nodes).
    pub volumes: PathBuf,
    pub nodes: Vec<RealNode>,
    relay_port: u16,
    cuts: Cuts,
    ca_pem: String,
    controller: Vec<Proc>,
    /// Whether pods reach Services (kube-proxy on every node, the `kubernetes` Service's
    /// endpoints, the host's routes to the pod networks); off, nothing here needs them.
    services: bool,
    /// Registries (`host:port`) every node's containerd trusts, with the cluster's CA.
    registries: Vec<String>,
}

impl RealNodes {
    /// The bridge, the relay, the CSI controller side and the objects that name the driver.
    pub async fn start(cp: &ControlPlane) -> RealNodes {
        let id = format!("{:x}", std::process::id() % 0xfff);
        let bridge = format!("vgb{id}");
        let net = 100 + (std::process::id() % 100) as u8;
        let host_ip = format!("10.{net}.0.1");
        let dir = cp.dir.path().join("nodes");
        let volumes = dir.join("volumes");
        std::fs::create_dir_all(&volumes).expect("volumes dir");
        let _ = run(&["ip", "link", "del", &bridge]);
        must(&["ip", "link", "add", &bridge, "type", "bridge"]);
        must(&[
            "ip",
            "addr",
            "add",
            &format!("{host_ip}/16"),
            "dev",
            &bridge,
        ]);
        must(&["ip", "link", "set", &bridge, "up"]);
        let api_port: u16 = cp
            .api_url
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("api port");
        let relay_port = free_port();
        let cuts = Cuts::default();
        relay(
            format!("{host_ip}:{relay_port}").parse().expect("addr"),
            api_port,
            cuts.clone(),
        );
        let mut rn = RealNodes {
            id,
            net,
            host_ip,
            bridge,
            dir,
            volumes,
            nodes: Vec::new(),
            relay_port,
            cuts,
            ca_pem: cp.pki.ca_pem.clone(),
            controller: Vec::new(),
            services: false,
            registries: Vec::new(),
        };
        rn.start_csi_controller(cp).await;
        rn
    }

    async fn start_csi_controller(&mut self, cp: &ControlPlane) {
        let admin = cp.admin().await;
        let mut objects = vec![serde_json::json!(
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
             "metadata": {"name": "e2e-csi-sidecars"},
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
             "subjects": [
                {"kind": "ServiceAccount", "name": "csi-provisioner", "namespace": "kube-system"},
                {"kind": "ServiceAccount", "name": "csi-attacher", "namespace": "kube-system"}]})];
        for d in DRIVERS {
            objects.push(serde_json::json!(
                {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": d.name},
                 "spec": {"attachRequired": d.attach, "podInfoOnMount": false, "volumeLifecycleModes": ["Persistent"]}}));
            objects.push(serde_json::json!(
                {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                 "metadata": {"name": d.class}, "provisioner": d.name, "reclaimPolicy": "Delete",
                 "volumeBindingMode": "Immediate"}));
        }
        for o in &objects {
            let gvk: kube::api::GroupVersionKind = serde_json::from_value(serde_json::json!({
                    "group": o["apiVersion"].as_str().unwrap_or("").split('/').next(),
                    "version": "v1", "kind": o["kind"]}))
            .expect("gvk");
            let (ar, _) = kube::discovery::pinned_kind(&admin, &gvk)
                .await
                .expect("kind");
            let api: Api<kube::api::DynamicObject> = Api::all_with(admin.clone(), &ar);
            let obj: kube::api::DynamicObject = serde_json::from_value(o.clone()).expect("obj");
            api.create(&PostParams::default(), &obj)
                .await
                .unwrap_or_else(|e| panic!("create {}: {e}", o["kind"]));
        }
        for d in DRIVERS {
            let sock = self.dir.join(format!("{}.sock", d.class));
            self.controller.push(Proc::spawn(
                &format!("csi-controller-{}", d.class),
                Command::new(bins().join("volguard-test-csi"))
                    .arg("controller")
                    .arg(format!("--name={}", d.name))
                    .arg(format!("--endpoint=unix://{}", sock.display()))
                    .arg(format!("--root={}", self.volumes.display())),
                &self.dir,
            ));
            // As a real cluster runs them: their own ServiceAccounts' identities (client
            // certificates naming them), leader election off (one replica).
            let mut sidecars = vec![(
                "csi-provisioner",
                &["--extra-create-metadata", "--feature-gates=Topology=false"][..],
            )];
            if d.attach {
                sidecars.push(("csi-attacher", &[][..]));
            }
            for (name, extra) in sidecars {
                let user = format!("system:serviceaccount:kube-system:{name}");
                let kc = cp.kubeconfig_file(
                    name,
                    &user,
                    &[
                        "system:serviceaccounts",
                        "system:serviceaccounts:kube-system",
                    ],
                );
                self.controller.push(Proc::spawn(
                    &format!("{name}-{}", d.class),
                    Command::new(bins().join(name))
                        .arg(format!("--csi-address={}", sock.display()))
                        .arg(format!("--kubeconfig={}", kc.display()))
                        .arg("--leader-election=false")
                        .arg("--timeout=30s")
                        .arg("--v=3")
                        .args(extra),
                    &self.dir,
                ));
            }
        }
    }

    /// Pods reach Services as on a cluster with a network: kube-proxy (iptables mode) on every
    /// node added from now on, and the `kubernetes` Service's endpoints written by hand (the
    /// apiserver listens on loopback, its reconciler is off): the relay on the bridge. The host
    /// routes each node's pod network to the node, so the apiserver reaches webhook pods.
    pub async fn serve_services(&mut self, cp: &ControlPlane) {
        assert!(
            self.nodes.is_empty(),
            "serve_services before the first node"
        );
        self.services = true;
        let c = cp.admin().await;
        let ep = serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "kubernetes",
                                    "endpointslice.kubernetes.io/managed-by": "e2e.volguard.io"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [self.host_ip], "conditions": {"ready": true}}],
            "ports": [{"name": "https", "port": self.relay_port, "protocol": "TCP"}]});
        let slice: k8s_openapi::api::discovery::v1::EndpointSlice =
            serde_json::from_value(ep).expect("endpointslice");
        Api::<k8s_openapi::api::discovery::v1::EndpointSlice>::namespaced(c, "default")
            .create(&PostParams::default(), &slice)
            .await
            .expect("the kubernetes Service's endpoints");
    }

    /// Every node added from now on pulls from `host` (`host:port`, HTTPS with a certificate the
    /// cluster's CA issued), as a private registry's nodes are configured (containerd hosts.toml).
    pub fn trust_registry(&mut self, host: &str) {
        assert!(
            self.nodes.is_empty(),
            "trust_registry before the first node"
        );
        self.registries.push(host.to_string());
    }

    /// The bridge's host address: where the nodes reach this machine (a registry, an agent).
    pub fn host_ip(&self) -> &str {
        &self.host_ip
    }

    fn kubeconfig(&self, cp: &ControlPlane, node: &str) -> String {
        self.kubeconfig_of(cp, &format!("system:node:{node}"), &["system:nodes"])
    }

    fn kubeconfig_of(&self, cp: &ControlPlane, user: &str, groups: &[&str]) -> String {
        let pair = cp.pki.issue(user, groups, &[]);
        use base64::Engine;
        let b = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: https://{}:{}\n    tls-server-name: localhost\n    certificate-authority-data: {}\nusers:\n- name: u\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: c\n  context: {{cluster: e2e, user: u}}\ncurrent-context: c\n",
            self.host_ip,
            self.relay_port,
            b(&self.ca_pem),
            b(&pair.cert_pem),
            b(&pair.key_pem)
        )
    }

    /// A real node `name`: returns once the apiserver reports it Ready, its CSI driver
    /// registered (CSINode) and the image imported.
    pub async fn add(&mut self, cp: &ControlPlane, name: &str) -> usize {
        let n = self.nodes.len() + 2;
        let ip = format!("10.{}.0.{n}", self.net);
        let netns = format!("vg{}-{name}", self.id);
        let link = format!("vg{}h{n}", self.id);
        let peer = format!("vg{}n{n}", self.id);
        let dir = self.dir.join(name);
        for d in ["containerd", "cni", "kubelet", "certs"] {
            std::fs::create_dir_all(dir.join(d)).expect("node dir");
        }
        let _ = run(&["ip", "netns", "del", &netns]);
        must(&["ip", "netns", "add", &netns]);
        must(&[
            "ip", "link", "add", &link, "type", "veth", "peer", "name", &peer,
        ]);
        must(&["ip", "link", "set", &peer, "netns", &netns]);
        must(&["ip", "link", "set", &link, "master", &self.bridge, "up"]);
        let inns = |args: &[&str]| {
            let mut v = vec!["ip", "netns", "exec", netns.as_str()];
            v.extend_from_slice(args);
            must(&v);
        };
        inns(&["ip", "addr", "add", &format!("{ip}/16"), "dev", &peer]);
        inns(&["ip", "link", "set", &peer, "up"]);
        inns(&["ip", "link", "set", "lo", "up"]);
        inns(&["ip", "route", "add", "default", "via", &self.host_ip]);

        // The node's cgroup in every hierarchy; the cpuset one needs its cpus and mems.
        let cgroup = format!("{}-{name}", self.cgroup_prefix());
        for h in hierarchies() {
            let c = h.join(&cgroup);
            let _ = std::fs::create_dir_all(&c);
            for f in ["cpuset.cpus", "cpuset.mems"] {
                if let Ok(v) = std::fs::read_to_string(h.join(f)) {
                    let _ = std::fs::write(c.join(f), v);
                }
            }
        }

        let ctrd = dir.join("containerd");
        let sock = ctrd.join("containerd.sock");
        std::fs::write(
            ctrd.join("config.toml"),
            format!(
                r#"version = 3
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.nri.v1.nri"]
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{sock}.ttrpc"
[plugins.'io.containerd.internal.v1.opt']
  path = "{opt}"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{IMAGE}"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "{registries}"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
    Root = "{runc}"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "{cni}"
"#,
                root = ctrd.join("root").display(),
                state = ctrd.join("state").display(),
                sock = sock.display(),
                opt = ctrd.join("opt").display(),
                runc = ctrd.join("runc").display(),
                cni = dir.join("cni").display(),
                registries = ctrd.join("certs.d").display(),
            ),
        )
        .expect("containerd config");
        for host in &self.registries {
            let d = ctrd.join("certs.d").join(host);
            std::fs::create_dir_all(&d).expect("certs.d");
            std::fs::write(d.join("ca.crt"), &self.ca_pem).expect("registry ca");
            std::fs::write(
                d.join("hosts.toml"),
                format!(
                    "server = \"https://{host}\"\n[host.\"https://{host}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = \"{}\"\n",
                    d.join("ca.crt").display()
                ),
            )
            .expect("hosts.toml");
        }
        if self.services {
            // The apiserver (on this machine) reaches the node's pods through the node.
            must(&[
                "ip",
                "route",
                "replace",
                &format!("10.244.{n}.0/24"),
                "via",
                &ip,
            ]);
            std::fs::write(
                dir.join("kube-proxy.kubeconfig"),
                self.kubeconfig_of(cp, "system:kube-proxy", &[]),
            )
            .expect("kube-proxy kubeconfig");
            std::fs::write(
                dir.join("kube-proxy.yaml"),
                format!(
                    "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclientConnection: {{kubeconfig: {kc}}}\nhostnameOverride: {name}\nbindAddress: {ip}\nhealthzBindAddress: {ip}:10256\nmetricsBindAddress: {ip}:10249\nmode: iptables\nclusterCIDR: 10.244.0.0/16\nconntrack: {{maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}\n",
                    kc = dir.join("kube-proxy.kubeconfig").display()
                ),
            )
            .expect("kube-proxy config");
        }
        std::fs::write(
            dir.join("cni/10-e2e.conflist"),
            serde_json::json!({
                "cniVersion": "1.0.0", "name": format!("e2e-{name}"),
                "plugins": [
                    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
                     "ipam": {"type": "host-local", "ranges": [[{"subnet": format!("10.244.{n}.0/24")}]],
                              "routes": [{"dst": "0.0.0.0/0"}],
                              "dataDir": dir.join("cni-ipam").display().to_string()}},
                    {"type": "loopback"}
                ]
            })
            .to_string(),
        )
        .expect("cni config");
        std::fs::write(dir.join("certs/ca.crt"), &self.ca_pem).expect("ca");
        std::fs::write(dir.join("kubeconfig"), self.kubeconfig(cp, name)).expect("kubeconfig");
        std::fs::write(
            dir.join("kubelet.yaml"),
            format!(
                r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /{cgroup}
containerRuntimeEndpoint: unix://{sock}
address: {ip}
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {{enabled: true}}
  webhook: {{enabled: false}}
  x509: {{clientCAFile: {ca}}}
authorization: {{mode: AlwaysAllow}}
failSwapOn: false
resolvConf: ""
nodeLeaseDurationSeconds: 8
nodeStatusUpdateFrequency: 4s
nodeStatusReportFrequency: 10s
syncFrequency: 10s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {{memory.available: "1Mi", nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}}
serializeImagePulls: false
volumePluginDir: {plugins}
podLogsDir: {logs}
"#,
                sock = sock.display(),
                ca = dir.join("certs/ca.crt").display(),
                plugins = dir.join("flexvolume").display(),
                // Each machine its own: a kubelet removes the log directories of pods it does not
                // run, so two kubelets sharing /var/log/pods deleted each other's logs.
                logs = dir.join("pod-logs").display(),
            ),
        )
        .expect("kubelet config");
        self.nodes.push(RealNode {
            name: name.into(),
            ip,
            netns,
            link,
            dir,
            cgroup,
            mntns: PathBuf::new(),
            boots: 0,
            containerd: None,
            kubelet: None,
            proxy: None,
            csi: Vec::new(),
        });
        let i = self.nodes.len() - 1;
        self.boot(i);
        self.wait_ready(cp, i).await;
        i
    }

    /// Start the node's machine: a fresh mount namespace whose boot ID is new (the kubelet
    /// reports it as `status.nodeInfo.bootID`), its run-time state gone as after a reboot (disk
    /// state — images, the kubelet's directory — stays), then containerd, the node image, the
    /// kubelet and the CSI node plugins.
    fn boot(&mut self, i: usize) {
        let node = &self.nodes[i];
        let (name, dir) = (node.name.clone(), node.dir.clone());
        let boots = node.boots + 1;
        let mntns = dir.join(format!("mnt-{boots}"));
        let bootid = dir.join(format!("boot_id-{boots}"));
        let id = format!(
            "{:08x}-0000-4000-8000-{:012x}",
            std::process::id(),
            (i as u64) << 16 | u64::from(boots)
        );
        std::fs::write(&bootid, format!("{id}\n")).expect("boot id");
        std::fs::write(&mntns, "").expect("mount ns file");
        must(&[
            "unshare",
            &format!("--mount={}", mntns.display()),
            "--propagation",
            "private",
            "mount",
            "--bind",
            &bootid.display().to_string(),
            "/proc/sys/kernel/random/boot_id",
        ]);
        let _ = std::fs::remove_dir_all(dir.join("containerd/state"));
        if !self.nodes[i].mntns.as_os_str().is_empty() {
            let _ = Command::new("umount").arg(&self.nodes[i].mntns).status();
        }
        self.nodes[i].mntns = mntns;
        self.nodes[i].boots = boots;
        let containerd = self.start_containerd(i);
        let sock = dir.join("containerd/containerd.sock");
        if boots == 1 {
            let mut tars: Vec<PathBuf> = std::fs::read_dir(bins().join("images"))
                .expect("the node images (make nodes)")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "tar"))
                .collect();
            tars.sort();
            for tar in tars {
                let import = Command::new(bins().join("ctr"))
                    .arg(format!("--address={}", sock.display()))
                    .args(["-n", "k8s.io", "images", "import"])
                    .arg(&tar)
                    .output()
                    .expect("ctr");
                assert!(
                    import.status.success(),
                    "import {} on {name}: {}",
                    tar.display(),
                    String::from_utf8_lossy(&import.stderr)
                );
            }
        }
        let kubelet_dir = dir.join("kubelet");
        let kubelet = self.spawn_kubelet(i);
        let mut csi = Vec::new();
        for d in DRIVERS {
            csi.push(self.spawn_in(
                i,
                &format!("csi-node-{}", d.class),
                &[
                    bins().join("volguard-test-csi").display().to_string(),
                    "node".into(),
                    format!("--name={}", d.name),
                    format!(
                        "--endpoint=unix://{}",
                        kubelet_dir.join(format!("plugins/{}/csi.sock", d.name)).display()
                    ),
                    format!(
                        "--registration=unix://{}",
                        kubelet_dir
                            .join(format!("plugins_registry/{}-reg.sock", d.name))
                            .display()
                    ),
                    format!("--node={name}"),
                    format!("--root={}", self.volumes.display()),
                ],
            ));
        }
        let proxy = self.services.then(|| {
            self.spawn_in(
                i,
                "kube-proxy",
                &[
                    bins().join("kube-proxy").display().to_string(),
                    format!("--config={}", dir.join("kube-proxy.yaml").display()),
                    "--v=2".into(),
                ],
            )
        });
        let n = &mut self.nodes[i];
        n.containerd = Some(containerd);
        n.kubelet = Some(kubelet);
        n.proxy = proxy;
        n.csi = csi;
    }

    /// containerd of node `i`, once its socket answers.
    fn start_containerd(&self, i: usize) -> Proc {
        let n = &self.nodes[i];
        let ctrd = n.dir.join("containerd");
        let sock = ctrd.join("containerd.sock");
        let _ = std::fs::remove_file(&sock);
        let containerd = self.spawn_in(
            i,
            "containerd",
            &[
                bins().join("containerd").display().to_string(),
                format!("--config={}", ctrd.join("config.toml").display()),
            ],
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while !sock.exists() {
            assert!(
                Instant::now() < deadline,
                "containerd of {} did not start:\n{}",
                n.name,
                containerd.tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        containerd
    }

    fn spawn_kubelet(&self, i: usize) -> Proc {
        let n = &self.nodes[i];
        let dir = &n.dir;
        self.spawn_in(
            i,
            "kubelet",
            &[
                bins().join("kubelet").display().to_string(),
                format!("--config={}", dir.join("kubelet.yaml").display()),
                format!("--kubeconfig={}", dir.join("kubeconfig").display()),
                format!("--root-dir={}", dir.join("kubelet").display()),
                format!("--cert-dir={}", dir.join("certs").display()),
                format!("--hostname-override={}", n.name),
                format!("--node-ip={}", n.ip),
                "--v=2".into(),
            ],
        )
    }

    /// The kubelet of a running machine killed and started again (containers keep running).
    pub fn restart_kubelet(&mut self, name: &str) {
        let i = self.index(name);
        if let Some(mut k) = self.nodes[i].kubelet.take() {
            k.kill();
        }
        self.nodes[i].kubelet = Some(self.spawn_kubelet(i));
    }

    /// containerd of a running machine killed and started again (its shims, and so the
    /// containers, keep running).
    pub fn restart_containerd(&mut self, name: &str) {
        let i = self.index(name);
        if let Some(mut c) = self.nodes[i].containerd.take() {
            c.kill();
        }
        self.nodes[i].containerd = Some(self.start_containerd(i));
    }

    /// Whether the machine runs (a fence or a power-off leaves none of its processes).
    pub fn running(&self, name: &str) -> bool {
        !procs_under_all(&self.node(name).cgroup).is_empty()
    }

    /// A process of node `i`'s machine: in its cgroup, network and mount namespaces; its log
    /// is named after the boot (`kubelet-2.log` after the first power cycle).
    fn spawn_in(&self, i: usize, name: &str, argv: &[String]) -> Proc {
        let n = &self.nodes[i];
        let join: String = hierarchies()
            .iter()
            .map(|h| {
                format!(
                    "echo $$ > {}/cgroup.procs 2>/dev/null; ",
                    h.join(&n.cgroup).display()
                )
            })
            .collect();
        Proc::spawn(
            &format!("{name}-{}", n.boots),
            Command::new("sh")
                // containerd finds its shim, and the shim finds runc, on PATH.
                .env(
                    "PATH",
                    format!(
                        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                        bins().display()
                    ),
                )
                .arg("-c")
                .arg(format!(
                    "{join}exec nsenter --net=/run/netns/{} --mount={} \"$@\"",
                    n.netns,
                    n.mntns.display()
                ))
                .arg("sh")
                .args(argv),
            &n.dir,
        )
    }

    async fn wait_ready(&self, cp: &ControlPlane, i: usize) {
        let node = &self.nodes[i];
        let nodes: Api<Node> = Api::all(cp.admin().await);
        let csinodes: Api<k8s_openapi::api::storage::v1::CSINode> = Api::all(cp.admin().await);
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let ready = nodes
                .get_opt(&node.name)
                .await
                .ok()
                .flatten()
                .is_some_and(|n| {
                    n.status
                        .and_then(|s| s.conditions)
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                });
            let registered = csinodes
                .get_opt(&node.name)
                .await
                .ok()
                .flatten()
                .is_some_and(|c| {
                    DRIVERS
                        .iter()
                        .all(|d| c.spec.drivers.iter().any(|x| x.name == d.name))
                });
            if ready && registered {
                return;
            }
            if Instant::now() > deadline {
                panic!(
                    "real node {} not ready (ready {ready}, csi registered {registered}):\n{}",
                    node.name,
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The file a writer appends to (`support::records`), on the shared storage root, for the
    /// claim `ns/name` once it is bound.
    pub async fn log_of(&self, cp: &ControlPlane, ns: &str, name: &str) -> PathBuf {
        let c = cp.admin().await;
        let pv = cp
            .eventually("the claim is bound", Duration::from_secs(60), || async {
                Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(c.clone(), ns)
                    .get(name)
                    .await
                    .ok()
                    .and_then(|p| p.spec?.volume_name)
            })
            .await;
        let pv = Api::<k8s_openapi::api::core::v1::PersistentVolume>::all(c)
            .get(&pv)
            .await
            .expect("volume");
        let handle = pv
            .spec
            .and_then(|s| s.csi)
            .map(|c| c.volume_handle)
            .expect("a CSI volume");
        self.volumes.join(handle).join("data/log")
    }

    /// Node NAME's cgroup is `PREFIX-NAME` in every hierarchy.
    pub fn cgroup_prefix(&self) -> String {
        format!("volguard-e2e-{}", self.id)
    }

    pub fn node(&self, name: &str) -> &RealNode {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no real node {name}"))
    }

    /// Cut (or restore) the node's only link: its kubelet stops reaching the apiserver while its
    /// containers keep running (a network partition).
    pub fn partition(&self, name: &str, cut: bool) {
        let n = self.node(name);
        must(&[
            "ip",
            "link",
            "set",
            &n.link,
            if cut { "down" } else { "up" },
        ]);
    }

    /// Cut (or restore) only the node's way to the apiserver: the kubelet goes silent while the
    /// node's link, its containers and their storage stay up.
    pub fn cut_from_apiserver(&self, name: &str, cut: bool) {
        let ip: std::net::IpAddr = self.node(name).ip.parse().expect("node ip");
        if let Ok(mut c) = self.cuts.write() {
            if cut {
                c.insert(ip);
            } else {
                c.remove(&ip);
            }
        }
    }

    /// Every process of the node's machine (kubelet, containerd, shims, containers, CSI plugins)
    /// killed at once, its mounts gone with its mount namespace: a power-off.
    pub fn power_off(&mut self, name: &str) {
        let i = self.index(name);
        halt(&mut self.nodes[i]);
    }

    /// Power the machine on again: a new boot ID, then Ready.
    pub async fn power_on(&mut self, cp: &ControlPlane, name: &str) {
        let i = self.index(name);
        self.boot(i);
        self.wait_ready(cp, i).await;
    }

    /// Freeze (or thaw) every process of the machine: a hung machine that still holds its
    /// volumes and resumes writing when thawed.
    pub fn freeze(&self, name: &str, frozen: bool) {
        let n = self.node(name);
        for h in hierarchies().iter().filter(|h| h.ends_with("freezer")) {
            let _ = std::fs::write(
                h.join(&n.cgroup).join("freezer.state"),
                if frozen { "FROZEN" } else { "THAWED" },
            );
        }
    }

    fn index(&self, name: &str) -> usize {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .unwrap_or_else(|| panic!("no real node {name}"))
    }

    pub fn kubelet_log(&self, name: &str) -> String {
        self.node(name)
            .kubelet
            .as_ref()
            .map(Proc::tail)
            .unwrap_or_default()
    }

    pub fn logs(&self) -> String {
        let mut out = String::new();
        for p in &self.controller {
            out += &format!("--- {}\n{}\n", p.name, p.tail());
        }
        for n in &self.nodes {
            for p in [&n.kubelet, &n.containerd]
                .into_iter()
                .flatten()
                .chain(n.csi.iter())
            {
                out += &format!("--- {} on {}\n{}\n", p.name, n.name, p.tail());
            }
        }
        out
    }
}

/// volguard's reference fence agent (`volguard fence agent`, the HTTPS fence-agent contract)
/// running a power fence: every process of the node's machine killed through its cgroups. A
/// node's behaviour file `lie` makes it answer "fenced" and do nothing (a lying backend).
pub fn power_fence_agent(cp: &ControlPlane, nodes: &RealNodes) -> (PathBuf, Proc, u16) {
    let d = cp.dir.path().to_path_buf();
    let agent_dir = d.join("agent");
    std::fs::create_dir_all(agent_dir.join("behaviour")).expect("agent dir");
    // The machine's processes, in every cgroup hierarchy. A hung machine's are frozen, and a
    // frozen process dies only once thawed: each round kills first and thaws after, so a process
    // with a pending SIGKILL never runs another instruction (thawed first, the kubelet renewed
    // its Lease before it died, and volguard rightly refused the fence as not holding).
    let procs = format!(
        "procs() {{ find /sys/fs/cgroup/*/{prefix}-$NODE -name cgroup.procs -exec cat {{}} + 2>/dev/null | sort -u; }}\n",
        prefix = nodes.cgroup_prefix()
    );
    let lie = "d=$(dirname \"$0\"); [ \"$(cat \"$d/behaviour/$NODE\" 2>/dev/null)\" = lie ] && { echo \"fenced (not really)\"; exit 0; }\n";
    std::fs::write(
        agent_dir.join("fence.sh"),
        format!(
            r#"{lie}{procs}for i in $(seq 1 100); do
  pids=$(procs)
  [ -z "$pids" ] && {{ echo "powered off $NODE"; exit 0; }}
  kill -KILL $pids 2>/dev/null
  find /sys/fs/cgroup/freezer/{prefix}-$NODE -name freezer.state 2>/dev/null | while read -r f; do echo THAWED > "$f"; done
  sleep 0.1
done
echo "processes of $NODE survived" >&2; exit 1
"#,
            prefix = nodes.cgroup_prefix()
        ),
    )
    .expect("fence.sh");
    // The proof, read back from the machine: none of its processes is left.
    std::fs::write(
        agent_dir.join("verify.sh"),
        format!(
            r#"{lie}{procs}pids=$(procs)
[ -z "$pids" ] && {{ echo "no process of $NODE's machine is left"; exit 0; }}
echo "$(echo $pids | wc -w) processes of $NODE's machine are alive" >&2; exit 1
"#
        ),
    )
    .expect("verify.sh");
    // A power fence has nothing to undo: the machine is back because it rebooted.
    std::fs::write(agent_dir.join("unfence.sh"), "exit 0\n").expect("unfence.sh");
    let port = free_port();
    let agent = cp.spawn_fence_agent(&agent_dir, port);
    (agent_dir, agent, port)
}

/// The controller's fencing flags on the real-node cluster: the fence agent on `agent_port` (the
/// webhook backend, trusting the dev CA) answering within `timeout`, a 10 s partition window, one
/// unhealthy node at a time, a step a second.
pub fn fencing_flags(cp: &ControlPlane, agent_port: u16, timeout: &str) -> Vec<String> {
    let ca = cp.dir.path().join("webhook-certs/ca.crt");
    vec![
        "--partition-after=10s".into(),
        "--max-unhealthy-nodes=1".into(),
        "--fence-backends=webhook".into(),
        format!("--fence-webhook-url=https://127.0.0.1:{agent_port}/"),
        format!("--fence-webhook-ca={}", ca.display()),
        format!("--fence-webhook-timeout={timeout}"),
        "--fencing-interval=1s".into(),
    ]
}

/// The StorageClass `name` on the attachable driver whose volumes volguard may fence for
/// (`volguard.io/fencing: auto`).
pub async fn create_fenced_class(cp: &ControlPlane, name: &str) {
    let sc: k8s_openapi::api::storage::v1::StorageClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "annotations": {"volguard.io/fencing": "auto"}},
        "provisioner": ATTACHED.name, "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"
    }))
    .expect("storage class");
    Api::<k8s_openapi::api::storage::v1::StorageClass>::all(cp.admin().await)
        .create(&PostParams::default(), &sc)
        .await
        .expect("create storage class");
}

/// Power a machine off: every process killed, its mount namespace released.
fn halt(n: &mut RealNode) {
    kill_cgroup(&n.cgroup);
    for p in [&mut n.kubelet, &mut n.containerd, &mut n.proxy]
        .into_iter()
        .flatten()
        .chain(n.csi.iter_mut())
    {
        p.kill();
    }
    if !n.mntns.as_os_str().is_empty() {
        let _ = Command::new("umount").arg(&n.mntns).status();
    }
}

/// Kill every process in the cgroup (all hierarchies) until none is left.
fn kill_cgroup(cgroup: &str) {
    for _ in 0..50 {
        let mut any = false;
        for h in hierarchies() {
            for pid in procs_under(&h.join(cgroup)) {
                any = true;
                let _ = Command::new("kill").args(["-KILL", &pid]).status();
            }
        }
        // A frozen process dies once thawed; killed first, it never runs again.
        for h in hierarchies().iter().filter(|h| h.ends_with("freezer")) {
            let _ = std::fs::write(h.join(cgroup).join("freezer.state"), "THAWED");
        }
        if !any {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn procs_under_all(cgroup: &str) -> Vec<String> {
    hierarchies()
        .iter()
        .flat_map(|h| procs_under(&h.join(cgroup)))
        .collect()
}

fn procs_under(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.extend(procs_under(&e.path()));
            }
        }
    }
    out
}

fn rmdir_tree(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                rmdir_tree(&e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

impl Drop for RealNodes {
    fn drop(&mut self) {
        for p in &mut self.controller {
            p.kill();
        }
        for n in &mut self.nodes {
            halt(n);
        }
        // Mounts under the cluster's directory (volumes, snapshots, sandboxes' shm and netns),
        // deepest first.
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mut ours: Vec<&str> = mounts
            .lines()
            .filter_map(|l| l.split_whitespace().nth(4))
            .filter(|m| Path::new(m).starts_with(&self.dir))
            .collect();
        ours.sort_by_key(|m| std::cmp::Reverse(m.len()));
        for m in ours {
            let _ = Command::new("umount").args(["-l", m]).status();
        }
        for n in &self.nodes {
            for h in hierarchies() {
                rmdir_tree(&h.join(&n.cgroup));
            }
            let _ = run(&["ip", "netns", "del", &n.netns]);
            let _ = run(&["ip", "link", "del", &n.link]);
        }
        let _ = run(&["ip", "link", "del", &self.bridge]);
    }
}
