# volguard — every target a newcomer or CI needs. `make run` and `make test` work on a fresh clone.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c

CARGO ?= cargo
# The e2e cluster runs on two Kubernetes versions: every scenario of the cluster profile on both,
# the rest on the first. Each version's binaries are built from its own Go module
# (e2e/kubernetes/vMAJOR.MINOR) and cached under .cache/ keyed by version.
K8S_VERSIONS ?= v1.37.2 v1.36.3
K8S_VERSION ?= $(firstword $(K8S_VERSIONS))
ETCD_VERSION ?= v3.6.8
KWOK_VERSION ?= v0.8.0
# cert-manager runs for real in the e2e (controller + cainjector) and its CRDs come from the same
# module: v1.11.5 is the last release whose cmd/* the Go module proxy can serve.
CM_VERSION ?= v1.11.5
# helm lints, renders and installs charts/volguard (built from its module, e2e/helm).
HELM_VERSION ?= v4.3.1
# `make bench` compares volguard's PVC mutation with a controller-runtime webhook of this release
# (benches/controller-runtime, built from its module).
CR_VERSION ?= v0.25.2
CACHE := $(CURDIR)/.cache
# Real nodes (tests/nodes.rs, first version only): kubelet, containerd v2 with Debian's runc, the
# CSI external-provisioner and external-attacher, the project's test CSI driver and node image.
CONTAINERD_VERSION ?= v2.4.2
PROVISIONER_VERSION ?= v5.3.0
ATTACHER_VERSION ?= v4.13.0
k8s_dir = $(CACHE)/kubernetes/$(1)
K8S_DONE := $(foreach v,$(K8S_VERSIONS),$(call k8s_dir,$(v))/.built)
ETCD_BIN := $(CACHE)/etcd/$(ETCD_VERSION)/etcd
KWOK_DIR := $(CACHE)/kwok/$(KWOK_VERSION)
CM_DIR := $(CACHE)/cert-manager/$(CM_VERSION)
CR_WEBHOOK := $(CACHE)/controller-runtime/$(CR_VERSION)/webhook
HELM := $(CACHE)/helm/$(HELM_VERSION)/helm
KUBECTL := $(call k8s_dir,$(K8S_VERSION))/kubectl
k8s_ldflags = -s -w -X k8s.io/component-base/version.gitVersion=$(1) \
  -X k8s.io/component-base/version.gitMajor=$(word 2,$(subst ., ,$(1:v%=x.%))) \
  -X k8s.io/component-base/version.gitMinor=$(word 3,$(subst ., ,$(1:v%=x.%))) \
  -X k8s.io/component-base/version.gitTreeState=clean
STATE ?= manifests/examples/state.yaml
# What the e2e tests read: where each component's binaries are.
NODES_DIR = $(CACHE)/nodes/$(K8S_VERSION)
NODE_PARTS = $(NODES_DIR)/kubelet $(CACHE)/containerd/$(CONTAINERD_VERSION)/containerd \
  $(CACHE)/csi/provisioner-$(PROVISIONER_VERSION) $(CACHE)/csi/attacher-$(ATTACHER_VERSION) \
  $(NODES_DIR)/volguard-test-csi $(NODES_DIR)/images/.built $(NODES_DIR)/e2e.test \
  $(NODES_DIR)/kube-proxy $(NODES_DIR)/registry
E2E_ENV = VOLGUARD_NODES_DIR=$(NODES_DIR) VOLGUARD_ETCD=$(ETCD_BIN) VOLGUARD_KWOK_DIR=$(KWOK_DIR) VOLGUARD_CERT_MANAGER_DIR=$(CM_DIR) \
  VOLGUARD_CERT_MANAGER_CRDS=$(CM_DIR)/crds VOLGUARD_HELM=$(HELM)

.PHONY: robustness upstream-storage manifests model differential encode-cmp all build release release-check verify release-build certs run try image image-check image-tools docker-image alerts chart prometheus install nodes node-packages fuzz fuzz-check bench bench-compare bench-scale profile chaos test unit lint e2e controlplane clean help

all: build

