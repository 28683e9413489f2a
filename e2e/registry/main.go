// An OCI registry for the real-node install (tests/adoption.rs): go-containerregistry's in-memory
// registry (pkg/registry) behind TLS on the test bridge, as a cluster's private registry serves its
// nodes. The image and the chart are pushed to it by skopeo and helm; the nodes' containerd pulls
// by digest through its hosts.toml, trusting the test CA.
//
//	registry --listen ADDR --cert FILE --key FILE
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:5000", "address to serve on")
	cert := flag.String("cert", "", "serving certificate (PEM)")
	key := flag.String("key", "", "serving key (PEM)")
	flag.Parse()
	if *cert == "" || *key == "" {
		log.Fatal("--cert and --key are required: the nodes pull over TLS")
	}
	srv := &http.Server{
		Addr:              *listen,
		Handler:           registry.New(registry.WithReferrersSupport(true)),
		ReadHeaderTimeout: 10 * time.Second,
	}
	log.Printf("registry serving on https://%s", *listen)
	log.Fatal(srv.ListenAndServeTLS(*cert, *key))
}
