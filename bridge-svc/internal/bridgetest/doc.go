// Package bridgetest runs a real bridge (app.Config → Complete → Run on
// loopback ports) against in-process fakes of catalog-svc and the kernel
// served over real gRPC, for the bridge's own tests and the npm e2e test.
// The fake kernel records every ToolCall so tests can assert what reached
// it — and that nothing did.
package bridgetest
