// The PVC finalizer webhook written the way controller-runtime's documentation writes one: a
// webhook.Server with an admission.Handler that decodes the typed object, mutates it, and answers
// with admission.PatchResponseFromRaw. `make bench` runs it beside volguard on the same review.
//
// Usage: webhook --cert-dir DIR (tls.crt, tls.key); prints "listening ADDR" once it serves.
//
// With --cache KUBECONFIG it is instead the objects volguard caches (pods, claims, volumes, nodes)
// in controller-runtime's informer cache, as a controller built with it holds them; it prints
// "synced N" once every informer has synced. `make bench-scale` reads its RSS beside volguard's.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// runCache fills an informer cache with every pod, claim, volume and node, and blocks.
func runCache(kubeconfig string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	kinds := []client.Object{&corev1.Pod{}, &corev1.PersistentVolumeClaim{}, &corev1.PersistentVolume{}, &corev1.Node{}}
	for _, k := range kinds {
		if _, err := c.GetInformer(ctx, k); err != nil {
			return err
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("caches did not sync")
	}
	n := 0
	lists := []client.ObjectList{&corev1.PodList{}, &corev1.PersistentVolumeClaimList{}, &corev1.PersistentVolumeList{}, &corev1.NodeList{}}
	for _, l := range lists {
		if err := c.List(ctx, l); err != nil {
			return err
		}
		switch v := l.(type) {
		case *corev1.PodList:
			n += len(v.Items)
		case *corev1.PersistentVolumeClaimList:
			n += len(v.Items)
		case *corev1.PersistentVolumeList:
			n += len(v.Items)
		case *corev1.NodeList:
			n += len(v.Items)
		}
	}
	fmt.Printf("synced %d\n", n)
	<-ctx.Done()
	return nil
}

const finalizer = "kubernetes.io/pvc-protection"

type pvcFinalizer struct{ decoder admission.Decoder }

func (h *pvcFinalizer) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != "PersistentVolumeClaim" {
		return admission.Allowed("")
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := h.decoder.Decode(req, pvc); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	for _, f := range pvc.Finalizers {
		if f == finalizer {
			return admission.Allowed("")
		}
	}
	pvc.Finalizers = append(pvc.Finalizers, finalizer)
	out, err := json.Marshal(pvc)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, out)
}

func main() {
	certDir := flag.String("cert-dir", "", "directory with tls.crt and tls.key")
	cacheKubeconfig := flag.String("cache", "", "kubeconfig: run the informer cache instead of the webhook")
	flag.Parse()
	if *cacheKubeconfig != "" {
		if err := runCache(*cacheKubeconfig); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	// A free port: controller-runtime's server binds by host and port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	srv := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: *certDir})
	hook := &webhook.Admission{Handler: &pvcFinalizer{decoder: admission.NewDecoder(scheme)}}
	srv.Register("/mutate/pvc-finalizer", hook)
	srv.Register("/mutate", hook)
	ctx := ctrl.SetupSignalHandler()
	go func() {
		for srv.StartedChecker()(nil) != nil {
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Printf("listening 127.0.0.1:%d\n", port)
	}()
	if err := srv.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
