// Package server is catalog-svc's gRPC surface: CatalogServer implements
// sharedosv1.CatalogServiceServer over catalog.Service, and ToStatus is the
// service's one mapping from domain errors to gRPC status (with a
// google.rpc.ErrorInfo reason), used by every handler of this service,
// including the runtime's. Driver and library error text never reaches a
// client: anything unrecognised becomes a bare Internal.
package server
