package generator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// validate checks v against the JSON Schema keywords the Kubernetes
// schemas use (type, enum, properties, additionalProperties, required,
// items, oneOf, minimum) and returns every violation with its path.
func validate(schema map[string]any, v any, path string) []string {
	var errs []string
	if t, ok := schema["type"]; ok && !typeOK(t, v) {
		return []string{fmt.Sprintf("%s: %s is not of type %v", path, jsonType(v), t)}
	}
	if enum, ok := schema["enum"].([]any); ok && v != nil && !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
		errs = append(errs, fmt.Sprintf("%s: %v is not one of %v", path, v, enum))
	}
	if lo, ok := schema["minimum"].(float64); ok {
		if n, isNum := v.(float64); isNum && n < lo {
			errs = append(errs, fmt.Sprintf("%s: %v is less than the minimum %v", path, n, lo))
		}
	}
	if one, ok := schema["oneOf"].([]any); ok {
		n := 0
		for _, s := range one {
			if len(validate(s.(map[string]any), v, path)) == 0 {
				n++
			}
		}
		if n != 1 {
			errs = append(errs, fmt.Sprintf("%s: matches %d of oneOf, want 1", path, n))
		}
	}
	switch v := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		required, _ := schema["required"].([]any)
		for _, r := range required {
			if _, ok := v[r.(string)]; !ok {
				errs = append(errs, fmt.Sprintf("%s: missing required %s", path, r))
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := props[k].(map[string]any); ok {
				errs = append(errs, validate(ps, v[k], path+"."+k)...)
				continue
			}
			switch ap := schema["additionalProperties"].(type) {
			case bool:
				if !ap {
					errs = append(errs, fmt.Sprintf("%s: unknown field %q", path, k))
				}
			case map[string]any:
				errs = append(errs, validate(ap, v[k], path+"."+k)...)
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, e := range v {
				errs = append(errs, validate(items, e, fmt.Sprintf("%s[%d]", path, i))...)
			}
		}
	}
	return errs
}

func typeOK(t, v any) bool {
	types, ok := t.([]any)
	if !ok {
		types = []any{t}
	}
	for _, want := range types {
		got := jsonType(v)
		if want == got || (want == "number" && got == "integer") {
			return true
		}
	}
	return false
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// TestKubernetesSchemas validates every box's kubernetes.json against the
// Kubernetes schemas written from the API reference (k8sapi_test.go), and checks what the box
// needs of it: the key from a Secret, /health probes, session affinity.
func TestKubernetesSchemas(t *testing.T) {
	t.Parallel()
	schemas := map[string]map[string]any{
		// Written from the API reference: k8sapi_test.go, kubeschema_test.go.
		"Deployment":            deploymentSchema,
		"Service":               serviceSchema,
		"NetworkPolicy":         networkPolicySchema,
		"PersistentVolumeClaim": pvcSchema,
	}
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			res := generateCase(t, filepath.Join("testdata", name), Options{})
			dec := json.NewDecoder(bytes.NewReader(fileData(t, res, KubernetesFile)))
			var list struct {
				APIVersion string           `json:"apiVersion"`
				Kind       string           `json:"kind"`
				Items      []map[string]any `json:"items"`
			}
			if err := dec.Decode(&list); err != nil {
				t.Fatal(err)
			}
			if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) < 2 || len(list.Items) > 4 {
				t.Fatalf("kubernetes.json is %s %s with %d items, want a v1 List of a Deployment, a Service and perhaps a NetworkPolicy and a PersistentVolumeClaim", list.APIVersion, list.Kind, len(list.Items))
			}
			byKind := map[string]map[string]any{}
			for _, it := range list.Items {
				kind, _ := it["kind"].(string)
				schema, ok := schemas[kind]
				if !ok {
					t.Fatalf("item of kind %q", kind)
				}
				if errs := validate(schema, it, kind); len(errs) > 0 {
					t.Errorf("%s does not match the published schema:\n%s", kind, strings.Join(errs, "\n"))
				}
				byKind[kind] = it
			}
			d, _ := json.Marshal(byKind["Deployment"])
			for _, want := range []string{
				`"secretKeyRef":{"key":"GLOVEBOX_KEY"`,
				`"livenessProbe":{"failureThreshold":3,"httpGet":{"path":"/health/live","port":"http"}`,
				`"readinessProbe":{"failureThreshold":3,"httpGet":{"path":"/health","port":"http"}`,
				`"containerPort":8080`,
			} {
				if !strings.Contains(string(d), want) {
					t.Errorf("Deployment lacks %s:\n%s", want, d)
				}
			}
			s, _ := json.Marshal(byKind["Service"])
			if !strings.Contains(string(s), `"sessionAffinity":"ClientIP"`) {
				t.Errorf("Service has no ClientIP session affinity:\n%s", s)
			}
		})
	}
}

