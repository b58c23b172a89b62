package generator

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The schemas below are written here, not copied: each is the part of a
// published API the generator writes, transcribed into the JSON Schema
// keywords validate understands (type, enum, properties, required, items,
// additionalProperties, minimum), strict (additionalProperties false) so a
// misspelt field fails. Each names its source and the date it was read.

func obj(required []string, props map[string]any) map[string]any {
	req := make([]any, len(required))
	for i, r := range required {
		req[i] = r
	}
	return map[string]any{"type": "object", "required": req, "properties": props, "additionalProperties": false}
}

func arr(items map[string]any) map[string]any { return map[string]any{"type": "array", "items": items} }

var (
	str       = map[string]any{"type": "string"}
	boolean   = map[string]any{"type": "boolean"}
	intOrStr  = map[string]any{"type": []any{"integer", "string"}}
	int32Min0 = map[string]any{"type": "integer", "minimum": 0.0}
	strMap    = map[string]any{"type": "object", "additionalProperties": str}
	anyObject = map[string]any{"type": "object"}
)

// labelSelector is metav1.LabelSelector.
var labelSelector = obj(nil, map[string]any{
	"matchLabels":      strMap,
	"matchExpressions": arr(obj([]string{"key", "operator"}, map[string]any{"key": str, "operator": str, "values": arr(str)})),
})

// objectMeta is the part of metav1.ObjectMeta the generator writes.
var objectMeta = obj([]string{"name"}, map[string]any{"name": str, "namespace": str, "labels": strMap, "annotations": strMap})

// networkPolicyPort, networkPolicyPeer, egress and ingress rules:
// networking.k8s.io/v1 as the Kubernetes v1.32 API reference gives them
// (kubernetes.io/docs/reference/kubernetes-api/policy-resources/network-policy-v1/,
// read 2026-11-26).
var (
	networkPolicyPort = obj(nil, map[string]any{
		"protocol": map[string]any{"type": "string", "enum": []any{"TCP", "UDP", "SCTP"}},
		"port":     intOrStr,
		"endPort":  map[string]any{"type": "integer"},
	})
	networkPolicyPeer = obj(nil, map[string]any{
		"ipBlock":           obj([]string{"cidr"}, map[string]any{"cidr": str, "except": arr(str)}),
		"namespaceSelector": labelSelector,
		"podSelector":       labelSelector,
	})
	egressRule  = obj(nil, map[string]any{"to": arr(networkPolicyPeer), "ports": arr(networkPolicyPort)})
	ingressRule = obj(nil, map[string]any{"from": arr(networkPolicyPeer), "ports": arr(networkPolicyPort)})
)

// networkPolicySchema is NetworkPolicy (networking.k8s.io/v1), source above.
var networkPolicySchema = obj([]string{"apiVersion", "kind", "metadata", "spec"}, map[string]any{
	"apiVersion": map[string]any{"type": "string", "enum": []any{"networking.k8s.io/v1"}},
	"kind":       map[string]any{"type": "string", "enum": []any{"NetworkPolicy"}},
	"metadata":   objectMeta,
	"spec": obj([]string{"podSelector"}, map[string]any{
		"podSelector": labelSelector,
		"policyTypes": arr(map[string]any{"type": "string", "enum": []any{"Ingress", "Egress"}}),
		"egress":      arr(egressRule),
		"ingress":     arr(ingressRule),
	}),
})

