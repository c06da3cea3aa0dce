// Written once by aidgen build for the issue_refund tool. This file is yours: aidgen
// never overwrites it.

package business

import (
	"context"
	"github.com/aidgen/aid/runtime/kind"
)

// IssueRefund implements the issue_refund tool: Refund an order.
// Its result is the observation the model reads: a string as is, anything
// else as JSON.
func IssueRefund(ctx context.Context, in IssueRefundInput) (string, error) {
	return "", &kind.DeferredError{Feature: "tool issue_refund"}
}
