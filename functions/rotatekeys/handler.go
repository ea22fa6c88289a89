package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/acmebank/authserver/shared/keys"
)

// The invocations the function accepts, told apart by their shape:
//
//   - an EventBridge scheduled event ("source": "aws.events", "detail-type": "Scheduled
//     Event"): one rotation run, making the transitions that are due;
//   - a CloudFormation custom-resource request ("RequestType" and "ResponseURL"): the stack's
//     InitialKey resource. Create and Update run the rotation once, so a fresh stack signs with
//     no manual step; Delete does nothing (the keys live in the retained table's registry).
//     The outcome is sent to the ResponseURL (aws-lambda-go's cfn package), FAILED with the
//     reason when the run failed, so the stack rolls back instead of coming up unable to sign;
//   - an operator's {"action": "rotate"} (the scheduled run, on demand) or
//     {"action": "promote"} (replace the current key now; still never before the next key has
//     been published for the policy's lead time).
//
// Anything else is refused with an error and changes nothing.
const (
	actionRotate  = "rotate"
	actionPromote = "promote"
)

// physicalID names the InitialKey resource. It never changes, so CloudFormation never
// replaces the resource (and never sends the old one a Delete) on an update.
const physicalID = "initial-signing-key"

// responseTime is kept from the invocation's deadline to send the custom-resource response.
const responseTime = 5 * time.Second

// shape is the part of any accepted payload that tells which one it is.
type shape struct {
	RequestType string `json:"RequestType"`
	ResponseURL string `json:"ResponseURL"`
	Source      string `json:"source"`
	DetailType  string `json:"detail-type"`
	ID          string `json:"id"`
	Action      string `json:"action"`
}

// rotator is the part of keys.Rotator the function uses.
type rotator interface {
	Rotate(ctx context.Context) (keys.Report, error)
	Promote(ctx context.Context) (keys.Report, error)
}

// handler runs the rotation for whichever invocation arrives; its report (kids and
// timestamps only, never key material) is logged and returned to the invoker.
type handler struct {
	rot rotator
	log *slog.Logger
}

// newHandler returns the Lambda handler. A failed scheduled or operator run returns its error,
// so the invocation is marked failed and EventBridge's retry runs it again (runs are
// idempotent).
func newHandler(r rotator, log *slog.Logger) func(context.Context, json.RawMessage) (any, error) {
	h := &handler{rot: r, log: log}
	return h.handle
}

func (h *handler) handle(ctx context.Context, payload json.RawMessage) (any, error) {
	var ev shape
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("rotatekeys: payload is not a JSON object: %w", err)
	}
	switch {
	case ev.RequestType != "" && ev.ResponseURL != "":
		var req cfn.Event
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, fmt.Errorf("rotatekeys: CloudFormation request: %w", err)
		}
		return cfn.LambdaWrap(h.customResource)(ctx, req)
	case ev.Source == "aws.events" && ev.DetailType == "Scheduled Event":
		return h.run(ctx, "scheduled", ev.ID, h.rot.Rotate)
	case ev.Action == actionRotate:
		return h.run(ctx, "on demand", "", h.rot.Rotate)
	case ev.Action == actionPromote:
		return h.run(ctx, "promote", "", h.rot.Promote)
	}
	return nil, errors.New(`rotatekeys: unrecognised payload: want an EventBridge scheduled event, a CloudFormation custom-resource request, {"action":"rotate"} or {"action":"promote"}`)
}

// run makes one rotation run and logs its report.
func (h *handler) run(ctx context.Context, mode, eventID string, fn func(context.Context) (keys.Report, error)) (keys.Report, error) {
	rep, err := fn(ctx)
	if err != nil {
		h.log.ErrorContext(ctx, "key rotation failed", "mode", mode, "event_id", eventID, "report", rep, "err", err)
		return rep, err
	}
	h.log.InfoContext(ctx, "key rotation done", "mode", mode, "event_id", eventID, "report", rep)
	return rep, nil
}

// customResource is the InitialKey resource's lifecycle; cfn.LambdaWrap sends what it returns
// to CloudFormation (SUCCESS, or FAILED with the error as the reason).
func (h *handler) customResource(ctx context.Context, req cfn.Event) (string, map[string]any, error) {
	if req.RequestType == cfn.RequestDelete {
		h.log.InfoContext(ctx, "key rotation: stack resource deleted, keys kept", "request_id", req.RequestID, "stack", req.StackID)
		return physicalID, nil, nil
	}
	// Stop the run before the function's own deadline, so that a FAILED still reaches
	// CloudFormation rather than the stack waiting an hour for an answer that never comes.
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-responseTime))
		defer cancel()
	}
	rep, err := h.run(ctx, "stack "+string(req.RequestType), req.RequestID, h.rot.Rotate)
	if err != nil {
		return physicalID, nil, err
	}
	return physicalID, resourceData(rep), nil
}

// resourceData is what the InitialKey resource returns: CurrentKid<alg> and NextKid<alg> for
// each configured algorithm, and CurrentKid and NextKid of the first one (RS256 by default).
func resourceData(rep keys.Report) map[string]any {
	data := map[string]any{}
	for _, alg := range keys.Algs {
		a, ok := rep.Algs[alg]
		if !ok {
			continue
		}
		if _, set := data["CurrentKid"]; !set {
			data["CurrentKid"], data["NextKid"] = a.Current, a.Next
		}
		data["CurrentKid"+alg], data["NextKid"+alg] = a.Current, a.Next
	}
	return data
}

// notHere is the rotation of a region that does not rotate (AUTH_KEY_ROTATION=off, the
// SecondaryRegion of a multi-region deployment): the key registry, replicated to every region,
// has one writer, so a run here, scheduled or by hand, is refused and changes nothing
// (docs/multiregion.md).
type notHere struct{}

var errNotHere = errors.New("rotatekeys: this region does not rotate keys (AUTH_KEY_ROTATION=off): invoke the rotation in the primary region")

func (notHere) Rotate(context.Context) (keys.Report, error)  { return keys.Report{}, errNotHere }
func (notHere) Promote(context.Context) (keys.Report, error) { return keys.Report{}, errNotHere }
