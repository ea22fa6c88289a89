package dynamo

import (
	"testing"
	"time"
)

// TestSequentialRoundTrips_CountsRequestsThatDoNotOverlap: requests in flight together count
// once, a request sent after another's answer adds one, whatever order the spans come in.
func TestSequentialRoundTrips_CountsRequestsThatDoNotOverlap(t *testing.T) {
	at := func(op string, start, end int) Span {
		t0 := time.Unix(0, 0)
		return Span{Op: op, Start: t0.Add(time.Duration(start) * time.Millisecond), End: t0.Add(time.Duration(end) * time.Millisecond)}
	}
	for _, tc := range []struct {
		name  string
		spans []Span
		want  int
	}{
		{"none", nil, 0},
		{"one", []Span{at("GetItem", 0, 5)}, 1},
		{"two together, then one (a FAPI exchange)", []Span{at("GetItem", 0, 5), at("TransactWriteItems", 1, 8), at("TransactWriteItems", 9, 15)}, 2},
		{"a read answered before the write beside it is sent", []Span{at("GetItem", 0, 2), at("TransactWriteItems", 3, 8), at("TransactWriteItems", 9, 15)}, 3},
		{"one after the other, listed out of order", []Span{at("TransactWriteItems", 20, 30), at("GetItem", 0, 5), at("Sign", 6, 19)}, 3},
		{"one long request beside two short ones in turn", []Span{at("Sign", 0, 30), at("GetItem", 1, 5), at("PutItem", 6, 10)}, 2},
		{"sent at the instant the other was answered", []Span{at("GetItem", 0, 5), at("PutItem", 5, 9)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SequentialRoundTrips(tc.spans); got != tc.want {
				t.Errorf("SequentialRoundTrips = %d, want %d", got, tc.want)
			}
		})
	}
}
