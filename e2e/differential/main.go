// Command differential answers volguard's differential test (tests/differential.rs) with
// upstream's own code: every predicate below calls the Kubernetes function it names, linked from
// k8s.io/kubernetes at the version go.mod pins, never a Go copy of it. Exported functions are
// called; unexported ones are pulled in with //go:linkname; where a decision is a controller's
// side effect, the real controller runs on a fake clientset and its writes are observed.
//
// Protocol: one JSON object a line on stdin, {"predicate": NAME, "input": {...}}; one line on
// stdout for each, {"result": ...} or {"error": "..."}.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"unsafe"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/controller/podgc"
	"k8s.io/kubernetes/pkg/controller/volume/persistentvolume"
	podstorage "k8s.io/kubernetes/pkg/registry/core/pod/storage"
	"k8s.io/kubernetes/pkg/util/goroutinemap"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
	kjson "sigs.k8s.io/json"
)

// Upstream's unexported functions and methods, linked by symbol name.

//go:linkname podgcIsPodTerminated k8s.io/kubernetes/pkg/controller/podgc.isPodTerminated
func podgcIsPodTerminated(pod *v1.Pod) bool

//go:linkname podgcIsPodTerminating k8s.io/kubernetes/pkg/controller/podgc.isPodTerminating
func podgcIsPodTerminating(pod *v1.Pod) bool

//go:linkname gcTerminating k8s.io/kubernetes/pkg/controller/podgc.(*PodGCController).gcTerminating
func gcTerminating(gcc *podgc.PodGCController, ctx context.Context, pods []*v1.Pod)

//go:linkname gcOrphaned k8s.io/kubernetes/pkg/controller/podgc.(*PodGCController).gcOrphaned
func gcOrphaned(gcc *podgc.PodGCController, ctx context.Context, pods []*v1.Pod, nodes []*v1.Node)

//go:linkname gcUnscheduledTerminating k8s.io/kubernetes/pkg/controller/podgc.(*PodGCController).gcUnscheduledTerminating
func gcUnscheduledTerminating(gcc *podgc.PodGCController, ctx context.Context, pods []*v1.Pod)

//go:linkname isVolumeReleased k8s.io/kubernetes/pkg/controller/volume/persistentvolume.(*PersistentVolumeController).isVolumeReleased
func isVolumeReleased(ctrl *persistentvolume.PersistentVolumeController, logger klog.Logger, volume *v1.PersistentVolume) (bool, error)

//go:linkname reclaimVolume k8s.io/kubernetes/pkg/controller/volume/persistentvolume.(*PersistentVolumeController).reclaimVolume
func reclaimVolume(ctrl *persistentvolume.PersistentVolumeController, ctx context.Context, volume *v1.PersistentVolume) error

type request struct {
	Predicate string          `json:"predicate"`
	Input     json.RawMessage `json:"input"`
}

// The objects a case may carry; each predicate reads its own.
type input struct {
	Pod     *v1.Pod                   `json:"pod"`
	Node    *v1.Node                  `json:"node"`
	PV      *v1.PersistentVolume      `json:"pv"`
	Claim   *v1.PersistentVolumeClaim `json:"claim"`
	Binding *v1.Binding               `json:"binding"`
}

