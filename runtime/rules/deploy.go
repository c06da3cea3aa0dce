package rules

import (
	"cmp"
	"fmt"
)

// Deployment is what the rules read of a model's deployment: its own name
// and its provider's.
type Deployment struct {
	// Name is the deployment's name; empty means its provider's.
	Name string
	// Provider names the provider it calls.
	Provider string
}

// DeploymentName is a deployment's name: its own, or without one its
// provider's.
func DeploymentName(d Deployment) string { return cmp.Or(d.Name, d.Provider) }

// Deployments checks the names of a model's deployments (DeploymentName):
// distinct, so that routing, cool-downs, traces and metrics tell them
// apart. A problem's path is the index in deps of a deployment that
// repeats a name declared before it. It is checked where a model is
// declared (`aidgen vet`) and where the gateway builds its routes.
func Deployments(deps []Deployment) []Problem {
	var out []Problem
	seen := make(map[string]bool, len(deps))
	for i, d := range deps {
		name := DeploymentName(d)
		if seen[name] {
			out = append(out, problem(fmt.Sprintf("deployment %q is declared twice", name), i))
		}
		seen[name] = true
	}
	return out
}
