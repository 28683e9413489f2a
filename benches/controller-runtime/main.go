// The PVC finalizer webhook written the way controller-runtime's documentation writes one: a
// webhook.Server with an admission.Handler that decodes the typed object, mutates it, and answers
// with admission.PatchResponseFromRaw. `make bench` runs it beside volguard on the same review.
//
// Usage: webhook --cert-dir DIR (tls.crt, tls.key); prints "listening ADDR" once it serves.
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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

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
	flag.Parse()
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
