package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sharedos/toolshare/bridge-svc/internal/leases"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/postgres"
	"github.com/sharedos/toolshare/bridge-svc/internal/leases/storetest"
	"github.com/sharedos/toolshare/bridge-svc/migrations"
	sharedosv1 "github.com/sharedos/toolshare/proto/sharedos/v1"
	"github.com/sharedos/toolshare/services/platform/pgdb"
	"github.com/sharedos/toolshare/services/platform/pgdb/pgtest"
)

func open(t *testing.T) *postgres.Store {
	dsn := pgtest.NewDatabase(t, migrations.Up)
	pool, err := pgdb.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open %s: %v", pgdb.RedactDSN(dsn), err)
	}
	t.Cleanup(pool.Close)
	return postgres.New(pool)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) leases.Store { return open(t) })
}

// TestAnswersRelay: a passed answer is announced to every watcher and
// taken exactly once, whole; an id nobody passed is ErrNotFound.
func TestAnswersRelay(t *testing.T) {
	s := open(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	heard := make(chan string, 1)
	listening := make(chan struct{})
	go func() {
		_ = s.WatchAnswers(ctx, func() { close(listening) }, func(id []byte) { heard <- string(id) })
	}()
	<-listening
	a := leases.Answer{TurnID: "t1", SessionID: "s1", ID: []byte(`"sharedos-ask-1"`), Result: []byte(`{"action":"accept"}`)}
	if err := s.PassAnswer(ctx, a); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-heard:
		if id != string(a.ID) {
			t.Fatalf("announced %q", id)
		}
	case <-ctx.Done():
		t.Fatal("the answer was never announced")
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []leases.Answer
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g, err := s.TakeAnswer(ctx, a.ID); err == nil {
				mu.Lock()
				got = append(got, g)
				mu.Unlock()
			} else if !errors.Is(err, leases.ErrNotFound) {
				t.Errorf("TakeAnswer: %v", err)
			}
		}()
	}
	wg.Wait()
	if len(got) != 1 || got[0].TurnID != "t1" || got[0].SessionID != "s1" || string(got[0].Result) != string(a.Result) || got[0].Error != nil {
		t.Fatalf("taken %+v: want the answer once, whole", got)
	}
	if _, err := s.TakeAnswer(ctx, []byte(`"sharedos-ask-2"`)); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("TakeAnswer of an id never passed: %v", err)
	}
}

// TestAnswersBudget: a turn keeps at most leases.MaxPassedAnswers answers
// nobody took; past that a pass is ErrAnswerBudget and stores nothing,
// another turn is not held up, and an answer taken makes room.
func TestAnswersBudget(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	pass := func(turn string, i int) error {
		return s.PassAnswer(ctx, leases.Answer{TurnID: turn, SessionID: "s", ID: []byte(fmt.Sprintf(`"sharedos-ask-%s-%d"`, turn, i)), Result: []byte(`{}`)})
	}
	for i := range leases.MaxPassedAnswers {
		if err := pass("t1", i); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	if err := pass("t1", leases.MaxPassedAnswers); !errors.Is(err, leases.ErrAnswerBudget) {
		t.Fatalf("answer past the budget: %v, want ErrAnswerBudget", err)
	}
	if _, err := s.TakeAnswer(ctx, []byte(fmt.Sprintf(`"sharedos-ask-t1-%d"`, leases.MaxPassedAnswers))); !errors.Is(err, leases.ErrNotFound) {
		t.Fatalf("the refused answer was stored: %v", err)
	}
	if err := pass("t2", 0); err != nil {
		t.Fatalf("another turn's answer: %v", err)
	}
	if _, err := s.TakeAnswer(ctx, []byte(`"sharedos-ask-t1-0"`)); err != nil {
		t.Fatal(err)
	}
	if err := pass("t1", leases.MaxPassedAnswers+1); err != nil {
		t.Fatalf("an answer after one was taken: %v", err)
	}
}

// TestOldCatalogueRowsDecode: a lease written before prompts and resources
// were pinned holds a ListToolsResponse; it reads as a LeaseCatalogue with
// the same tools and hash, and none of the rest.
func TestOldCatalogueRowsDecode(t *testing.T) {
	old, err := proto.Marshal(&sharedosv1.ListToolsResponse{CatalogHash: "c0ffee",
		Tools: []*sharedosv1.PublishedTool{{Name: "files.read", CanonicalJson: []byte(`{"name":"files.read"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	var cat sharedosv1.LeaseCatalogue
	if err := proto.Unmarshal(old, &cat); err != nil || cat.GetCatalogHash() != "c0ffee" || len(cat.GetTools()) != 1 ||
		cat.GetTools()[0].GetName() != "files.read" || len(cat.GetPrompts()) != 0 || cat.GetPromptsResourcesHash() != "" {
		t.Fatalf("decoded %v, %v", &cat, err)
	}
}