// The agent-sandbox schemas: extensions.agents.x-k8s.io/v1beta1 as the
// CustomResourceDefinitions of kubernetes-sigs/agent-sandbox give them
// (k8s/crds/extensions.agents.x-k8s.io_sandboxtemplates.yaml,
// _sandboxwarmpools.yaml and _sandboxclaims.yaml at commit 2fd412d5,
// 2026-08-22, read 2026-11-26). The CRDs' podTemplate.spec is the core
// PodSpec: checkSandboxItems checks it against podTemplateSpec
// (k8sapi_test.go).
var (
	sandboxTemplateSchema = obj([]string{"spec"}, map[string]any{
		"apiVersion": map[string]any{"type": "string", "enum": []any{agentSandboxGroup}},
		"kind":       map[string]any{"type": "string", "enum": []any{"SandboxTemplate"}},
		"metadata":   objectMeta,
		"spec": obj([]string{"podTemplate"}, map[string]any{
			"podTemplate": obj([]string{"spec"}, map[string]any{
				"metadata": obj(nil, map[string]any{"labels": strMap, "annotations": strMap}),
				"spec":     anyObject, // checked as a PodSpec below
			}),
			"envVarsInjectionPolicy":     map[string]any{"type": "string", "enum": []any{"Allowed", "Overrides", "Disallowed"}},
			"networkPolicyManagement":    map[string]any{"type": "string", "enum": []any{"Managed", "Unmanaged"}},
			"networkPolicy":              obj(nil, map[string]any{"egress": arr(egressRule), "ingress": arr(ingressRule)}),
			"service":                    boolean,
			"volumeClaimTemplates":       arr(obj([]string{"spec"}, map[string]any{"metadata": anyObject, "spec": anyObject})),
			"volumeClaimTemplatesPolicy": map[string]any{"type": "string", "enum": []any{"Disallowed", "Allowed", "Overrides"}},
		}),
	})
	sandboxWarmPoolSchema = obj([]string{"spec"}, map[string]any{
		"apiVersion": map[string]any{"type": "string", "enum": []any{agentSandboxGroup}},
		"kind":       map[string]any{"type": "string", "enum": []any{"SandboxWarmPool"}},
		"metadata":   objectMeta,
		"spec": obj([]string{"sandboxTemplateRef"}, map[string]any{
			"replicas":           int32Min0,
			"sandboxTemplateRef": obj([]string{"name"}, map[string]any{"name": str}),
			"updateStrategy":     obj(nil, map[string]any{"type": map[string]any{"type": "string", "enum": []any{"Recreate", "OnReplenish"}}}),
		}),
	})
	sandboxClaimSchema = obj([]string{"spec"}, map[string]any{
		"apiVersion": map[string]any{"type": "string", "enum": []any{agentSandboxGroup}},
		"kind":       map[string]any{"type": "string", "enum": []any{"SandboxClaim"}},
		"metadata":   objectMeta,
		"spec": obj([]string{"warmPoolRef"}, map[string]any{
			"warmPoolRef": obj([]string{"name"}, map[string]any{"name": str}),
			"lifecycle": obj(nil, map[string]any{
				"shutdownPolicy":          map[string]any{"type": "string", "enum": []any{"Delete", "DeleteForeground", "Retain"}},
				"shutdownTime":            str,
				"ttlSecondsAfterFinished": int32Min0,
			}),
			"additionalPodMetadata": obj(nil, map[string]any{"labels": strMap, "annotations": strMap}),
			"env":                   arr(obj([]string{"name", "value"}, map[string]any{"name": str, "value": str, "containerName": str})),
		}),
	})
)

