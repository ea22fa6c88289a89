package dynamo

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// CallCounter counts the requests an AWS SDK client sends, per operation, so tests can assert
// the round-trip budget of DESIGN.md decision 3 ("tests count the AWS calls per operation").
// It counts in the Finalize step after the retry middleware, so every attempt that goes on the
// wire counts, retries included. It works with any aws-sdk-go-v2 client (DynamoDB, KMS):
//
//	counter := dynamo.NewCallCounter()
//	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
//		o.APIOptions = append(o.APIOptions, counter.Register)
//	})
type CallCounter struct {
	mu    sync.Mutex
	calls map[string]int
	spans []Span
	reset int // Resets so far: a request sent before one does not end a span after it
	// latency, when set (SetLatency), holds every request that long before it goes on the
	// wire, as the network between a function and DynamoDB does.
	latency atomic.Int64
}

// Span is one request on the wire: its operation, and when it was sent and answered.
type Span struct {
	Op         string
	Start, End time.Time
}

// NewCallCounter returns a counter at zero.
func NewCallCounter() *CallCounter { return &CallCounter{calls: map[string]int{}} }

// Register adds the counting middleware to a client's stack; pass it in the client's
// APIOptions.
func (c *CallCounter) Register(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("CallCounter",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			op := awsmiddleware.GetOperationName(ctx)
			c.mu.Lock()
			c.calls[op]++
			i, gen := len(c.spans), c.reset
			if i < maxSpans {
				c.spans = append(c.spans, Span{Op: op, Start: time.Now()})
			}
			c.mu.Unlock()
			if d := time.Duration(c.latency.Load()); d > 0 {
				time.Sleep(d)
			}
			out, md, err := next.HandleFinalize(ctx, in)
			c.mu.Lock()
			if gen == c.reset && i < len(c.spans) {
				c.spans[i].End = time.Now()
			}
			c.mu.Unlock()
			return out, md, err
		}), middleware.After)
}

// SetLatency holds every request d before it is sent (0: none). DynamoDB Local on the same
// machine answers a read in about a millisecond, sooner than a loaded machine schedules the
// request sent beside it; with the latency of a network, requests sent together overlap as
// they do in AWS, so RoundTrips counts what the code does, not how the machine scheduled it.
func (c *CallCounter) SetLatency(d time.Duration) { c.latency.Store(int64(d)) }

// Reset sets every count back to zero.
func (c *CallCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.calls)
	c.spans = nil
	c.reset++
}

// maxSpans bounds the spans kept between two Resets (a load test sends millions of requests).
const maxSpans = 10000

// Spans returns the requests since the last Reset in the order they were sent (the first
// maxSpans of them), so a test can tell sequential round trips (one answered before the next
// is sent) from parallel ones.
func (c *CallCounter) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans)
}

// RoundTrips returns the sequential round trips of the requests since the last Reset: the
// longest chain of them in which each was sent after the one before it was answered. Requests
// in flight together count once; a request sent only after another's answer adds one.
func (c *CallCounter) RoundTrips() int { return SequentialRoundTrips(c.Spans()) }

// SequentialRoundTrips is the number of sequential round trips among spans: the longest chain
// of them whose time ranges do not overlap, each sent after the one before it was answered
// (what CallCounter.RoundTrips counts, for spans recorded elsewhere, by a proxy say).
func SequentialRoundTrips(spans []Span) int {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b Span) int { return a.End.Compare(b.End) })
	n := 0
	var last time.Time
	for _, s := range spans {
		if n == 0 || !s.Start.Before(last) {
			n++
			last = s.End
		}
	}
	return n
}

// Calls returns a copy of the counts since the last Reset, by operation name (GetItem,
// UpdateItem, TransactWriteItems, ...).
func (c *CallCounter) Calls() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.calls)
}

// Total returns the number of requests since the last Reset.
func (c *CallCounter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}
