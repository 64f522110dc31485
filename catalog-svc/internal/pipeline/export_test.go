package pipeline

import (
	"context"
	"time"
)

// SetCompletionWait shortens how long an answer waits for a store that is
// down, so a test reaches record_unavailable without a caller's deadline
// racing the call.
func (s *Pipeline) SetCompletionWait(d time.Duration) { s.completionWait = d }

// AbandonedReason is the record's reason for a call its bridge gave up on.
const AbandonedReason = abandonedReason

// OnJournalReadsForTest has Reconcile call f between its reads of other
// processes' journal files and of its own journal.
func (s *Pipeline) OnJournalReadsForTest(f func()) { s.betweenJournalReads = f }

// ForgetStoreFailureForTest has Reconcile act as though the store's last
// failure were older than its margin (30 s), which a test does not wait.
func (s *Pipeline) ForgetStoreFailureForTest() { s.storeFailedAt.Store(0) }

// BeginContextForTest is the context an attempt's pending row is written
// under, and BeginTimeout its bound.
func BeginContextForTest(ctx context.Context) (context.Context, context.CancelFunc) {
	return beginContext(ctx)
}

// BeginTimeout and RevocationReadTimeout bound the steps before dispatch.
const BeginTimeout, RevocationReadTimeout = beginTimeout, revocationReadTimeout
