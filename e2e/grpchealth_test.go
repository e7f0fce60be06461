package e2e

import (
	"context"
	"fmt"
	"net"
	"os"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// grpcHealthEnv, set to a listen address, makes this test binary a gRPC
// health server instead of running tests: a pod runs it, since pods run
// processes of the node's filesystem and the node has no gRPC server.
// grpcHealthFileEnv names the file whose presence means SERVING.
const (
	grpcHealthEnv     = "PORTAL_E2E_GRPC_HEALTH"
	grpcHealthFileEnv = "PORTAL_E2E_GRPC_HEALTH_FILE"
)

// fileHealth answers SERVING while its file exists, NOT_SERVING otherwise.
type fileHealth struct {
	healthpb.UnimplementedHealthServer
	file string
}

func (h fileHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if _, err := os.Stat(h.file); err != nil {
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_NOT_SERVING}, nil
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// serveGRPCHealth serves fileHealth on addr until killed.
func serveGRPCHealth(addr, file string) int {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, fileHealth{file: file})
	fmt.Println("serving gRPC health on", l.Addr())
	if err := s.Serve(l); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