help:
	@echo "make run      start volguard serve (dev certs, example state, no cluster) on :8443 / :8080"
	@echo "make test     lint, unit + fixture tests, end-to-end tests on a real control plane"
	@echo "make differential  volguard's ports of upstream's decisions against upstream's own Go code"
	@echo "make e2e      end-to-end tests only (builds kube-apiserver/etcd/kcm once into .cache/)"
	@echo "make robustness SEED=N MINUTES=M  a seeded nemesis on real nodes, with and without volguard (target/robustness/)"
	@echo "make upstream-storage  upstream's storage suites on the real nodes beside volguard (about an hour)"
	@echo "make bench    benchmarks (table + target/bench/report.json)"
	@echo "make bench-compare BASE=REV  make bench, each admission row also against volguard as of REV"
	@echo "make bench-scale  volguard up to 5,000 kwok nodes and 150,000 pods (table, scale.json, scale.png)"
	@echo "make profile  instructions per admission request, volguard vs floor (callgrind)"
	@echo "make release  target/dist: binary archive (kubectl plugin), chart, image, manifests, krew manifest, SHA256SUMS"
	@echo "make verify [DIST=DIR]  a release's signatures and SHA256SUMS against the committed key (keys/)"
	@echo "make manifests  regenerate the webhook registration and policies from the rule table (a unit test checks it)"

build:
	$(CARGO) build --locked

# CycloneDX SBOMs from Cargo.lock (a well-kept tool, not hand-written), built from crates.io.
CYCLONEDX_VERSION := 0.5.9
CYCLONEDX := $(CACHE)/cargo-cyclonedx/$(CYCLONEDX_VERSION)/bin/cargo-cyclonedx
$(CYCLONEDX):
	$(CARGO) install cargo-cyclonedx --version $(CYCLONEDX_VERSION) --locked --quiet \
	  --root $(CACHE)/cargo-cyclonedx/$(CYCLONEDX_VERSION)

# What a release page carries, in target/dist/ (.ci/release.sh says what each file is): the
# static binary archive (also the kubectl plugin), the chart and the image by tag and digest, the
# rendered manifests, a krew manifest, SBOMs, provenance, SHA256SUMS and signatures.
# SIGNING_KEY: the release manager's ECDSA P-256 private key (PEM; never in the repository), whose
# public half is keys/volguard-release.pub. Readers verify with .ci/verify-release.sh (make verify).
# RELEASE_URL: where the files will be published, one directory (the krew manifest's uri is
# RELEASE_URL/ARCHIVE); set it when publishing anywhere but the project's GitHub release.
SIGNING_KEY ?=
RELEASE_URL ?= https://github.com/volguard/volguard/releases/download/v$(VERSION)
release: image $(HELM) $(call k8s_dir,$(K8S_VERSION))/.built $(CYCLONEDX)
	RELEASE_URL=$(RELEASE_URL) .ci/release.sh $(VERSION) $(STATIC_BIN) $(HELM) $(KUBECTL) $(CYCLONEDX) $(SIGNING_KEY)

# What `make test` checks of a release: signed with a throwaway key (made here, deleted after), it
# verifies against that key only; the committed release key and tampered copies are refused.
release-check:
	key=$$(mktemp -d) && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $$key/key.pem && \
	  openssl pkey -in $$key/key.pem -pubout -out $$key/key.pub && \
	  { $(MAKE) --no-print-directory release SIGNING_KEY=$$key/key.pem && .ci/release-check.sh target/dist $$key/key.pub \
	    && rc=0 || rc=$$?; rm -rf $$key; exit $$rc; }

# A release's files (DIST, default target/dist) against the committed release key.
DIST ?= target/dist
verify:
	.ci/verify-release.sh $(DIST)

release-build:
	$(CARGO) build --locked --release

# The CEL policies of the rows that need no other object, from the rule table (the chart ships
# policies.yaml through its files/ symlink). `make unit` fails while they differ.
manifests: build
	./target/debug/volguard manifests webhooks --flavour kustomize > manifests/base/webhooks.yaml
	./target/debug/volguard manifests webhooks --flavour chart > charts/volguard/templates/webhooks.yaml
	./target/debug/volguard manifests policies --part policies > manifests/base/policies.yaml
	./target/debug/volguard manifests policies --part bindings > manifests/base/policy-bindings.yaml

certs: certs/tls.crt

certs/tls.crt:
	$(CARGO) run --locked --quiet -- dev-certs --out-dir certs