// networkPolicyRules are the checks the API server's validation makes of
// a NetworkPolicy's rules that a schema cannot say (the API reference
// above): a cidr is a CIDR, every except range lies inside its cidr and is
// of its family, an endPort needs a numeric port not above it.
func networkPolicyRules(path string, rules []any) []string {
	var out []string
	for i, r := range rules {
		rm, _ := r.(map[string]any)
		for _, key := range []string{"to", "from"} {
			peers, _ := rm[key].([]any)
			for j, p := range peers {
				pm, _ := p.(map[string]any)
				ib, ok := pm["ipBlock"].(map[string]any)
				if !ok {
					continue
				}
				at := fmt.Sprintf("%s[%d].%s[%d].ipBlock", path, i, key, j)
				cidr, err := netip.ParsePrefix(fmt.Sprint(ib["cidr"]))
				if err != nil {
					out = append(out, fmt.Sprintf("%s.cidr %v is not a CIDR", at, ib["cidr"]))
					continue
				}
				except, _ := ib["except"].([]any)
				for k, e := range except {
					ep, err := netip.ParsePrefix(fmt.Sprint(e))
					switch {
					case err != nil:
						out = append(out, fmt.Sprintf("%s.except[%d] %v is not a CIDR", at, k, e))
					case ep.Addr().Is4() != cidr.Addr().Is4() || !cidr.Contains(ep.Addr()) || ep.Bits() < cidr.Bits():
						out = append(out, fmt.Sprintf("%s.except[%d] %v is not inside %v", at, k, e, cidr))
					}
				}
			}
		}
		ports, _ := rm["ports"].([]any)
		for j, p := range ports {
			pm, _ := p.(map[string]any)
			if end, ok := pm["endPort"].(float64); ok {
				port, isNum := pm["port"].(float64)
				if !isNum || end < port {
					out = append(out, fmt.Sprintf("%s[%d].ports[%d].endPort needs a numeric port at most %v", path, i, j, end))
				}
			}
		}
	}
	return out
}

func decodeList(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var list struct {
		APIVersion string           `json:"apiVersion"`
		Kind       string           `json:"kind"`
		Items      []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" {
		t.Fatalf("%s %s, want a v1 List", list.APIVersion, list.Kind)
	}
	return list.Items
}

// checkSandboxItems validates agent-sandbox.json's items and returns the
// violations.
func checkSandboxItems(t *testing.T, items []map[string]any) []string {
	var errs []string
	pod := podTemplateSpec
	for _, it := range items {
		kind, _ := it["kind"].(string)
		switch kind {
		case "SandboxTemplate":
			errs = append(errs, validate(sandboxTemplateSchema, it, kind)...)
			spec, _ := it["spec"].(map[string]any)
			errs = append(errs, validate(pod, spec["podTemplate"], kind+".spec.podTemplate")...)
			np, _ := spec["networkPolicy"].(map[string]any)
			eg, _ := np["egress"].([]any)
			in, _ := np["ingress"].([]any)
			errs = append(errs, networkPolicyRules(kind+".spec.networkPolicy.egress", eg)...)
			errs = append(errs, networkPolicyRules(kind+".spec.networkPolicy.ingress", in)...)
		case "SandboxWarmPool":
			errs = append(errs, validate(sandboxWarmPoolSchema, it, kind)...)
		default:
			errs = append(errs, fmt.Sprintf("item of kind %q", kind))
		}
	}
	return errs
}