func main() {
	// The controllers log every decision; stdout is the protocol's.
	klog.SetLogger(logr.Discard())
	ctx := context.Background()
	pv, err := newPVHarness(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			result, perr := answer(ctx, pv, line)
			reply := map[string]any{"result": result}
			if perr != nil {
				reply = map[string]any{"error": perr.Error()}
			}
			if err := enc.Encode(reply); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func answer(ctx context.Context, pv *pvHarness, line []byte) (any, error) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return nil, err
	}
	var in input
	// Case-sensitive, as kube-apiserver decodes.
	if err := kjson.UnmarshalCaseSensitivePreserveInts(req.Input, &in); err != nil {
		return nil, err
	}
	need := func(ok bool, what string) error {
		if !ok {
			return fmt.Errorf("%s: input has no %s", req.Predicate, what)
		}
		return nil
	}
	switch req.Predicate {
	case "is_pod_terminated":
		if err := need(in.Pod != nil, "pod"); err != nil {
			return nil, err
		}
		// As the attach/detach controller calls it: with the pod's own status.
		return volumeutil.IsPodTerminated(in.Pod, in.Pod.Status), nil
	case "podgc_is_pod_terminated":
		if err := need(in.Pod != nil, "pod"); err != nil {
			return nil, err
		}
		return podgcIsPodTerminated(in.Pod), nil
	case "podgc_is_pod_terminating":
		if err := need(in.Pod != nil, "pod"); err != nil {
			return nil, err
		}
		return podgcIsPodTerminating(in.Pod), nil
	case "podgc_deletes":
		if err := need(in.Pod != nil, "pod"); err != nil {
			return nil, err
		}
		return podgcDeletes(ctx, in.Pod, in.Node)
	case "is_volume_released":
		if err := need(in.PV != nil, "pv"); err != nil {
			return nil, err
		}
		return pv.released(in.PV, in.Claim)
	case "reclaim":
		if err := need(in.PV != nil, "pv"); err != nil {
			return nil, err
		}
		return pv.reclaim(ctx, in.PV, in.Claim)
	case "merge_binding":
		if err := need(in.Pod != nil && in.Binding != nil, "pod and binding"); err != nil {
			return nil, err
		}
		return mergeBinding(ctx, in.Pod, in.Binding)
	}
	return nil, fmt.Errorf("unknown predicate %q", req.Predicate)
}

// field is an unexported field of a struct behind a pointer, addressable for reading and writing.
func field(ptr any, name string) reflect.Value {
	f := reflect.ValueOf(ptr).Elem().FieldByName(name)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// ---------------------------------------------------------------- PodGC

// podgcDeletes runs PodGC's per-pod passes in gc()'s order (gcTerminated, which depends on how
// many pods are terminated cluster-wide, is off: threshold 0) with the pod, and the node when
// given, in the informers and the fake API. The first pass that writes the pod (the Failed
// patch or the force delete of markFailedAndDeletePod) is the answer; null when none does.
func podgcDeletes(ctx context.Context, pod *v1.Pod, node *v1.Node) (any, error) {
	objs := []runtime.Object{pod.DeepCopy()}
	if node != nil {
		objs = append(objs, node.DeepCopy())
	}
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	podInformer, nodeInformer := factory.Core().V1().Pods(), factory.Core().V1().Nodes()
	if err := podInformer.Informer().GetIndexer().Add(pod); err != nil {
		return nil, err
	}
	nodes := []*v1.Node{}
	if node != nil {
		if err := nodeInformer.Informer().GetIndexer().Add(node); err != nil {
			return nil, err
		}
		nodes = append(nodes, node)
	}
	// No quarantine: a node missing from the informer is looked up in the fake API at once.
	gcc := podgc.NewPodGCInternal(ctx, client, podInformer, nodeInformer, 0, 0, 0)
	defer field(gcc, "nodeQueue").Interface().(interface{ ShutDown() }).ShutDown()
	pods := []*v1.Pod{pod}
	passes := []struct {
		name string
		run  func()
	}{
		{"TerminatingOutOfService", func() { gcTerminating(gcc, ctx, pods) }},
		{"Orphaned", func() { gcOrphaned(gcc, ctx, pods, nodes) }},
		{"TerminatingUnscheduled", func() { gcUnscheduledTerminating(gcc, ctx, pods) }},
	}
	for _, p := range passes {
		client.ClearActions()
		p.run()
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "pods" && (a.GetVerb() == "patch" || a.GetVerb() == "delete") {
				return p.name, nil
			}
		}
	}
	return nil, nil
}

// ---------------------------------------------------------------- PV controller

// pvHarness is one real PersistentVolumeController (fake clientset, no volume plugins) whose
// claim cache holds each case's claim, and whose preOperationHook records which operation
// reclaimVolume schedules.
type pvHarness struct {
	ctrl    *persistentvolume.PersistentVolumeController
	claims  cache.Store
	ops     goroutinemap.GoRoutineMap
	started []string
}

func newPVHarness(ctx context.Context) (*pvHarness, error) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	ctrl, err := persistentvolume.NewController(ctx, persistentvolume.ControllerParameters{
		KubeClient:     client,
		VolumeInformer: factory.Core().V1().PersistentVolumes(),
		ClaimInformer:  factory.Core().V1().PersistentVolumeClaims(),
		ClassInformer:  factory.Storage().V1().StorageClasses(),
		PodInformer:    factory.Core().V1().Pods(),
		NodeInformer:   factory.Core().V1().Nodes(),
	})
	if err != nil {
		return nil, err
	}
	h := &pvHarness{
		ctrl:   ctrl,
		claims: field(ctrl, "claims").Interface().(cache.Store),
		ops:    field(ctrl, "runningOperations").Interface().(goroutinemap.GoRoutineMap),
	}
	hook := func(name string) { h.started = append(h.started, name) }
	field(ctrl, "preOperationHook").Set(reflect.ValueOf(hook))
	return h, nil
}