run: certs build
	@echo "volguard serve: https://127.0.0.1:8443 (POST /mutate, /validate), probes http://127.0.0.1:8080"
	@echo "try (another terminal): make try"
	@echo "  = curl --cacert certs/ca.crt -H 'Content-Type: application/json' --data @REVIEW.json https://localhost:8443/validate"
	./target/debug/volguard serve --tls-cert certs/tls.crt --tls-key certs/tls.key --state $(STATE)

# One request against a running `make run`.
try:
	@jq -c .body tests/fixtures/reviews/validate-pod-create-terminating-pvc.json 2>/dev/null > /tmp/volguard-try.json || \
	  python3 -c 'import json,sys;print(json.dumps(json.load(open(sys.argv[1]))["body"]))' tests/fixtures/reviews/validate-pod-create-terminating-pvc.json > /tmp/volguard-try.json
	curl -sS --cacert certs/ca.crt -H 'Content-Type: application/json' --data @/tmp/volguard-try.json https://localhost:8443/validate; echo

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings

unit:
	$(CARGO) test --locked --workspace --lib --bins --tests -- --skip model_rwo_lock --skip model_adversary

# The RWO lock's protocol, model-checked (tests/model_rwo_lock.rs): exhaustive to MODEL_DEPTH, and
# a deliberately broken rule must yield a counterexample. tests/model_adversary.rs (the whole
# admission surface against every actor; VOLGUARD_ADVERSARY_DEPTH, _STEPS, _INVARIANT) runs here,
# not in `unit`: it prints its counterexamples and writes target/model/adversary.json.
MODEL_DEPTH ?= 10
model:
	VOLGUARD_MODEL_DEPTH=$(MODEL_DEPTH) $(CARGO) test --locked --test model_rwo_lock -- --nocapture --test-threads=1 2>&1 | \
	  grep -oE 'model rwo-lock.*|^test result.*|panicked.*' ; test $${PIPESTATUS[0]} -eq 0
	$(CARGO) test --locked --test model_fencing -- --nocapture --test-threads=1 2>&1 | \
	  grep -oE 'model fencing.*|^test result.*|panicked.*' ; test $${PIPESTATUS[0]} -eq 0
	$(CARGO) test --locked --test model_proof -- --nocapture --test-threads=1 2>&1 | \
	  grep -oE 'model proof.*|^test result.*|panicked.*' ; test $${PIPESTATUS[0]} -eq 0
	$(CARGO) test --locked --test model_adversary -- --nocapture --test-threads=1 2>&1 | \
	  grep -oE '^model adversary: .*|^test result.*|panicked.*' ; test $${PIPESTATUS[0]} -eq 0

test: lint unit model fuzz-check alerts chart image-check release-check differential e2e

# The differential test (tests/differential.rs): each port in crates/volguard-core/src/rules/upstream against the
# Kubernetes code it ports, linked into one Go program (e2e/differential) from the k8s.io/kubernetes
# the e2e runs; the counts go to target/e2e/differential.json. A cold build takes minutes (about
# 1,600 packages: the controllers and the pod registry pull in client-go and the apiserver).
DIFFERENTIAL := $(CACHE)/differential/$(K8S_VERSION)/differential
$(DIFFERENTIAL): e2e/differential/main.go e2e/differential/go.mod e2e/differential/go.sum
	mkdir -p $(@D)
	cd e2e/differential && test "$$(go list -m -f '{{.Version}}' k8s.io/kubernetes)" = "$(K8S_VERSION)"
	cd e2e/differential && CGO_ENABLED=0 go build -trimpath -o $@ -ldflags "-s -w" .

differential: $(DIFFERENTIAL)
	VOLGUARD_DIFFERENTIAL=$(DIFFERENTIAL) VOLGUARD_DIFFERENTIAL_K8S_VERSION=$(K8S_VERSION) \
	  $(CARGO) test --locked --test differential -- --ignored --nocapture 2>&1 | \
	  sed -n '/^differential,/,/^test result/p; /panicked/,/^$$/p'; test $${PIPESTATUS[0]} -eq 0

# Debian's prometheus package: promtool for the alert tests, the server for tests/install.rs.
prometheus:
	command -v promtool >/dev/null && command -v prometheus >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }

