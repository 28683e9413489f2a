// Command etcd runs etcd's own entry point, so the binary behaves as upstream etcd.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
