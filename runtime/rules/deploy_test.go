package rules_test

import (
	"reflect"
	"testing"

	"github.com/aidgen/aid/runtime/rules"
)

// TestDeployments: a deployment without a name is named after its
// provider, and a name declared again is a problem at each repetition.
func TestDeployments(t *testing.T) {
	deps := []rules.Deployment{{Provider: "a"}, {Name: "eu", Provider: "a"}, {Name: "a", Provider: "b"}, {Provider: "eu"}, {Provider: "b"}, {Provider: "a"}}
	if got := rules.DeploymentName(deps[0]); got != "a" {
		t.Errorf("the name of an unnamed deployment = %q, want its provider's", got)
	}
	want := []rules.Problem{
		{Path: []any{2}, Msg: `deployment "a" is declared twice`},
		{Path: []any{3}, Msg: `deployment "eu" is declared twice`},
		{Path: []any{5}, Msg: `deployment "a" is declared twice`},
	}
	if got := rules.Deployments(deps); !reflect.DeepEqual(got, want) {
		t.Errorf("Deployments = %+v, want %+v", got, want)
	}
	if got := rules.Deployments(deps[:2]); got != nil {
		t.Errorf("distinct names: %+v", got)
	}
}