# Alert rules and their unit tests (promtool, from Debian's prometheus package); the runbook's
# audit-log query for the CEL policies' refusals (jq).
alerts: prometheus
	cd manifests/monitoring && promtool check rules alerts.rules.yaml && promtool test rules alerts.test.yaml
	$(CARGO) test --locked --test server -- --ignored --exact metrics_in_both_formats_pass_promtool
	command -v jq >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends jq >/dev/null; }
	$(CARGO) test --locked --test manifests -- --ignored --exact the_runbook_query_finds_policy_refusals_in_the_apiservers_audit_log

# The Helm chart: helm lint, and tests/render.rs (the chart renders what kustomize renders; both
# install into any namespace; values do what they say).
chart: $(HELM) $(call k8s_dir,$(K8S_VERSION))/.built
	$(HELM) lint charts/volguard 2>&1 | grep -v 'symbolic link'
	VOLGUARD_HELM=$(HELM) VOLGUARD_KUBECTL=$(KUBECTL) $(CARGO) test --locked --test render -- --ignored

$(HELM):
	mkdir -p $(@D)
	cd e2e/helm && test "$$(go list -m -f '{{.Version}}' helm.sh/helm/v4)" = "$(HELM_VERSION)"
	cd e2e/helm && CGO_ENABLED=0 go build -trimpath -o $@ \
	  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)" helm.sh/helm/v4/cmd/helm

# kubectl plugin: the binary and its kubectl-volguard symlink in $(PREFIX)/bin.
PREFIX ?= /usr/local
install: release-build
	install -D -m 0755 target/release/volguard $(DESTDIR)$(PREFIX)/bin/volguard
	ln -sf volguard $(DESTDIR)$(PREFIX)/bin/kubectl-volguard

controlplane: $(K8S_DONE) $(ETCD_BIN) $(KWOK_DIR)/.built $(CM_DIR)/.built $(HELM)

# What a real node runs, gathered in $(NODES_DIR) (the harness's VOLGUARD_NODES_DIR): Debian's
# runc, static busybox (the node image) and CNI plugins, iptables (kube-proxy's), curl, and the parts below.
nodes: node-packages $(NODE_PARTS)
	ln -sf $(CACHE)/containerd/$(CONTAINERD_VERSION)/containerd $(CACHE)/containerd/$(CONTAINERD_VERSION)/containerd-shim-runc-v2 \
	  $(CACHE)/containerd/$(CONTAINERD_VERSION)/ctr $(NODES_DIR)/
	ln -sf $(CACHE)/csi/provisioner-$(PROVISIONER_VERSION) $(NODES_DIR)/csi-provisioner
	ln -sf $(CACHE)/csi/attacher-$(ATTACHER_VERSION) $(NODES_DIR)/csi-attacher

node-packages:
	dpkg -s runc busybox-static containernetworking-plugins umoci skopeo iptables curl >/dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends runc busybox-static \
	  containernetworking-plugins umoci skopeo iptables curl >/dev/null; }

$(NODES_DIR)/kubelet:
	mkdir -p $(@D)
	cd e2e/kubernetes/$(basename $(K8S_VERSION)) && CGO_ENABLED=0 go build -trimpath -o $@ \
	  -ldflags "$(call k8s_ldflags,$(K8S_VERSION))" k8s.io/kubernetes/cmd/kubelet

# kube-proxy (iptables mode), for the scenarios whose pods reach Services (tests/adoption.rs).
$(NODES_DIR)/kube-proxy:
	mkdir -p $(@D)
	cd e2e/kubernetes/$(basename $(K8S_VERSION)) && CGO_ENABLED=0 go build -trimpath -o $@ \
	  -ldflags "$(call k8s_ldflags,$(K8S_VERSION))" k8s.io/kubernetes/cmd/kube-proxy

# The OCI registry on the test bridge (go-containerregistry's pkg/registry behind TLS).
$(NODES_DIR)/registry: e2e/registry/main.go e2e/registry/go.mod e2e/registry/go.sum
	mkdir -p $(@D)
	cd e2e/registry && CGO_ENABLED=0 go build -trimpath -o $@ -ldflags "-s -w" .

