package kube

import (
	"encoding/json"
	"strings"
	"testing"
)

// judgePolicy holds the policy in force only as the install makes it, and
// names each way it is not.
func TestJudgePolicy(t *testing.T) {
	const installed = `{"spec":{"policyName":"fleet-role-probe-records","validationActions":["Deny"]}}`
	for _, c := range []struct {
		name, policy, binding string
		why                   string // "" when in force
	}{
		{"as installed", `{"spec":{"failurePolicy":"Fail"}}`, installed, ""},
		{"failurePolicy left to its default, Fail", `{"spec":{}}`, installed, ""},
		{"failurePolicy Ignore", `{"spec":{"failurePolicy":"Ignore"}}`, installed, "the policy's failurePolicy is Ignore, not Fail"},
		{"another policy bound", `{"spec":{}}`, `{"spec":{"policyName":"other","validationActions":["Deny"]}}`, `the binding binds policy "other"`},
		{"warn only", `{"spec":{}}`, `{"spec":{"policyName":"fleet-role-probe-records","validationActions":["Warn","Audit"]}}`, "do not Deny"},
		{"deny and warn", `{"spec":{}}`, `{"spec":{"policyName":"fleet-role-probe-records","validationActions":["Deny","Warn"]}}`, ""},
		{"parameters", `{"spec":{}}`, `{"spec":{"policyName":"fleet-role-probe-records","validationActions":["Deny"],"paramRef":{"name":"x"}}}`, "paramRef"},
		{"narrowed", `{"spec":{}}`, `{"spec":{"policyName":"fleet-role-probe-records","validationActions":["Deny"],"matchResources":{"namespaceSelector":{"matchLabels":{"a":"b"}}}}}`, "matchResources"},
		{"matchResources empty", `{"spec":{}}`, `{"spec":{"policyName":"fleet-role-probe-records","validationActions":["Deny"],"matchResources":{}}}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var p policyJSON
			var b bindingJSON
			if err := json.Unmarshal([]byte(c.policy), &p); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(c.binding), &b); err != nil {
				t.Fatal(err)
			}
			got := judgePolicy(p, b)
			if c.why == "" {
				if !got.InForce || got.Why != "" {
					t.Fatalf("%+v, want in force", got)
				}
				return
			}
			if got.InForce || !strings.Contains(got.Why, c.why) {
				t.Fatalf("%+v, want not in force saying %q", got, c.why)
			}
		})
	}
}
