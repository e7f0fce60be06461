// Package dns is Portal's cluster DNS server: the Kubernetes DNS-Based
// Service Discovery records of the cluster zone, answered from an
// in-memory index that client-go informers keep up to date, and every
// other name forwarded to upstream servers.
//
// It owns the edge: the informers (informers.go), the UDP and TCP
// listeners with their hot path (a cache of packed responses), the health,
// readiness and metrics endpoints. The record logic lives in dns/answer,
// the records in dns/index, the forwarder and its cache in dns/forward and
// the hand-written wire parsing in dns/wire. It reads the API only through
// informers and never writes to it.
package dns
