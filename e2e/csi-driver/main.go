// Command volguard-test-csi is the e2e's CSI driver: the real CSI gRPC spec over a volume that is a
// directory under one shared root, so two "machines" see the same bytes as they would on network
// storage (and, like network storage without fencing, a detach does not stop a writer that still
// has the volume mounted). The external-provisioner and external-attacher drive its controller
// service; each node's kubelet drives its node service after the plugin-registration handshake,
// which this binary answers itself (no node-driver-registrar is served as a Go module).
//
//	volguard-test-csi controller --endpoint unix:///…/controller.sock --root DIR
//	volguard-test-csi node --endpoint unix:///…/csi.sock --registration unix:///…/plugins_registry/x-reg.sock --node NAME --root DIR
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

func main() {
	if len(os.Args) < 2 {
		log.Fatal("usage: volguard-test-csi controller|node [flags]")
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	endpoint := fs.String("endpoint", "", "unix:// socket this driver serves CSI on")
	registration := fs.String("registration", "", "node: unix:// socket in kubelet's plugins_registry")
	node := fs.String("node", "", "node: this node's name (its CSI node ID)")
	root := fs.String("root", "", "directory holding every volume (shared by all nodes)")
	name := fs.String("name", "hostpath.e2e.volguard.io", "the driver's name (one binary plays several drivers)")
	_ = fs.Parse(os.Args[2:])
	if *endpoint == "" || *root == "" {
		log.Fatal("--endpoint and --root are required")
	}
	d := &driver{root: *root, node: *node, name: *name}
	srv := grpc.NewServer(grpc.UnaryInterceptor(logCalls))
	csi.RegisterIdentityServer(srv, d)
	switch mode {
	case "controller":
		csi.RegisterControllerServer(srv, d)
	case "node":
		if *node == "" || *registration == "" {
			log.Fatal("node mode needs --node and --registration")
		}
		csi.RegisterNodeServer(srv, d)
		reg := grpc.NewServer()
		registerapi.RegisterRegistrationServer(reg, &registrar{name: *name, endpoint: strings.TrimPrefix(*endpoint, "unix://")})
		go serve(reg, *registration)
	default:
		log.Fatalf("unknown mode %q", mode)
	}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		srv.Stop()
		os.Exit(0)
	}()
	serve(srv, *endpoint)
}

func serve(srv *grpc.Server, endpoint string) {
	path := strings.TrimPrefix(endpoint, "unix://")
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		log.Fatalf("listen %s: %v", path, err)
	}
	if err := srv.Serve(l); err != nil {
		log.Fatalf("serve %s: %v", path, err)
	}
}

func logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	b, _ := json.Marshal(req)
	log.Printf("%s %s err=%v", info.FullMethod, b, err)
	return resp, err
}

type driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
	root string
	node string
	name string
	mu   sync.Mutex
}

// --- identity ---

func (d *driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.name, VendorVersion: "e2e"}, nil
}

func (d *driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

func (d *driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// --- controller: a volume is a directory; an attachment is a file naming the node ---

func (d *driver) volDir(id string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/.") {
		return "", status.Errorf(codes.InvalidArgument, "bad volume id %q", id)
	}
	return filepath.Join(d.root, id), nil
}

func (d *driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name required")
	}
	// A directory of the machine: a filesystem, never a raw block device (upstream's volumeMode
	// suite expects a driver without block support to refuse it).
	for _, c := range req.GetVolumeCapabilities() {
		if c.GetBlock() != nil {
			return nil, status.Error(codes.InvalidArgument, "block volumes are not supported")
		}
	}
	dir, err := d.volDir(req.GetName())
	if err != nil {
		return nil, err
	}
	// Volume ids are names the provisioner made unique; two drivers share one root.
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o777); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	size := req.GetCapacityRange().GetRequiredBytes()
	if size == 0 {
		size = 1 << 20
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: req.GetName(), CapacityBytes: size}}, nil
}

// DeleteVolume removes the bytes: what the PV controller asks for when reclaimPolicy is Delete.
func (d *driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	dir, err := d.volDir(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (d *driver) ControllerPublishVolume(_ context.Context, req *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	dir, err := d.volDir(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", req.GetVolumeId(), err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Attachments are recorded (attached-NODE files) so a test can see Multi-Attach as the
	// storage saw it; the driver itself refuses nothing, like storage that does not fence.
	if err := os.WriteFile(filepath.Join(dir, "attached-"+req.GetNodeId()), nil, 0o644); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.ControllerPublishVolumeResponse{}, nil
}

func (d *driver) ControllerUnpublishVolume(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	dir, err := d.volDir(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.Remove(filepath.Join(dir, "attached-"+req.GetNodeId())); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.ControllerUnpublishVolumeResponse{}, nil
}

func (d *driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{VolumeCapabilities: req.GetVolumeCapabilities()}}, nil
}

func (d *driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	caps := []*csi.ControllerServiceCapability{}
	for _, c := range []csi.ControllerServiceCapability_RPC_Type{
		csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
		csi.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
	} {
		caps = append(caps, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: c}}})
	}
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: caps}, nil
}

// --- node: publish is a bind mount of the volume's data directory; idempotent ---

func (d *driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.node, MaxVolumesPerNode: 64}, nil
}

func (d *driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

func mounted(target string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == target {
			return true
		}
	}
	return false
}

func (d *driver) NodePublishVolume(_ context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	dir, err := d.volDir(req.GetVolumeId())
	if err != nil {
		return nil, err
	}
	target := req.GetTargetPath()
	if target == "" {
		return nil, status.Error(codes.InvalidArgument, "target path required")
	}
	src := filepath.Join(dir, "data")
	if _, err := os.Stat(src); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", req.GetVolumeId(), err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// After a kubelet restart NodePublish comes again for a target already mounted.
	if mounted(target) {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := syscall.Mount(src, target, "", syscall.MS_BIND, ""); err != nil {
		return nil, status.Errorf(codes.Internal, "bind %s on %s: %v", src, target, err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *driver) NodeUnpublishVolume(_ context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	target := req.GetTargetPath()
	d.mu.Lock()
	defer d.mu.Unlock()
	for mounted(target) {
		if err := syscall.Unmount(target, 0); err != nil {
			return nil, status.Errorf(codes.Internal, "unmount %s: %v", target, err)
		}
	}
	if err := os.RemoveAll(target); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// --- kubelet plugin registration (what node-driver-registrar does) ---

type registrar struct {
	registerapi.UnimplementedRegistrationServer
	name     string
	endpoint string
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: r.name, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if !s.PluginRegistered {
		fmt.Fprintf(os.Stderr, "kubelet refused the registration: %s\n", s.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