// TestAgentSandbox validates every box's agent-sandbox.json against the
// agent-sandbox schemas above, its pod against the Deployment's pod
// template schema and the Pod Security level the box is made for, and
// checks that the pool names the template, is sized from [agent] warm, and
// that the template admits the host app on the kit's port.
func TestAgentSandbox(t *testing.T) {
	t.Parallel()
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			c, err := Load(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			res := generateCase(t, filepath.Join("testdata", name), Options{})
			items := decodeList(t, fileData(t, res, AgentSandboxFile))
			if len(items) != 2 {
				t.Fatalf("%d items, want a SandboxTemplate and a SandboxWarmPool", len(items))
			}
			if errs := checkSandboxItems(t, items); len(errs) > 0 {
				t.Errorf("agent-sandbox.json does not match agent-sandbox's CRDs:\n%s", strings.Join(errs, "\n"))
			}
			tmpl, pool := items[0], items[1]
			tspec := tmpl["spec"].(map[string]any)
			sbPod := tspec["podTemplate"].(map[string]any)["spec"].(map[string]any)
			level := cmpOr(c.Deploy.Kubernetes.PodSecurity, PodBaseline)
			if v := podSecurityViolations(level, sbPod); len(v) > 0 {
				t.Errorf("the sandbox pod does not meet %s:\n%s", level, strings.Join(v, "\n"))
			}
			// The same pod as the Deployment's, but for the volume a
			// persistent box's Deployment claims (each sandbox claims its
			// own from the template's volumeClaimTemplates).
			depPod := podSpec(t, fileData(t, res, KubernetesFile))
			if persists(c) {
				if _, ok := tspec["volumeClaimTemplates"]; !ok {
					t.Errorf("a persistent box's SandboxTemplate claims no volume")
				}
				delete(depPod, "volumes")
			}
			dep, _ := json.Marshal(depPod)
			sb, _ := json.Marshal(sbPod)
			if string(dep) != string(sb) {
				t.Errorf("the sandbox pod differs from the Deployment's:\n%s\n%s", sb, dep)
			}
			pspec := pool["spec"].(map[string]any)
			if ref := pspec["sandboxTemplateRef"].(map[string]any)["name"]; ref != tmpl["metadata"].(map[string]any)["name"] {
				t.Errorf("the pool names template %v, want %v", ref, tmpl["metadata"].(map[string]any)["name"])
			}
			if got, want := pspec["replicas"], float64(max(c.Agent.WarmSize(), 1)); got != want {
				t.Errorf("pool replicas = %v, want %v ([agent] warm)", got, want)
			}
			// The Deployment's Service must not select sandbox pods.
			labels := tspec["podTemplate"].(map[string]any)["metadata"].(map[string]any)["labels"].(map[string]any)
			for _, it := range decodeList(t, fileData(t, res, KubernetesFile)) {
				if it["kind"] != "Service" {
					continue
				}
				sel := it["spec"].(map[string]any)["selector"].(map[string]any)
				selects := true
				for k, v := range sel {
					selects = selects && labels[k] == v
				}
				if selects {
					t.Errorf("the Service's selector %v selects the sandbox pods (labels %v)", sel, labels)
				}
			}
			np, _ := json.Marshal(tspec["networkPolicy"])
			if !strings.Contains(string(np), `"ingress":[{"ports":[{"port":8080,"protocol":"TCP"}]}]`) {
				t.Errorf("the template's NetworkPolicy does not admit the kit's port: %s", np)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestKubernetesNetworkPolicy checks the NetworkPolicy kubernetes.json
// carries for a box whose [network] denies by default, against the
// schema and rules above, and what it allows; and that a box that allows
// by default, or has no [network], gets none.
func TestKubernetesNetworkPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, toml string
		want       string // the egress rules as JSON; "" for no policy
	}{
		{"none", ``, ``},
		{"allow", "[network]\ndefault = \"allow\"\ndeny = [\"10.0.0.0/8\"]\n", ``},
		{"hosts with ports", "[network]\ndefault = \"deny\"\nallow = [\"pypi.org:443\", \"git.example.com:22\"]\n",
			`[{"ports":[{"port":53,"protocol":"UDP"},{"port":53,"protocol":"TCP"}]},` +
				`{"ports":[{"port":22,"protocol":"TCP"},{"port":80,"protocol":"TCP"},{"port":443,"protocol":"TCP"}],"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["169.254.0.0/16"]}},{"ipBlock":{"cidr":"::/0","except":["fe80::/10"]}}]}]`},
		{"a host on any port, ranges", "[network]\ndefault = \"deny\"\nallow = [\"api.example.com\", \"10.1.0.0/16\", \"[fd00::1]:5432\"]\ndeny = [\"192.168.0.0/16\", \"fd00::/8\", \"169.254.0.0/16\", \"1.2.3.4:80\"]\n",
			`[{"ports":[{"port":53,"protocol":"UDP"},{"port":53,"protocol":"TCP"}]},` +
				`{"ports":[{"protocol":"TCP"}],"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["169.254.0.0/16","192.168.0.0/16"]}},{"ipBlock":{"cidr":"::/0","except":["fe80::/10","fd00::/8"]}}]},` +
				`{"to":[{"ipBlock":{"cidr":"10.1.0.0/16"}}]},` +
				`{"ports":[{"port":5432,"protocol":"TCP"}],"to":[{"ipBlock":{"cidr":"fd00::1/128"}}]}]`},
		{"request rules and session_may_allow", "[network]\ndefault = \"deny\"\nallow = [{ host = \"git.example.com:8443\", paths = [\"/a/\"] }]\nsession_may_allow = [\"db.example.com:5432\"]\n",
			`[{"ports":[{"port":53,"protocol":"UDP"},{"port":53,"protocol":"TCP"}]},` +
				`{"ports":[{"port":80,"protocol":"TCP"},{"port":443,"protocol":"TCP"},{"port":5432,"protocol":"TCP"},{"port":8443,"protocol":"TCP"}],"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["169.254.0.0/16"]}},{"ipBlock":{"cidr":"::/0","except":["fe80::/10"]}}]}]`},
		{"nothing allowed", "[network]\ndefault = \"deny\"\n",
			`[{"ports":[{"port":53,"protocol":"UDP"},{"port":53,"protocol":"TCP"}]},` +
				`{"ports":[{"port":80,"protocol":"TCP"},{"port":443,"protocol":"TCP"}],"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["169.254.0.0/16"]}},{"ipBlock":{"cidr":"::/0","except":["fe80::/10"]}}]}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("glovebox.toml", []byte("name = \"np\"\n[deploy.kubernetes]\nnamespace = \"agents\"\n"+tc.toml))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Generate(c, Options{Key: testKey})
			if err != nil {
				t.Fatal(err)
			}
			var policy map[string]any
			for _, it := range decodeList(t, fileData(t, res, KubernetesFile)) {
				if it["metadata"].(map[string]any)["namespace"] != "agents" {
					t.Errorf("%s has no namespace agents", it["kind"])
				}
				if it["kind"] == "NetworkPolicy" {
					policy = it
				}
			}
			if tc.want == "" {
				if policy != nil {
					t.Fatalf("a NetworkPolicy for a box that allows by default: %v", policy)
				}
				return
			}
			if policy == nil {
				t.Fatal("no NetworkPolicy")
			}
			errs := validate(networkPolicySchema, policy, "NetworkPolicy")
			spec := policy["spec"].(map[string]any)
			errs = append(errs, networkPolicyRules("NetworkPolicy.spec.egress", spec["egress"].([]any))...)
			if len(errs) > 0 {
				t.Errorf("the NetworkPolicy breaks the API's rules:\n%s", strings.Join(errs, "\n"))
			}
			if got, _ := json.Marshal(spec["policyTypes"]); string(got) != `["Egress"]` {
				t.Errorf("policyTypes = %s, want [\"Egress\"]", got)
			}
			if got, _ := json.Marshal(spec["egress"]); string(got) != tc.want {
				t.Errorf("egress =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestKubeSchemasReject shows the hand-written schemas and rules above are
// not rubber stamps: each document breaks one rule, and the check names it.
func TestKubeSchemasReject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		schema map[string]any
		doc    string
		want   string
	}{
		{networkPolicySchema, `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"x"},"spec":{}}`, `missing required podSelector`},
		{networkPolicySchema, `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"x"},"spec":{"podSelector":{},"policyTypes":["Outbound"]}}`, `Outbound is not one of`},
		{networkPolicySchema, `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"x"},"spec":{"podSelector":{},"egress":[{"to":[{"ipBlock":{"except":["10.0.0.0/8"]}}]}]}}`, `missing required cidr`},
		{networkPolicySchema, `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"x"},"spec":{"podSelector":{},"egress":[{"ports":[{"protocol":"ICMP"}]}]}}`, `ICMP is not one of`},
		{networkPolicySchema, `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"x"},"spec":{"podSelector":{},"egress":[{"toPorts":[]}]}}`, `unknown field "toPorts"`},
		{networkPolicySchema, `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"x"},"spec":{"podSelector":{},"egress":[{"ports":[{"port":true}]}]}}`, `boolean is not of type`},
		{sandboxTemplateSchema, `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxTemplate","metadata":{"name":"x"},"spec":{}}`, `missing required podTemplate`},
		{sandboxTemplateSchema, `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxTemplate","metadata":{"name":"x"},"spec":{"podTemplate":{}}}`, `missing required spec`},
		{sandboxTemplateSchema, `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxTemplate","metadata":{"name":"x"},"spec":{"podTemplate":{"spec":{}},"service":"yes"}}`, `string is not of type boolean`},
		{sandboxTemplateSchema, `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxTemplate","metadata":{"name":"x"},"spec":{"podTemplate":{"spec":{}},"networkPolicyManagement":"Auto"}}`, `Auto is not one of`},
		{sandboxTemplateSchema, `{"apiVersion":"extensions.agents.x-k8s.io/v1alpha2","kind":"SandboxTemplate","spec":{"podTemplate":{"spec":{}}}}`, `v1alpha2 is not one of`},
		{sandboxWarmPoolSchema, `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxWarmPool","metadata":{"name":"x"},"spec":{"replicas":1}}`, `missing required sandboxTemplateRef`},
		{sandboxWarmPoolSchema, `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxWarmPool","metadata":{"name":"x"},"spec":{"replicas":-1,"sandboxTemplateRef":{"name":"x"}}}`, `-1 is less than the minimum 0`},
		{sandboxWarmPoolSchema, `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxWarmPool","metadata":{"name":"x"},"spec":{"replicas":"2","sandboxTemplateRef":{"name":"x"}}}`, `string is not of type integer`},
		{sandboxWarmPoolSchema, `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxWarmPool","metadata":{"name":"x"},"spec":{"sandboxTemplateRef":{}}}`, `missing required name`},
		{sandboxClaimSchema, `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","metadata":{"name":"x"},"spec":{"sandboxTemplateRef":{"name":"x"}}}`, `missing required warmPoolRef`},
		{sandboxClaimSchema, `{"apiVersion":"extensions.agents.x-k8s.io/v1beta1","kind":"SandboxClaim","metadata":{"name":"x"},"spec":{"warmPoolRef":{"name":"x"},"lifecycle":{"shutdownPolicy":"Forget"}}}`, `Forget is not one of`},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.doc), &v); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(validate(tc.schema, v, "doc"), "\n")
		if !strings.Contains(got, tc.want) {
			t.Errorf("validate(%s) = %q, want %q", tc.doc, got, tc.want)
		}
	}
	for _, tc := range []struct{ rules, want string }{
		{`[{"to":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["192.168.0.0/16"]}}]}]`, `except[0] 192.168.0.0/16 is not inside 10.0.0.0/8`},
		{`[{"to":[{"ipBlock":{"cidr":"0.0.0.0/0","except":["fe80::/10"]}}]}]`, `is not inside`},
		{`[{"to":[{"ipBlock":{"cidr":"10.0.0.0/33"}}]}]`, `is not a CIDR`},
		{`[{"ports":[{"port":"http","endPort":90}]}]`, `endPort needs a numeric port`},
		{`[{"ports":[{"port":100,"endPort":90}]}]`, `endPort needs a numeric port`},
	} {
		var rules []any
		if err := json.Unmarshal([]byte(tc.rules), &rules); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(networkPolicyRules("egress", rules), "\n"); !strings.Contains(got, tc.want) {
			t.Errorf("networkPolicyRules(%s) = %q, want %q", tc.rules, got, tc.want)
		}
	}
	// The sandbox pod is checked as a PodSpec.
	bad := []map[string]any{{"apiVersion": agentSandboxGroup, "kind": "SandboxTemplate", "metadata": map[string]any{"name": "x"},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "box", "imagePullPolcy": "Always"}}}}}}}
	if got := strings.Join(checkSandboxItems(t, bad), "\n"); !strings.Contains(got, `unknown field "imagePullPolcy"`) {
		t.Errorf("a misspelt container field in the sandbox pod: %q", got)
	}
}