# containerd v2 from its module, CGO off (so without the btrfs, devmapper and zfs snapshotters).
$(CACHE)/containerd/$(CONTAINERD_VERSION)/containerd:
	mkdir -p $(@D)
	cd e2e/containerd && test "$$(go list -m -f '{{.Version}}' github.com/containerd/containerd/v2)" = "$(CONTAINERD_VERSION)"
	cd e2e/containerd && CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" -o $(@D)/ -ldflags "-s -w" \
	  github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
	  github.com/containerd/containerd/v2/cmd/ctr

# The sidecars' go.mod replaces k8s.io modules, so another module cannot require them: each is
# built in its own module directory, at the exact version.
csi_dir = $$(go mod download -json $(1) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p')
$(CACHE)/csi/provisioner-%:
	mkdir -p $(@D)
	cd $(call csi_dir,github.com/kubernetes-csi/external-provisioner/v5@$*) && \
	  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o $@ -ldflags "-s -w -X main.version=$*" ./cmd/csi-provisioner
$(CACHE)/csi/attacher-%:
	mkdir -p $(@D)
	cd $(call csi_dir,github.com/kubernetes-csi/external-attacher/v4@$*) && \
	  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o $@ -ldflags "-s -w -X main.version=$*" ./cmd/csi-attacher

$(NODES_DIR)/volguard-test-csi: e2e/csi-driver/main.go e2e/csi-driver/go.mod e2e/csi-driver/go.sum
	mkdir -p $(@D)
	cd e2e/csi-driver && CGO_ENABLED=0 go build -trimpath -o $@ -ldflags "-s -w" .

# Upstream's e2e suite and its test server (agnhost), from the same module as kubelet: tests/nodes.rs
# runs its storage-protection and StatefulSet tests on the real nodes with volguard installed.
$(NODES_DIR)/e2e.test:
	mkdir -p $(@D)
	cd e2e/kubernetes/$(basename $(K8S_VERSION)) && CGO_ENABLED=0 go test -c -trimpath -o $@ \
	  -ldflags "$(call k8s_ldflags,$(K8S_VERSION))" k8s.io/kubernetes/test/e2e
$(NODES_DIR)/agnhost:
	mkdir -p $(@D)
	cd e2e/kubernetes/$(basename $(K8S_VERSION)) && CGO_ENABLED=0 go build -trimpath -o $@ -ldflags "-s -w" \
	  k8s.io/kubernetes/test/images/agnhost

$(NODES_DIR)/images/.built: e2e/nodes/image.sh $(NODES_DIR)/agnhost | node-packages
	rm -rf $(@D) && mkdir -p $(@D)
	e2e/nodes/image.sh "$$(cd e2e/kubernetes/$(basename $(K8S_VERSION)) && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c" \
	  $(@D) $(NODES_DIR)/agnhost
	touch $@

# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl of one version.
$(CACHE)/kubernetes/%/.built:
	mkdir -p $(@D)
	cd e2e/kubernetes/$(basename $*) && test "$$(go list -m -f '{{.Version}}' k8s.io/kubernetes)" = "$*"
	cd e2e/kubernetes/$(basename $*) && CGO_ENABLED=0 go build -trimpath -o $(@D)/ -ldflags "$(call k8s_ldflags,$*)" \
	  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler \
	  k8s.io/kubernetes/cmd/kubectl
	touch $@

$(ETCD_BIN):
	mkdir -p $(@D)
	cd e2e/etcd && CGO_ENABLED=0 go build -trimpath -o $@ -ldflags "-s -w" .

# kwok and the stages it plays (node-initialize, node-heartbeat-with-lease, pod-create .. pod-ready,
# pod-complete, pod-delete), from its module.
$(KWOK_DIR)/.built:
	mkdir -p $(@D)/stages
	cd e2e/kwok && CGO_ENABLED=0 go build -trimpath -o $(@D)/kwok -ldflags "-s -w" sigs.k8s.io/kwok/cmd/kwok
	dir=$$(cd e2e/kwok && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok) && \
	  cp "$$dir"/kustomize/stage/node/fast/node-initialize.yaml \
	     "$$dir"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
	     "$$dir"/kustomize/stage/pod/general/pod-*.yaml $(@D)/stages/ && chmod u+w $(@D)/stages/*
	touch $@

# cert-manager's controller and cainjector, and its own CRDs from the same module (the Helm
# template labels stripped: they are not valid label values outside Helm).
$(CM_DIR)/.built:
	mkdir -p $(@D)/crds
	cd e2e/cert-manager && CGO_ENABLED=0 go build -trimpath -o $(@D)/ -ldflags "-s -w" \
	  github.com/cert-manager/cert-manager/cmd/controller github.com/cert-manager/cert-manager/cmd/cainjector
	dir=$$(cd e2e/cert-manager && go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager) && \
	  for f in "$$dir"/deploy/crds/*.yaml; do \
	    sed '/^  labels:$$/,/^spec:$$/{/^spec:$$/!d}' "$$f" > $(@D)/crds/$$(basename $$f); done
	! grep -l '{{' $(@D)/crds/*.yaml
	touch $@

# The PVC finalizer webhook as controller-runtime's documentation writes one.
$(CR_WEBHOOK): benches/controller-runtime/go.mod benches/controller-runtime/go.sum benches/controller-runtime/main.go
	mkdir -p $(@D)
	cd benches/controller-runtime && test "$$(go list -m -f '{{.Version}}' sigs.k8s.io/controller-runtime)" = "$(CR_VERSION)"
	cd benches/controller-runtime && CGO_ENABLED=0 go build -trimpath -o $@ -ldflags "-s -w" .

# The nemesis on the real nodes (tests/robustness.rs): the same seed with volguard and without, the
# checker's verdicts and the schedule in target/robustness/SEED/, every seed's sum in
# target/robustness/summary.json. `make test` runs seed 7004 for 4 min per mode (in `make e2e`, beside
# tests/nodes.rs): in 4 minutes its schedule draws a mid-fence leader kill, an apiserver-only
# partition, claim deletes, etcd restarts and the taint, beside the partition every run starts with.
SEED ?= $(shell date +%s)
MINUTES ?= 10
robustness: $(call k8s_dir,$(K8S_VERSION))/.built $(ETCD_BIN) nodes
	VOLGUARD_ROBUSTNESS_SEED=$(SEED) VOLGUARD_ROBUSTNESS_MINUTES=$(MINUTES) \
	  VOLGUARD_CONTROLPLANE_DIR=$(call k8s_dir,$(K8S_VERSION)) $(E2E_ENV) \
	  $(CARGO) test --locked --test robustness -- --ignored --nocapture

# Upstream's external-driver storage suites (provisioning, volumes, subPath, multiVolume, volume modes,
# ephemeral, ...) against both test drivers on the real nodes, volguard installed in deny mode: about an
# hour, by hand; `make test` runs a few of them (tests/nodes.rs upstream_protection_and_statefulset).
# Counts in target/e2e/upstream-storage.json. FOCUS=REGEX runs only the tests it names instead
# (FOCUS='External Storage.*subPath').
upstream-storage: $(call k8s_dir,$(K8S_VERSION))/.built $(ETCD_BIN) nodes
	VOLGUARD_CONTROLPLANE_DIR=$(call k8s_dir,$(K8S_VERSION)) VOLGUARD_SCENARIO_STUCK_SECONDS=10800 $(E2E_ENV) \
	  VOLGUARD_UPSTREAM_STORAGE_FOCUS='$(FOCUS)' \
	  $(CARGO) test --locked --test nodes -- --ignored --nocapture --exact upstream_storage_suites

# The short chaos run in `make test` uses a fixed seed; `make chaos` picks a new one each run.
# Every e2e suite in three streams side by side (.ci/cluster-e2e.sh): tests/cluster.rs and
# tests/partition.rs on the first version; tests/nodes.rs (real nodes) on the first version;
# tests/e2e.rs, the chaos run and tests/install.rs (helm install, Prometheus) on the first version,
# then on the other versions the cluster scenarios whose behaviour differs by version.
# tests/adoption.rs installs the bundle release-check builds (target/dist).
e2e: controlplane prometheus nodes release-check
	VOLGUARD_CHAOS_SEED=$${VOLGUARD_CHAOS_SEED:-20261121} VOLGUARD_ROBUSTNESS_SEED=$${VOLGUARD_ROBUSTNESS_SEED:-7004} VOLGUARD_ROBUSTNESS_MINUTES=$${VOLGUARD_ROBUSTNESS_MINUTES:-4} \
	  $(E2E_ENV) .ci/cluster-e2e.sh $(CACHE) $(K8S_VERSIONS)

# Chaos on the real control plane; `make test` runs a short form (20 s), this a longer one.
CHAOS_SECONDS ?= 120
chaos: controlplane
	VOLGUARD_CHAOS_SECONDS=$(CHAOS_SECONDS) VOLGUARD_CONTROLPLANE_DIR=$(call k8s_dir,$(K8S_VERSION)) $(E2E_ENV) \
	  $(CARGO) test --locked --test chaos -- --ignored --nocapture

# Benchmarks measure and print (target/bench/report.json); they never fail on a missed target.
bench: controlplane nodes $(CR_WEBHOOK)
	$(CARGO) build --locked --release --example floor --example kube_rs
	VOLGUARD_BENCH_CONTROLLER_RUNTIME=$(CR_WEBHOOK) VOLGUARD_CONTROLPLANE_DIR=$(call k8s_dir,$(K8S_VERSION)) $(E2E_ENV) \
	  $(CARGO) bench --locked --bench bench
	@echo "== cache bytes per object as mimalloc holds them (size classes), 100,000 of each kind =="
	$(CARGO) run --locked --release --quiet --example cache_bytes
	@echo "== as kube-apiserver $(K8S_VERSION) measures it: no webhook / a no-op webhook registered like volguard / volguard (release build) =="
	VOLGUARD_BENCH_FLOOR=$(CURDIR)/target/release/examples/floor VOLGUARD_CONTROLPLANE_DIR=$(call k8s_dir,$(K8S_VERSION)) $(E2E_ENV) \
	  $(CARGO) test --locked --release --test cluster -- --ignored --exact apiserver_side_by_side --nocapture 2>&1 | \
	  sed -n '/^side-by-side:/,/^wrote/p; /^scenario apiserver-side-by-side/p; /^kube-apiserver/p; /panicked/,+2p'
	@echo "== recovery on real nodes: a partitioned node power-fenced, phase by phase, beside the physical limit =="
	VOLGUARD_BENCH_REPORT=$(CURDIR)/target/bench/report.json VOLGUARD_CONTROLPLANE_DIR=$(call k8s_dir,$(K8S_VERSION)) $(E2E_ENV) \
	  $(CARGO) test --locked --test nodes -- --ignored --exact partition_heals --nocapture 2>&1 | \
	  sed -n '/^recovery on real nodes/,/^  limit/p; /^wrote recovery/p; /panicked/,+2p'


# `make bench` with each admission row also measured against volguard as of BASE (built from a
# worktree into target/base/), in the same interleaved rounds: before vs after, one run.
BASE ?= ca278c4
bench-compare:
	rm -rf target/base/src && git worktree prune && git worktree add --detach target/base/src $(BASE)
	cd target/base/src && $(CARGO) build --locked --release --bin volguard --target-dir ../target
	VOLGUARD_BENCH_BASE=$(CURDIR)/target/base/target/release/volguard VOLGUARD_BENCH_BASE_REV=$$(git rev-parse --short $(BASE)) \
	  $(MAKE) bench
	git worktree remove --force target/base/src

# volguard at Kubernetes' scalability envelope (not in `make test`: about two hours): one kwok plays
# 500, then 1,500, then 5,000 nodes with 30 pods each, every pod with its own bound claim and volume,
# until memory runs out or the growth has spent SCALE_GROW_SECONDS creating (on 2 cores
# kube-apiserver's creates slow to ~26 pods/s; raise it on a larger machine).
# Table on stdout, target/bench/scale.json and target/bench/scale.png (text in DejaVu Sans).
SCALE_NODES ?= 500,1500,5000
SCALE_GROW_SECONDS ?= 1800
PLOT_FONT := /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
bench-scale: $(call k8s_dir,$(K8S_VERSION))/.built $(ETCD_BIN) $(KWOK_DIR)/.built $(CM_DIR)/.built $(PLOT_FONT) $(CR_WEBHOOK)
	$(CARGO) build --locked --release --example floor --example kube_rs_cache
	VOLGUARD_SCALE_NODES=$(SCALE_NODES) VOLGUARD_SCALE_GROW_SECONDS=$(SCALE_GROW_SECONDS) VOLGUARD_SERVE_LOG=info VOLGUARD_PLOT_FONT=$(PLOT_FONT) VOLGUARD_BENCH_FLOOR=$(CURDIR)/target/release/examples/floor \
	  VOLGUARD_BENCH_KUBE_RS_CACHE=$(CURDIR)/target/release/examples/kube_rs_cache VOLGUARD_BENCH_CONTROLLER_RUNTIME=$(CR_WEBHOOK) \
	  VOLGUARD_CONTROLPLANE_DIR=$(call k8s_dir,$(K8S_VERSION)) $(E2E_ENV) \
	  $(CARGO) bench --locked --bench scale

$(PLOT_FONT):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends fonts-dejavu-core >/dev/null

# Instructions per admission request, volguard against the floor, in process (needs valgrind).
profile:
	$(CARGO) build --locked --release --example handler --example decode_cost
	benches/profile.sh target/release/examples/handler target/release/examples/decode_cost

# The response encoder against a derived Serialize of the same shape (instructions per response).
encode-cmp:
	$(CARGO) build --locked --release --example encode_cmp
	for w in hand derived; do \
	  one=$$(valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/encode_cmp $$w 1 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'); \
	  many=$$(valgrind --tool=callgrind --callgrind-out-file=/dev/null target/release/examples/encode_cmp $$w 10001 2>&1 | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'); \
	  echo "$$w: $$(( (many - one) / 10000 )) instructions per response"; \
	done

# Coverage-guided fuzzing (libFuzzer through cargo-fuzz) for a bounded time per target. Safe Rust
# needs no sanitizer to find what matters here (panics, failed invariants), so `-s none`;
# RUSTC_BOOTSTRAP lets the stable toolchain take cargo-fuzz's -Z flags.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := admission_review rules_objects state_loader finalizer_patch
# In `make test`: every fuzz target builds against today's API and replays its seeds once (a plain
# build, no coverage instrumentation), so a change that breaks a target fails CI.
fuzz-check:
	cd fuzz && $(CARGO) build --locked
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  ./target/debug/$$t seeds/$$t/* >/dev/null 2>target/$$t.log || { tail -20 target/$$t.log; exit 1; }; \
	  echo "fuzz target $$t: $$(ls seeds/$$t | wc -l) seeds replayed"; \
	done

fuzz:
	command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  mkdir -p corpus/$$t; if [ -d seeds/$$t ]; then cp -n seeds/$$t/* corpus/$$t/; fi; \
	  RUSTC_BOOTSTRAP=1 cargo fuzz run -s none $$t corpus/$$t -- -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 2>&1 | \
	    grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|stat::peak_rss|Done|==|thread|panicked)|cov:" | tail -4; \
	done

VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
# The image's binary: fully static (glibc's crt-static; the musl target is not installable
# here), so it runs on an empty base. Its own target dir keeps these flags off the debug build.
STATIC_TARGET := x86_64-unknown-linux-gnu
STATIC_BIN := target/static/$(STATIC_TARGET)/release/volguard
# SOURCE_DATE_EPOCH (the commit's time): mimalloc's C code embeds __TIME__, the one thing that made
# two builds of one commit differ (measured: 25 bytes, that time and the ELF build-id hashed over it).
$(STATIC_BIN): Cargo.toml Cargo.lock $(shell find src crates -name '*.rs') crates/volguard-core/Cargo.toml
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) \
	RUSTFLAGS="-C target-feature=+crt-static" CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=symbols \
	  $(CARGO) build --locked --release --bin volguard \
	  --target $(STATIC_TARGET) --target-dir target/static

image-tools:
	command -v umoci >/dev/null && command -v skopeo >/dev/null || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends umoci skopeo >/dev/null; }

# OCI archive without a container daemon (umoci + skopeo): target/image/volguard.oci.tar.
image: image-tools $(STATIC_BIN)
	.ci/image.sh $(STATIC_BIN) $(VERSION)

# What CI checks of the image: non-root user, entrypoint, labels, a static binary that runs, and
# a second build giving the same digest and archive.
image-check: image
	.ci/image-check.sh $(VERSION) $(STATIC_BIN)

# With a Docker engine (same user, entrypoint and static binary as `make image`).
docker-image:
	docker build -t volguard:$(VERSION) .

clean:
	$(CARGO) clean
	rm -rf $(CACHE)
