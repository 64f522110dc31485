package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/tools/regfile"
)

// Prompts and resources (ADR 0018): registered from a YAML or JSON file of
// one registration or a list, in the PromptRegistration /
// ResourceRegistration JSON form (camelCase fields; handler.timeout "5s").

func init() {
	var promptFile, resourceFile string
	register(&command{path: "prompts register", usage: "-f FILE (YAML or JSON: one prompt registration or a list)",
		flags: func(fs *flag.FlagSet) { fs.StringVar(&promptFile, "f", "", "registration file") },
		run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
			return registerEntries(ctx, e, promptFile, args, func() *sharedosv1.PromptRegistration { return &sharedosv1.PromptRegistration{} },
				func(cc sharedosv1.CatalogServiceClient, r *sharedosv1.PromptRegistration) (string, int64, error) {
					resp, err := cc.RegisterPrompt(ctx, &sharedosv1.RegisterPromptRequest{Registration: r})
					return r.GetName(), resp.GetRegistration().GetRevision(), err
				})
		}})
	register(&command{path: "prompts list", usage: "", run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		cc, err := catalogClient(e)
		if err != nil {
			return err
		}
		resp, err := cc.ListPromptRegistrations(ctx, &sharedosv1.ListPromptRegistrationsRequest{})
		if err != nil {
			return errors.New(describe(err))
		}
		return e.emitProto(resp)
	}})
	register(&command{path: "prompts deregister", usage: "NAME", run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
		return deregisterEntry(ctx, e, args, "prompt NAME", func(cc sharedosv1.CatalogServiceClient, key string) error {
			_, err := cc.DeregisterPrompt(ctx, &sharedosv1.DeregisterPromptRequest{Name: key})
			return err
		})
	}})
	register(&command{path: "resources register", usage: "-f FILE (YAML or JSON: one resource registration or a list)",
		flags: func(fs *flag.FlagSet) { fs.StringVar(&resourceFile, "f", "", "registration file") },
		run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
			return registerEntries(ctx, e, resourceFile, args, func() *sharedosv1.ResourceRegistration { return &sharedosv1.ResourceRegistration{} },
				func(cc sharedosv1.CatalogServiceClient, r *sharedosv1.ResourceRegistration) (string, int64, error) {
					resp, err := cc.RegisterResource(ctx, &sharedosv1.RegisterResourceRequest{Registration: r})
					return r.GetUri(), resp.GetRegistration().GetRevision(), err
				})
		}})
	register(&command{path: "resources list", usage: "", run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		cc, err := catalogClient(e)
		if err != nil {
			return err
		}
		resp, err := cc.ListResourceRegistrations(ctx, &sharedosv1.ListResourceRegistrationsRequest{})
		if err != nil {
			return errors.New(describe(err))
		}
		return e.emitProto(resp)
	}})
	register(&command{path: "resources deregister", usage: "URI", run: func(ctx context.Context, e *env, _ *flag.FlagSet, args []string) error {
		return deregisterEntry(ctx, e, args, "resource URI", func(cc sharedosv1.CatalogServiceClient, key string) error {
			_, err := cc.DeregisterResource(ctx, &sharedosv1.DeregisterResourceRequest{Uri: key})
			return err
		})
	}})
}

// readEntries parses file as one registration or a list of them.
func readEntries[T proto.Message](file string, newT func() T) ([]T, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	j, err := regfile.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var items []json.RawMessage
	if t := bytes.TrimSpace(j); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &items); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	} else {
		items = []json.RawMessage{t}
	}
	out := make([]T, 0, len(items))
	for i, item := range items {
		r := newT()
		if err := protojson.Unmarshal(item, r); err != nil {
			return nil, fmt.Errorf("%s: registration %d: %w", file, i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func registerEntries[T proto.Message](ctx context.Context, e *env, file string, args []string, newT func() T,
	put func(sharedosv1.CatalogServiceClient, T) (string, int64, error)) error {
	if file == "" {
		return usagef("-f FILE is required")
	}
	if err := noArgs(args); err != nil {
		return err
	}
	regs, err := readEntries(file, newT)
	if err != nil {
		return err
	}
	cc, err := catalogClient(e)
	if err != nil {
		return err
	}
	type registered struct {
		Key      string `json:"key"`
		Revision int64  `json:"revision"`
	}
	var out []registered
	var rows [][]string
	emit := func() error { return e.emit(map[string]any{"registered": out}, []string{"KEY", "REVISION"}, rows) }
	for i, r := range regs {
		key, rev, err := put(cc, r)
		if err != nil {
			// One RPC per entry: those before it stay registered. Say
			// which (on stdout, as a success would) and that the rest
			// were not sent, so a fixed file is not re-run blind.
			done := "nothing registered"
			if len(out) > 0 {
				_ = emit()
				done = fmt.Sprintf("the %d before it are registered (on stdout)", len(out))
			}
			return fmt.Errorf("register %q: %s; %s, the %d after it not sent", key, describe(err), done, len(regs)-i-1)
		}
		out = append(out, registered{Key: key, Revision: rev})
		rows = append(rows, []string{key, fmt.Sprint(rev)})
	}
	return emit()
}

func deregisterEntry(ctx context.Context, e *env, args []string, what string, del func(sharedosv1.CatalogServiceClient, string) error) error {
	key, err := oneArg(args, what)
	if err != nil {
		return err
	}
	cc, err := catalogClient(e)
	if err != nil {
		return err
	}
	if err := del(cc, key); err != nil {
		return errors.New(describe(err))
	}
	return e.emit(map[string]any{"deregistered": key}, []string{"DEREGISTERED"}, [][]string{{key}})
}