// withClaim runs f with the claim cache holding only claim (when given).
func (h *pvHarness) withClaim(claim *v1.PersistentVolumeClaim, f func() (any, error)) (any, error) {
	if err := h.claims.Replace(nil, ""); err != nil {
		return nil, err
	}
	if claim != nil {
		if err := h.claims.Add(claim); err != nil {
			return nil, err
		}
	}
	return f()
}

func (h *pvHarness) released(volume *v1.PersistentVolume, claim *v1.PersistentVolumeClaim) (any, error) {
	return h.withClaim(claim, func() (any, error) {
		return isVolumeReleased(h.ctrl, klog.Background(), volume)
	})
}

// reclaim is what happens to a volume's data: reclaimVolume's operation, scheduled when
// isVolumeReleased says so (both operations check it again before acting). "Keep" when none is
// scheduled (Retain, an unknown policy, a migrated volume, a volume not released).
func (h *pvHarness) reclaim(ctx context.Context, volume *v1.PersistentVolume, claim *v1.PersistentVolumeClaim) (any, error) {
	return h.withClaim(claim, func() (any, error) {
		released, err := isVolumeReleased(h.ctrl, klog.Background(), volume)
		if err != nil || !released {
			return "Keep", err
		}
		h.started = nil
		// An unknown policy's Failed status write errors on the empty fake API: still a Keep.
		_ = reclaimVolume(h.ctrl, ctx, volume)
		// A failed operation stays in the map, backing off: wait for none to be pending.
		h.ops.WaitForCompletion()
		switch {
		case len(h.started) == 0:
			return "Keep", nil
		case len(h.started) > 1:
			return nil, fmt.Errorf("reclaimVolume scheduled %v", h.started)
		case strings.HasPrefix(h.started[0], "delete-"):
			return "Delete", nil
		case strings.HasPrefix(h.started[0], "recycle-"):
			return "Recycle", nil
		}
		return nil, fmt.Errorf("reclaimVolume scheduled %q", h.started[0])
	})
}

// ---------------------------------------------------------------- Binding

// podStore is the storage under BindingREST: one pod, updated by GuaranteedUpdate as the etcd3
// store does it (preconditions, then the update function).
type podStore struct {
	storage.Interface
	pod *api.Pod
}

func (s *podStore) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	current := s.pod.DeepCopy()
	if err := preconditions.Check(key, current); err != nil {
		return err
	}
	out, _, err := tryUpdate(current, storage.ResponseMeta{})
	if err != nil {
		return err
	}
	s.pod = out.(*api.Pod)
	return nil
}

// mergeBinding runs BindingREST.Create (a pods/binding CREATE; the legacy bindings resource
// calls the same) against the pod and returns the stored pod's labels and annotations after it,
// unchanged when the bind is refused.
func mergeBinding(ctx context.Context, pod *v1.Pod, binding *v1.Binding) (any, error) {
	var internal api.Pod
	if err := legacyscheme.Scheme.Convert(pod, &internal, nil); err != nil {
		return nil, err
	}
	var b api.Binding
	if err := legacyscheme.Scheme.Convert(binding, &b, nil); err != nil {
		return nil, err
	}
	store := &podStore{pod: &internal}
	rest := &podstorage.BindingREST{}
	field(rest, "store").Set(reflect.ValueOf(&genericregistry.Store{
		KeyFunc: func(ctx context.Context, name string) (string, error) {
			return "/pods/" + pod.Namespace + "/" + name, nil
		},
		Storage: genericregistry.DryRunnableStorage{Storage: store},
	}))
	ctx = genericapirequest.WithNamespace(ctx, pod.Namespace)
	_, err := rest.Create(ctx, b.Name, &b, nil, &metav1.CreateOptions{})
	return map[string]any{
		"bound":       err == nil,
		"annotations": store.pod.Annotations,
		"labels":      store.pod.Labels,
	}, nil
}
