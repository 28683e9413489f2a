//go:build tools

// Package tools pins kwok, which plays the nodes and their kubelets in the e2e cluster.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
