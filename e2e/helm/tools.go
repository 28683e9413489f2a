//go:build tools

// Package tools pins helm, which installs the chart in the e2e and lints/renders it in `make test`.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
