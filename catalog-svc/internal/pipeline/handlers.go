package pipeline

import (
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/grpcx"
)

// HandlerClients hands out a ToolHandlerService client per handler target.
type HandlerClients interface {
	Client(target string) (sharedosv1.ToolHandlerServiceClient, error)
}

// ConnCache dials each handler target once (grpcx.Dial: no retries) and
// reuses the connection for every later call.
type ConnCache struct {
	opts []grpc.DialOption

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn
	closed bool
}

var _ HandlerClients = (*ConnCache)(nil)

// NewConnCache returns an empty cache; opts are passed to grpcx.Dial.
func NewConnCache(opts ...grpc.DialOption) *ConnCache {
	return &ConnCache{opts: opts, conns: map[string]*grpc.ClientConn{}}
}

var errCacheClosed = errors.New("runtime: handler connection cache closed")

// Client implements HandlerClients.
func (c *ConnCache) Client(target string) (sharedosv1.ToolHandlerServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errCacheClosed
	}
	cc, ok := c.conns[target]
	if !ok {
		var err error
		if cc, err = grpcx.Dial(target, c.opts...); err != nil {
			return nil, fmt.Errorf("runtime: dial handler: %w", err)
		}
		c.conns[target] = cc
	}
	return sharedosv1.NewToolHandlerServiceClient(cc), nil
}

// Close closes every connection.
func (c *ConnCache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for t, cc := range c.conns {
		errs = append(errs, cc.Close())
		delete(c.conns, t)
	}
	return errors.Join(errs...)
}
