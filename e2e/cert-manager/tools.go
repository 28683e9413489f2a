//go:build tools

// Package tools pins cert-manager's controller and cainjector, which issue volguard's serving
// certificate and inject its CA into the webhook configurations in the e2e cluster.
package tools

import (
	_ "github.com/cert-manager/cert-manager/cmd/cainjector"
	_ "github.com/cert-manager/cert-manager/cmd/controller"
)