// TestKubernetesSettings: [deploy.kubernetes] image, namespace, replicas,
// requests and limits reach both manifests, with [limits] filling in.
func TestKubernetesSettings(t *testing.T) {
	t.Parallel()
	c, err := Parse("glovebox.toml", []byte(`name = "k"
[limits]
cpu = "2"
memory = "2GB"
[deploy.kubernetes]
image = "registry.example.com:5000/team/k@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
namespace = "agents"
replicas = 3
requests = { cpu = "500m" }
limits = { memory = "4Gi", ephemeral-storage = "10Gi" }
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Generate(c, Options{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{KubernetesFile, AgentSandboxFile} {
		for _, it := range decodeList(t, fileData(t, res, file)) {
			if ns := it["metadata"].(map[string]any)["namespace"]; ns != "agents" {
				t.Errorf("%s %s: namespace %v, want agents", file, it["kind"], ns)
			}
		}
	}
	items := decodeList(t, fileData(t, res, KubernetesFile))
	if r := items[0]["spec"].(map[string]any)["replicas"]; r != 3.0 {
		t.Errorf("replicas = %v, want 3", r)
	}
	ctr := podSpec(t, fileData(t, res, KubernetesFile))["containers"].([]any)[0].(map[string]any)
	if ctr["image"] != c.Deploy.Kubernetes.Image {
		t.Errorf("image = %v, want %s", ctr["image"], c.Deploy.Kubernetes.Image)
	}
	got, _ := json.Marshal(ctr["resources"])
	want := `{"limits":{"cpu":"2","ephemeral-storage":"10Gi","memory":"4Gi"},"requests":{"cpu":"500m","ephemeral-storage":"10Gi","memory":"4Gi"}}`
	if string(got) != want {
		t.Errorf("resources = %s, want %s", got, want)
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "replicas = 3") }) {
		t.Errorf("no warning about replicas: %q", res.Warnings)
	}
}

// TestDocsSandboxClaim validates the SandboxClaim docs/deploy.md tells a
// host app to create, and checks it names the pool agent-sandbox.json
// makes for the box the docs use.
func TestDocsSandboxClaim(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	start, end := strings.Index(s, "<!-- claim -->\n```json\n"), strings.Index(s, "```\n<!-- /claim -->")
	if start < 0 || end < start {
		t.Fatal("docs/deploy.md has no claim between <!-- claim --> markers")
	}
	var claim map[string]any
	if err := json.Unmarshal([]byte(s[start+len("<!-- claim -->\n```json\n"):end]), &claim); err != nil {
		t.Fatal(err)
	}
	if errs := validate(sandboxClaimSchema, claim, "SandboxClaim"); len(errs) > 0 {
		t.Errorf("the documented claim breaks the CRD:\n%s", strings.Join(errs, "\n"))
	}
	c, err := Parse("glovebox.toml", []byte("name = \"my-box\"\n[deploy.kubernetes]\nnamespace = \"agents\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	pool := agentSandbox(c)["items"].([]any)[1].(map[string]any)["metadata"].(map[string]any)
	spec := claim["spec"].(map[string]any)
	if spec["warmPoolRef"].(map[string]any)["name"] != pool["name"] || claim["metadata"].(map[string]any)["namespace"] != pool["namespace"] {
		t.Errorf("the claim names pool %v in %v, want %v in %v", spec["warmPoolRef"], claim["metadata"], pool["name"], pool["namespace"])
	}
}

func TestQuantityValue(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]float64{
		"2": 2, "500m": 0.5, "1.5": 1.5, "1Gi": 1 << 30, "512Mi": 512 << 20, "1G": 1e9, "1e3": 1000, "2E2": 200, "1E": 1e18, "1Ei": 1 << 60, ".5k": 500,
	} {
		if !quantityRE.MatchString(q) {
			t.Errorf("quantityRE does not match %q", q)
		}
		if got := quantityValue(q); got != want {
			t.Errorf("quantityValue(%q) = %v, want %v", q, got, want)
		}
	}
}