// TestKubernetesValidatorRejects shows the validator and the schemas are
// not rubber stamps: a misspelt field, a wrong type, a missing required
// field and a value outside an enum all fail.
func TestKubernetesValidatorRejects(t *testing.T) {
	t.Parallel()
	// pod wraps a pod spec into a Deployment.
	pod := func(spec string) string {
		return `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"b"},"spec":{"selector":{},"template":{"spec":` + spec + `}}}`
	}
	for _, tc := range []struct {
		schema    map[string]any
		doc, want string
	}{
		{serviceSchema, `{"apiVersion":"v1","kind":"Service","spec":{"sessionAfinity":"ClientIP"}}`, `unknown field "sessionAfinity"`},
		{serviceSchema, `{"apiVersion":"v1","kind":"Service","spec":{"ports":[{"port":"80"}]}}`, `doc.spec.ports[0].port: string is not of type`},
		{serviceSchema, `{"apiVersion":"v1","kind":"Service","spec":{"ports":[{"name":"http"}]}}`, `missing required port`},
		{serviceSchema, `{"apiVersion":"v2","kind":"Service"}`, `v2 is not one of`},
		{serviceSchema, `{"apiVersion":"v1","kind":"Service","spec":{"sessionAffinity":"Cookie"}}`, `Cookie is not one of`},
		{deploymentSchema, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"b"},"spec":{"template":{"spec":{"containers":[]}}}}`, `missing required selector`},
		{deploymentSchema, pod(`{}`), `missing required containers`},
		{deploymentSchema, pod(`{"containers":[{"image":"b:1"}]}`), `missing required name`},
		{deploymentSchema, pod(`{"containers":[{"name":"b","imagePullPolicy":"Sometimes"}]}`), `Sometimes is not one of`},
		{deploymentSchema, pod(`{"containers":[{"name":"b","readinessProbe":{"httpGet":{"path":"/health"}}}]}`), `missing required port`},
		{deploymentSchema, pod(`{"containers":[{"name":"b","securityContext":{"privilege":false}}]}`), `unknown field "privilege"`},
		{deploymentSchema, pod(`{"containers":[{"name":"b","env":[{"name":"K","valueFrom":{"secretKeyRef":{"name":"b"}}}]}]}`), `missing required key`},
		{deploymentSchema, pod(`{"containers":[{"name":"b","resources":{"limits":{"cpu":true}}}]}`), `boolean is not of type`},
		{deploymentSchema, pod(`{"containers":[{"name":"b"}],"securityContext":{"seccompProfile":{"type":"Default"}}}`), `Default is not one of`},
		{deploymentSchema, pod(`{"containers":[{"name":"b"}],"automountServiceAccountToken":"false"}`), `string is not of type boolean`},
	} {
		var v any
		if err := json.Unmarshal([]byte(tc.doc), &v); err != nil {
			t.Fatal(err)
		}
		errs := strings.Join(validate(tc.schema, v, "doc"), "\n")
		if !strings.Contains(errs, tc.want) {
			t.Errorf("validate(%s) = %q, want %q", tc.doc, errs, tc.want)
		}
	}
}

// The Pod Security Standards, as rule checks over a pod spec, transcribed
// from https://kubernetes.io/docs/concepts/security/pod-security-standards/
// (the page for Kubernetes v1.32, as read on 2026-11-26): every control of
// the Baseline level, and the controls the Restricted level adds. Each
// violation names the field, as the Pod Security admission controller
// does. The optional AppArmor annotations and Windows-only fields are
// checked as written there.
var (
	// baselineCaps are the capabilities Baseline allows containers to add.
	baselineCaps = []string{"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
	// safeSysctls are the sysctls Baseline allows.
	safeSysctls = []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports", "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
	// selinuxTypes are the SELinux types Baseline allows.
	selinuxTypes = []string{"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
	// restrictedVolumes are the volume sources Restricted allows.
	restrictedVolumes = []string{"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)

// podSecurityViolations checks a pod spec against level ("baseline" or
// "restricted", which includes baseline) and returns every violation.
func podSecurityViolations(level string, spec map[string]any) []string {
	c := &podCheck{spec: spec, psc: psObj(spec, "securityContext")}
	for _, kind := range []string{"containers", "initContainers", "ephemeralContainers"} {
		for i, ct := range psList(spec, kind) {
			cm, _ := ct.(map[string]any)
			c.ctrs = append(c.ctrs, podContainer{fmt.Sprintf("spec.%s[%d]", kind, i), psObj(cm, "securityContext"), cm})
		}
	}
	c.baseline()
	if level != "baseline" {
		c.restricted()
	}
	return c.out
}

// podCheck is one pod spec being checked, and its violations so far.
type podCheck struct {
	out       []string
	spec, psc map[string]any // the spec and its securityContext
	ctrs      []podContainer
}

// podContainer is a container of every kind: its path, securityContext
// and spec.
type podContainer struct {
	path string
	sc   map[string]any
	c    map[string]any
}

// bad adds a violation.
func (c *podCheck) bad(format string, args ...any) {
	c.out = append(c.out, fmt.Sprintf(format, args...))
}

// psObj and psList are m[k] as an object and as a list, nil when it is
// absent or of another type.
func psObj(m map[string]any, k string) map[string]any { v, _ := m[k].(map[string]any); return v }
func psList(m map[string]any, k string) []any         { v, _ := m[k].([]any); return v }

// psSeccomp is a securityContext's seccompProfile.type, if it has one.
func psSeccomp(sc map[string]any) (string, bool) {
	t, ok := psObj(sc, "seccompProfile")["type"].(string)
	return t, ok
}

// appArmor checks a securityContext's AppArmor profile: RuntimeDefault
// or Localhost.
func (c *podCheck) appArmor(path string, sc map[string]any) {
	if t, ok := psObj(sc, "appArmorProfile")["type"]; ok && t != "RuntimeDefault" && t != "Localhost" {
		c.bad("%s.appArmorProfile.type %v is not RuntimeDefault or Localhost", path, t)
	}
}

// seLinux checks a securityContext's SELinux options: an allowed type,
// no user or role.
func (c *podCheck) seLinux(path string, sc map[string]any) {
	se := psObj(sc, "seLinuxOptions")
	if t, ok := se["type"].(string); ok && !slices.Contains(selinuxTypes, t) {
		c.bad("%s.seLinuxOptions.type %q is not allowed", path, t)
	}
	for _, k := range []string{"user", "role"} {
		if v, ok := se[k]; ok && v != "" {
			c.bad("%s.seLinuxOptions.%s must be unset", path, k)
		}
	}
}

// baseline checks the Baseline level's controls.
func (c *podCheck) baseline() {
	spec, psc := c.spec, c.psc
	// HostProcess.
	if psObj(psc, "windowsOptions")["hostProcess"] == true {
		c.bad("spec.securityContext.windowsOptions.hostProcess must be false")
	}
	// Host namespaces.
	for _, k := range []string{"hostNetwork", "hostPID", "hostIPC"} {
		if spec[k] == true {
			c.bad("spec.%s must be false", k)
		}
	}
	// HostPath volumes.
	for i, v := range psList(spec, "volumes") {
		if vm, _ := v.(map[string]any); vm["hostPath"] != nil {
			c.bad("spec.volumes[%d].hostPath is forbidden", i)
		}
	}
	// AppArmor, SELinux, seccomp, sysctls at the pod level.
	c.appArmor("spec.securityContext", psc)
	c.seLinux("spec.securityContext", psc)
	if t, ok := psSeccomp(psc); ok && t == "Unconfined" {
		c.bad("spec.securityContext.seccompProfile.type must not be Unconfined")
	}
	for i, s := range psList(psc, "sysctls") {
		if sm, _ := s.(map[string]any); !slices.Contains(safeSysctls, fmt.Sprint(sm["name"])) {
			c.bad("spec.securityContext.sysctls[%d] %v is not a safe sysctl", i, sm["name"])
		}
	}
	for _, ct := range c.ctrs {
		p := ct.path + ".securityContext"
		if psObj(ct.sc, "windowsOptions")["hostProcess"] == true {
			c.bad("%s.windowsOptions.hostProcess must be false", p)
		}
		if ct.sc["privileged"] == true {
			c.bad("%s.privileged must be false", p)
		}
		for _, a := range psList(psObj(ct.sc, "capabilities"), "add") {
			if !slices.Contains(baselineCaps, fmt.Sprint(a)) {
				c.bad("%s.capabilities.add %v is beyond Baseline", p, a)
			}
		}
		for j, port := range psList(ct.c, "ports") {
			if pm, _ := port.(map[string]any); pm["hostPort"] != nil && pm["hostPort"] != float64(0) {
				c.bad("%s.ports[%d].hostPort must be unset or 0", ct.path, j)
			}
		}
		c.appArmor(p, ct.sc)
		c.seLinux(p, ct.sc)
		if pm, ok := ct.sc["procMount"]; ok && pm != "Default" {
			c.bad("%s.procMount must be Default", p)
		}
		if t, ok := psSeccomp(ct.sc); ok && t == "Unconfined" {
			c.bad("%s.seccompProfile.type must not be Unconfined", p)
		}
	}
}

// restricted checks what the Restricted level adds to Baseline.
func (c *podCheck) restricted() {
	spec, psc := c.spec, c.psc
	// Volume types.
	for i, v := range psList(spec, "volumes") {
		vm, _ := v.(map[string]any)
		for k := range vm {
			if k != "name" && !slices.Contains(restrictedVolumes, k) {
				c.bad("spec.volumes[%d].%s is not a Restricted volume type", i, k)
			}
		}
	}
	podNonRoot := psc["runAsNonRoot"] == true
	podSeccomp, _ := psSeccomp(psc)
	if u, ok := psc["runAsUser"]; ok && u == float64(0) {
		c.bad("spec.securityContext.runAsUser must not be 0")
	}
	for _, ct := range c.ctrs {
		p := ct.path + ".securityContext"
		if ct.sc["allowPrivilegeEscalation"] != false {
			c.bad("%s.allowPrivilegeEscalation must be false", p)
		}
		if nr, ok := ct.sc["runAsNonRoot"]; ok && nr != true || !ok && !podNonRoot {
			c.bad("%s.runAsNonRoot must be true (or the pod's)", p)
		}
		if u, ok := ct.sc["runAsUser"]; ok && u == float64(0) {
			c.bad("%s.runAsUser must not be 0", p)
		}
		t, ok := psSeccomp(ct.sc)
		if !ok {
			t = podSeccomp
		}
		if t != "RuntimeDefault" && t != "Localhost" {
			c.bad("%s.seccompProfile.type must be RuntimeDefault or Localhost (or the pod's)", p)
		}
		caps := psObj(ct.sc, "capabilities")
		if !slices.Contains(psList(caps, "drop"), any("ALL")) {
			c.bad("%s.capabilities.drop must include ALL", p)
		}
		for _, a := range psList(caps, "add") {
			if a != "NET_BIND_SERVICE" {
				c.bad("%s.capabilities.add %v is beyond Restricted (NET_BIND_SERVICE only)", p, a)
			}
		}
	}
}

// podSpec is the pod template spec of kubernetes.json's Deployment.
func podSpec(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var list struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Items {
		if it["kind"] == "Deployment" {
			spec, _ := it["spec"].(map[string]any)
			tmpl, _ := spec["template"].(map[string]any)
			ps, _ := tmpl["spec"].(map[string]any)
			return ps
		}
	}
	t.Fatal("kubernetes.json has no Deployment")
	return nil
}

// TestKubernetesPodSecurity: every box's pod meets the Pod Security level
// it is made for, and no other: [deploy.kubernetes] pod_security =
// "restricted" meets Restricted; the default meets Baseline (the kit as
// root with the capabilities it uses), and not Restricted, by design.
func TestKubernetesPodSecurity(t *testing.T) {
	t.Parallel()
	restricted := 0
	for _, name := range cases(t) {
		t.Run(name, func(t *testing.T) {
			c, err := Load(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			spec := podSpec(t, fileData(t, generateCase(t, filepath.Join("testdata", name), Options{}), KubernetesFile))
			if v := podSecurityViolations("baseline", spec); len(v) > 0 {
				t.Errorf("the pod does not meet Baseline:\n%s", strings.Join(v, "\n"))
			}
			v := podSecurityViolations("restricted", spec)
			switch c.Deploy.Kubernetes.PodSecurity {
			case PodRestricted:
				restricted++
				if len(v) > 0 {
					t.Errorf("pod_security = restricted, but the pod does not meet Restricted:\n%s", strings.Join(v, "\n"))
				}
			case PodBaseline:
				if len(v) == 0 {
					t.Errorf("a baseline pod meets Restricted: it no longer runs the kit as root")
				}
			default:
				t.Errorf("pod_security = %q", c.Deploy.Kubernetes.PodSecurity)
			}
		})
	}
	if restricted == 0 {
		t.Error("no golden box has pod_security = \"restricted\"")
	}
}

// TestKubernetesSecurityContext pins what each level's pod asks for.
func TestKubernetesSecurityContext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		toml, pod, container string
	}{
		{"", `{"runAsNonRoot":false,"seccompProfile":{"type":"RuntimeDefault"}}`,
			`{"allowPrivilegeEscalation":false,"capabilities":{"add":["CHOWN","DAC_OVERRIDE","FOWNER","KILL","SETGID","SETPCAP","SETUID"],"drop":["ALL"]},"privileged":false}`},
		{"[deploy.kubernetes]\npod_security = \"baseline\"\n", `{"runAsNonRoot":false,"seccompProfile":{"type":"RuntimeDefault"}}`,
			`{"allowPrivilegeEscalation":false,"capabilities":{"add":["CHOWN","DAC_OVERRIDE","FOWNER","KILL","SETGID","SETPCAP","SETUID"],"drop":["ALL"]},"privileged":false}`},
		{"[deploy.kubernetes]\npod_security = \"restricted\"\n", `{"fsGroup":10001,"runAsGroup":10001,"runAsNonRoot":true,"runAsUser":10001,"seccompProfile":{"type":"RuntimeDefault"}}`,
			`{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]},"privileged":false}`},
	} {
		c, err := Parse("glovebox.toml", []byte("name = \"k\"\n"+tc.toml))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Generate(c, Options{Key: testKey})
		if err != nil {
			t.Fatal(err)
		}
		spec := podSpec(t, fileData(t, res, KubernetesFile))
		pod, _ := json.Marshal(spec["securityContext"])
		ctr, _ := json.Marshal(spec["containers"].([]any)[0].(map[string]any)["securityContext"])
		if string(pod) != tc.pod || string(ctr) != tc.container {
			t.Errorf("%q: pod securityContext = %s, container's = %s; want %s and %s", tc.toml, pod, ctr, tc.pod, tc.container)
		}
		if spec["automountServiceAccountToken"] != false {
			t.Errorf("%q: automountServiceAccountToken = %v, want false", tc.toml, spec["automountServiceAccountToken"])
		}
	}
}

// TestPodSecurityRulesReject shows the rule checks above are not a rubber
// stamp: each pod breaks one rule, and the check names it.
func TestPodSecurityRulesReject(t *testing.T) {
	t.Parallel()
	// hardened meets Restricted; each case changes one thing.
	hardened := `{"securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}},
		"containers":[{"name":"box","securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}}]}`
	for _, tc := range []struct {
		level, patch, want string
	}{
		{"restricted", ``, ``},
		{"baseline", `{"hostNetwork":true}`, `spec.hostNetwork must be false`},
		{"baseline", `{"hostPID":true}`, `spec.hostPID must be false`},
		{"baseline", `{"volumes":[{"name":"h","hostPath":{"path":"/"}}]}`, `spec.volumes[0].hostPath is forbidden`},
		{"baseline", `{"containers":[{"name":"box","securityContext":{"privileged":true}}]}`, `spec.containers[0].securityContext.privileged must be false`},
		{"baseline", `{"containers":[{"name":"box","securityContext":{"capabilities":{"add":["SYS_ADMIN"]}}}]}`, `capabilities.add SYS_ADMIN is beyond Baseline`},
		{"baseline", `{"containers":[{"name":"box","ports":[{"containerPort":8080,"hostPort":8080}]}]}`, `spec.containers[0].ports[0].hostPort`},
		{"baseline", `{"securityContext":{"seccompProfile":{"type":"Unconfined"}}}`, `spec.securityContext.seccompProfile.type must not be Unconfined`},
		{"baseline", `{"securityContext":{"sysctls":[{"name":"kernel.msgmax","value":"1"}]}}`, `kernel.msgmax is not a safe sysctl`},
		{"restricted", `{"containers":[{"name":"box","securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"],"add":["CHOWN"]}}}]}`, `capabilities.add CHOWN is beyond Restricted`},
		{"restricted", `{"containers":[{"name":"box","securityContext":{"capabilities":{"drop":["ALL"]}}}]}`, `allowPrivilegeEscalation must be false`},
		{"restricted", `{"containers":[{"name":"box","securityContext":{"allowPrivilegeEscalation":false}}]}`, `capabilities.drop must include ALL`},
		{"restricted", `{"securityContext":{"runAsNonRoot":false,"seccompProfile":{"type":"RuntimeDefault"}}}`, `runAsNonRoot must be true`},
		{"restricted", `{"securityContext":{"runAsNonRoot":true}}`, `seccompProfile.type must be RuntimeDefault or Localhost`},
		{"restricted", `{"securityContext":{"runAsNonRoot":true,"runAsUser":0,"seccompProfile":{"type":"RuntimeDefault"}}}`, `spec.securityContext.runAsUser must not be 0`},
		{"restricted", `{"volumes":[{"name":"n","nfs":{"server":"x","path":"/"}}]}`, `spec.volumes[0].nfs is not a Restricted volume type`},
		// kubernetes.json as it was, with no securityContext: Baseline
		// admits it, Restricted refuses it four ways.
		{"restricted", `{"securityContext":null,"containers":[{"name":"box"}]}`, `allowPrivilegeEscalation must be false`},
	} {
		var spec, patch map[string]any
		if err := json.Unmarshal([]byte(hardened), &spec); err != nil {
			t.Fatal(err)
		}
		if tc.patch != "" {
			if err := json.Unmarshal([]byte(tc.patch), &patch); err != nil {
				t.Fatal(err)
			}
			maps.Copy(spec, patch)
		}
		got := strings.Join(podSecurityViolations(tc.level, spec), "\n")
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s %s: violations %q, want %q", tc.level, tc.patch, got, tc.want)
		}
	}
	old := map[string]any{"containers": []any{map[string]any{"name": "box"}}}
	if v := podSecurityViolations("baseline", old); len(v) > 0 {
		t.Errorf("a pod with no securityContext breaks Baseline: %q", v)
	}
	if v := podSecurityViolations("restricted", old); len(v) != 4 {
		t.Errorf("a pod with no securityContext breaks Restricted %d ways, want 4: %q", len(v), v)
	}
}
