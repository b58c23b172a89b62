package generator

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/glovebox-dev/glovebox/protocol"
)

// Pod Security levels [deploy.kubernetes] pod_security may name: the
// Kubernetes Pod Security Standards a namespace enforces
// (pod-security.kubernetes.io/enforce), and what kubernetes.json's pod
// then meets.
const (
	// PodBaseline: the kit starts as root, as the images do, with only
	// the capabilities it uses (KubeCapabilities), so that every session
	// gets a uid of its own.
	PodBaseline = "baseline"
	// PodRestricted: the kit runs as the glovebox user (uid 10001) with
	// no capability; sessions share that uid and are kept apart by
	// Landlock and seccomp.
	PodRestricted = "restricted"
)

// PodSecurityLevels are the values of [deploy.kubernetes] pod_security.
var PodSecurityLevels = []string{PodBaseline, PodRestricted}

// Kubernetes is [deploy.kubernetes].
type Kubernetes struct {
	// PodSecurity is PodBaseline (the default) or PodRestricted.
	PodSecurity string
	// Image is the image reference the manifests run, with its registry
	// and a tag or digest ("ghcr.io/acme/box:0.1.0"); empty for
	// "<name>:<version>", the image `docker load` names.
	Image string
	// Namespace is every object's namespace; empty leaves it to kubectl
	// (-n, or the context's namespace).
	Namespace string
	// Replicas is the Deployment's replica count; 0 for 1.
	Replicas int
	// Requests and Limits are the box container's resources, by resource
	// name ("cpu", "memory") as Kubernetes quantities; [limits] fills
	// what they leave out.
	Requests, Limits map[string]string
}

// KubeMaxReplicas bounds [deploy.kubernetes] replicas.
const KubeMaxReplicas = 1000

var (
	// imageRefRE is a container image reference as the distribution
	// reference grammar has it (github.com/distribution/reference,
	// reference.go, read 2026-11-26): an optional registry host with a
	// port, lower-case path components, then a tag, a digest or both.
	imageRefRE = regexp.MustCompile(`^(?:((?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])(?:\.(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9]))*(?::[0-9]+)?)/)?([a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)(?::([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?(?:@([A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}))?$`)
	// dnsLabelRE is an RFC 1123 label, what a namespace name must be.
	dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	// quantityRE is a Kubernetes resource quantity
	// (k8s.io/apimachinery/pkg/api/resource, as the published schemas
	// state its pattern), without a sign: a quantity here is positive.
	quantityRE = regexp.MustCompile(`^(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`)
)

// kubeResources are the resources [deploy.kubernetes] requests and
// limits may name.
var kubeResources = []string{"cpu", "memory", "ephemeral-storage"}

// KubeCapabilities are the capabilities kubernetes.json gives the kit
// under PodBaseline, after dropping ALL: what a root kit uses to run
// sessions under their own uids. CHOWN gives a session its directories
// and inputs; DAC_OVERRIDE and FOWNER let the kit read, collect, chmod and
// remove what sessions own (mode 0700); SETUID and SETGID start a
// session's commands under its uid with no supplementary groups; KILL
// ends a session's processes; SETPCAP empties the sandbox supervisor's
// capability bounding set (PR_CAPBSET_DROP). Every one is in the set the
// Baseline level allows. Not SYS_ADMIN: without it (and under the
// runtime's default seccomp profile) the kit has no mount, pid or network
// namespaces, and Landlock and seccomp take their place.
var KubeCapabilities = []string{"CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETPCAP", "SETUID"}

// glovebox user of the images, which owns their writable directories.
const imageUID = 10001

// kubernetes decodes [deploy.kubernetes]: the Pod Security level the
// pod is made for, the image, namespace, replicas and resources.
func (d *doc) kubernetes(p string, v any, c *Config) {
	t, ok := d.table(p, v, "pod_security", "image", "namespace", "replicas", "requests", "limits")
	if !ok {
		return
	}
	k := &c.Deploy.Kubernetes
	if x, ok := t["pod_security"]; ok {
		if s, ok := d.str(p+".pod_security", x); ok {
			if slices.Contains(PodSecurityLevels, s) {
				k.PodSecurity = s
			} else {
				d.errorf(p+".pod_security", "%q is not a Pod Security level%s: use \"baseline\" (the kit as root, a uid per session) or \"restricted\" (the kit as uid 10001, sessions kept apart by Landlock and seccomp)", s, didYouMean(s, PodSecurityLevels))
			}
		}
	}
	if x, ok := t["image"]; ok {
		if s, ok := d.str(p+".image", x); ok {
			m := imageRefRE.FindStringSubmatch(s)
			switch {
			case m == nil || len(s) > 255:
				d.errorf(p+".image", "%q is not an image reference: write registry/repository:tag or registry/repository@sha256:<digest>, e.g. \"ghcr.io/acme/%s:%s\" (lower-case repository)", s, c.Name, c.Version)
			case m[3] == "" && m[4] == "":
				d.errorf(p+".image", "%q names no tag or digest, so every pull may get another image: add :%s (the box's version) or @sha256:<digest> (what `docker push` printed)", s, c.Version)
			default:
				k.Image = s
			}
		}
	}
	if x, ok := t["namespace"]; ok {
		if s, ok := d.str(p+".namespace", x); ok {
			if dnsLabelRE.MatchString(s) {
				k.Namespace = s
			} else {
				d.errorf(p+".namespace", "%q is not a Kubernetes namespace name: use 1 to 63 lower-case letters, digits and -, starting and ending with a letter or digit", s)
			}
		}
	}
	if x, ok := t["replicas"]; ok {
		if n, ok := d.integer(p+".replicas", x); ok {
			if n < 1 || n > KubeMaxReplicas {
				d.errorf(p+".replicas", "%d replicas: want 1 to %d (the Deployment's pod count)", n, KubeMaxReplicas)
			} else {
				k.Replicas = n
			}
		}
	}
	resources := func(key string) map[string]string {
		x, ok := t[key]
		if !ok {
			return nil
		}
		path := p + "." + key
		m, ok := d.table(path, x, kubeResources...)
		if !ok {
			return nil
		}
		out := map[string]string{}
		for _, r := range kubeResources {
			if _, set := m[r]; !set {
				continue
			}
			s, ok := m[r].(string)
			if n, isInt := m[r].(int64); isInt && n > 0 {
				s, ok = fmt.Sprint(n), true
			}
			if !ok || !quantityRE.MatchString(s) || strings.Trim(s, "0.") == "" {
				d.errorf(path+"."+r, "%v is not a Kubernetes quantity: write cpu as \"500m\" or \"2\", memory as \"512Mi\" or \"4Gi\"", m[r])
				continue
			}
			out[r] = s
		}
		return out
	}
	k.Requests = resources("requests")
	k.Limits = resources("limits")
}

// KubernetesFile is the Kubernetes manifest Generate writes.
const KubernetesFile = "kubernetes.json"

// kubernetes is kubernetes.json: a List of a Deployment, a Service and,
// when [network] denies by default, a NetworkPolicy, for `kubectl apply
// -f`. The Deployment runs the box image with the key (and the box's
// other secrets) from a Secret named after the box, probes /health, and
// takes its resources from [deploy.kubernetes] and [limits]; the Service
// gives clients session affinity, since a session and its files live on
// one pod.
func kubernetes(c *Config) map[string]any {
	deployment := map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   kubeMeta(c, c.Name),
		"spec": map[string]any{
			"replicas": max(c.Deploy.Kubernetes.Replicas, 1),
			"selector": map[string]any{"matchLabels": kubeSelector(c)},
			"template": map[string]any{
				"metadata": map[string]any{"labels": kubeLabels(c)},
				"spec":     kubePodSpec(c),
			},
		},
	}
	service := map[string]any{
		"apiVersion": "v1",
		"kind":       "Service",
		"metadata":   kubeMeta(c, c.Name),
		"spec": map[string]any{
			"selector":              kubeSelector(c),
			"ports":                 []any{map[string]any{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}},
			"sessionAffinity":       "ClientIP",
			"sessionAffinityConfig": map[string]any{"clientIP": map[string]any{"timeoutSeconds": 3 * 3600}},
		},
	}
	items := []any{deployment, service}
	if persists(c) {
		items = append(items, kubePersist(c, deployment))
	}
	if egress := kubeEgress(c); egress != nil {
		items = append(items, map[string]any{
			"apiVersion": "networking.k8s.io/v1",
			"kind":       "NetworkPolicy",
			"metadata":   kubeMeta(c, c.Name+"-egress"),
			"spec": map[string]any{
				"podSelector": map[string]any{"matchLabels": kubeSelector(c)},
				"policyTypes": []any{"Egress"},
				"egress":      egress,
			},
		})
	}
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": items}
}

// KubeVolumeSize is the size of the volume a persistent box claims.
const KubeVolumeSize = "10Gi"

// kubePersist gives the Deployment of a box whose sessions persist
// (sessions.persist) a volume at DataDir, claimed by the returned
// PersistentVolumeClaim: one pod (Recreate, since a ReadWriteOnce volume
// attaches to one pod at a time) keeps its state and its sessions'
// directories there across restarts.
func kubePersist(c *Config, deployment map[string]any) map[string]any {
	claim := c.Name + "-data"
	spec := deployment["spec"].(map[string]any)
	spec["strategy"] = map[string]any{"type": "Recreate"}
	pod := spec["template"].(map[string]any)["spec"].(map[string]any)
	pod["volumes"] = []any{map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": claim}}}
	mountData(pod)
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "PersistentVolumeClaim",
		"metadata":   kubeMeta(c, claim),
		"spec":       kubeClaimSpec(),
	}
}

// kubeClaimSpec is the PersistentVolumeClaim spec of a persistent box's
// volume.
func kubeClaimSpec() map[string]any {
	return map[string]any{
		"accessModes": []any{"ReadWriteOnce"},
		"resources":   map[string]any{"requests": map[string]any{"storage": KubeVolumeSize}},
	}
}

// mountData mounts the volume "data" at DataDir in the pod's container.
func mountData(pod map[string]any) {
	container := pod["containers"].([]any)[0].(map[string]any)
	container["volumeMounts"] = []any{map[string]any{"name": "data", "mountPath": DataDir}}
}

// kubeLabels are the labels of every object and pod of the box.
func kubeLabels(c *Config) map[string]any {
	return map[string]any{"app.kubernetes.io/name": c.Name, "app.kubernetes.io/part-of": "glovebox"}
}

// kubeSelector selects the box's pods.
func kubeSelector(c *Config) map[string]any {
	return map[string]any{"app.kubernetes.io/name": c.Name}
}

// kubeMeta is an object's metadata: its name, the box's labels and the
// namespace [deploy.kubernetes] names.
func kubeMeta(c *Config, name string) map[string]any {
	m := map[string]any{"name": name, "labels": kubeLabels(c)}
	if ns := c.Deploy.Kubernetes.Namespace; ns != "" {
		m["namespace"] = ns
	}
	return m
}

// KubeImage is the image the Kubernetes manifests run: [deploy.kubernetes]
// image, else "<name>:<version>" as `docker load` names it.
func KubeImage(c *Config) string {
	return cmp.Or(c.Deploy.Kubernetes.Image, c.Name+":"+c.Version)
}

// kubePodSpec is the box's pod spec, the Deployment's and the
// SandboxTemplate's.
func kubePodSpec(c *Config) map[string]any {
	// Readiness and startup read /health, which answers 503 while the box
	// drains so that the Service moves away; liveness reads /health/live,
	// which stays 200 while the kit serves, so that a drain is never read
	// as a hung container to restart.
	probe := func(path string, period, failures int) map[string]any {
		return map[string]any{
			"httpGet":          map[string]any{"path": path, "port": "http"},
			"periodSeconds":    period,
			"timeoutSeconds":   5,
			"failureThreshold": failures,
		}
	}
	container := map[string]any{
		"name":            "box",
		"image":           KubeImage(c),
		"imagePullPolicy": "IfNotPresent",
		"ports":           []any{map[string]any{"name": "http", "containerPort": Port, "protocol": "TCP"}},
		"env": []any{map[string]any{
			"name":      "GLOVEBOX_KEY",
			"valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": c.Name, "key": "GLOVEBOX_KEY"}},
		}},
		"envFrom":         []any{map[string]any{"secretRef": map[string]any{"name": c.Name, "optional": true}}},
		"readinessProbe":  probe("/health", 10, 3),
		"livenessProbe":   probe("/health/live", 30, 3),
		"startupProbe":    probe("/health", 2, 30),
		"securityContext": kubeContainerSecurity(c),
	}
	if res := kubeResourceSpec(c); len(res) > 0 {
		container["resources"] = res
	}
	return map[string]any{
		"containers":      []any{container},
		"securityContext": kubePodSecurity(c),
		// The kit never calls the Kubernetes API, and a mounted token
		// would be one more secret in reach of a session.
		"automountServiceAccountToken":  false,
		"terminationGracePeriodSeconds": KillTimeout(c),
	}
}

// kubeResourceSpec is the container's resources: [deploy.kubernetes]
// requests and limits, [limits] for what they leave out (as both, so that
// the pod is Guaranteed when nothing else is said).
func kubeResourceSpec(c *Config) map[string]any {
	k := c.Deploy.Kubernetes
	limits := kubeLimits(c)
	for r, q := range k.Limits {
		limits[r] = q
	}
	requests := map[string]any{}
	for r, q := range limits {
		requests[r] = q
	}
	for r, q := range k.Requests {
		requests[r] = q
	}
	out := map[string]any{}
	if len(limits) > 0 {
		out["limits"] = limits
	}
	if len(requests) > 0 {
		out["requests"] = requests
	}
	return out
}

// Link-local ranges, where clouds answer metadata requests
// (169.254.169.254, fd00:ec2::254 aside, fe80::/10): no NetworkPolicy
// rule of the box reaches them but an address rule that names them.
var kubeLinkLocal = []string{"169.254.0.0/16", "fe80::/10"}

// kubeEgress is the NetworkPolicy's egress from [network], nil when there
// is none or it allows by default (a policy would add nothing: the kit's
// egress proxy is what enforces [network]). It is defence in depth: a
// NetworkPolicy matches addresses and ports, never host names, so it
// cannot say "only api.example.com". For a policy that denies by default
// it allows DNS (UDP and TCP 53); the kit's own HTTP and HTTPS (url
// inputs, s3 storage) and every host-name rule's port (every TCP port
// when a host-name rule names none) to any address but the link-local
// ranges and the deny list's ranges; and each address rule's range on its
// port. So a session that gets around the proxy still cannot reach the
// cloud's metadata service, a denied range, or anything over UDP but DNS.
func kubeEgress(c *Config) []any {
	n := c.Network
	if n == nil || n.Default != protocol.NetworkDeny {
		return nil
	}
	ports := map[int]bool{80: true, 443: true}
	anyPort := false
	var ranges []protocol.EgressRule
	// What a session's own rules may open, and the hosts request rules
	// name, are allowed too.
	rules := slices.Concat(n.Allow, n.SessionMayAllow)
	for _, rr := range n.AllowRequests {
		rules = append(rules, rr.Host)
	}
	for _, a := range rules {
		r, err := protocol.ParseEgressRule(a)
		switch {
		case err != nil:
		case r.Host == "":
			ranges = append(ranges, r)
		case r.Port == 0:
			anyPort = true
		default:
			ports[r.Port] = true
		}
	}
	denied := kubeDenied(n)
	ipBlock := func(block netip.Prefix) map[string]any {
		b := map[string]any{"cidr": block.String()}
		if ex := exceptIn(denied, block); len(ex) > 0 {
			b["except"] = ex
		}
		return map[string]any{"ipBlock": b}
	}
	wide := []any{ipBlock(netip.MustParsePrefix("0.0.0.0/0")), ipBlock(netip.MustParsePrefix("::/0"))}
	tcp := func(port int) map[string]any { return map[string]any{"protocol": "TCP", "port": port} }
	out := []any{map[string]any{"ports": []any{
		map[string]any{"protocol": "UDP", "port": 53},
		map[string]any{"protocol": "TCP", "port": 53},
	}}}
	web := map[string]any{"to": wide}
	if anyPort {
		web["ports"] = []any{map[string]any{"protocol": "TCP"}}
	} else {
		var ps []any
		for _, p := range slices.Sorted(maps.Keys(ports)) {
			ps = append(ps, tcp(p))
		}
		web["ports"] = ps
	}
	out = append(out, web)
	for _, r := range ranges {
		rule := map[string]any{"to": []any{ipBlock(r.Prefix)}}
		if r.Port != 0 {
			rule["ports"] = []any{tcp(r.Port)}
		}
		out = append(out, rule)
	}
	return out
}

// kubeDenied is what no rule reaches: the link-local ranges and the deny
// list's ranges (the proxy's deny wins over its allow).
func kubeDenied(n *protocol.NetworkSpec) []netip.Prefix {
	var denied []netip.Prefix
	for _, ll := range kubeLinkLocal {
		denied = append(denied, netip.MustParsePrefix(ll))
	}
	for _, d := range n.Deny {
		if r, err := protocol.ParseEgressRule(d); err == nil && r.Host == "" && r.Port == 0 {
			denied = append(denied, r.Prefix)
		}
	}
	return denied
}

// exceptIn is an ipBlock's except list: each denied range that lies
// inside block and not already inside another denied range.
func exceptIn(denied []netip.Prefix, block netip.Prefix) []any {
	var out []any
	for _, d := range denied {
		inside := d.Addr().Is4() == block.Addr().Is4() && block.Contains(d.Addr()) && d.Bits() > block.Bits()
		covered := slices.ContainsFunc(denied, func(o netip.Prefix) bool {
			return o != d && o.Addr().Is4() == d.Addr().Is4() && o.Contains(d.Addr()) && o.Bits() < d.Bits()
		})
		if inside && !covered && !slices.Contains(out, any(d.String())) {
			out = append(out, d.String())
		}
	}
	return out
}

// kubePodSecurity is the pod's securityContext for the box's Pod Security
// level: the runtime's default seccomp profile always; under baseline the
// kit as the image starts it, as root (runAsNonRoot false says so); under
// restricted the glovebox user of the images, which owns their writable
// directories (fsGroup gives it the pod's volumes too).
func kubePodSecurity(c *Config) map[string]any {
	sc := map[string]any{"seccompProfile": map[string]any{"type": "RuntimeDefault"}}
	if c.Deploy.Kubernetes.PodSecurity == PodRestricted {
		sc["runAsNonRoot"] = true
		sc["runAsUser"] = imageUID
		sc["runAsGroup"] = imageUID
		sc["fsGroup"] = imageUID
	} else {
		sc["runAsNonRoot"] = false
	}
	return sc
}

// kubeContainerSecurity is the box container's securityContext: no
// privilege escalation, not privileged, every capability dropped and,
// under baseline, KubeCapabilities added back.
func kubeContainerSecurity(c *Config) map[string]any {
	caps := map[string]any{"drop": []any{"ALL"}}
	if c.Deploy.Kubernetes.PodSecurity != PodRestricted {
		add := make([]any, len(KubeCapabilities))
		for i, k := range KubeCapabilities {
			add[i] = k
		}
		caps["add"] = add
	}
	return map[string]any{
		"allowPrivilegeEscalation": false,
		"privileged":               false,
		"capabilities":             caps,
	}
}

// kubeLimits are [limits] as Kubernetes resource quantities.
func kubeLimits(c *Config) map[string]any {
	out := map[string]any{}
	if c.Limits.CPU != "" {
		out["cpu"] = c.Limits.CPU
	}
	if c.Limits.Memory != "" {
		if mb, err := MemoryMB(c.Limits.Memory); err == nil {
			out["memory"] = fmt.Sprintf("%dMi", mb)
		}
	}
	return out
}

// AgentSandboxFile is the kubernetes-sigs/agent-sandbox variant Generate
// writes beside kubernetes.json.
const AgentSandboxFile = "agent-sandbox.json"

// agentSandboxGroup is the API version of agent-sandbox's extensions
// (SandboxTemplate, SandboxWarmPool, SandboxClaim).
const agentSandboxGroup = "extensions.agents.x-k8s.io/v1beta1"

// agentSandbox is agent-sandbox.json: a List of a SandboxTemplate for
// the box (the Deployment's pod, a headless Service per sandbox, and the
// template's NetworkPolicy) and a SandboxWarmPool that keeps [agent] warm
// sandboxes started (at least one: a claim names the pool). A host app
// claims a sandbox per user or per session with a SandboxClaim naming
// the pool (docs/kubernetes.md).
func agentSandbox(c *Config) map[string]any {
	// The controller's default policy admits only its own router: the
	// host app reaches the kit's port directly, so the template says so.
	// Egress is kubeEgress's, or every destination when [network] allows
	// by default (an empty rule list would deny everything).
	egress := kubeEgress(c)
	if egress == nil {
		egress = []any{map[string]any{}}
	}
	template := map[string]any{
		"apiVersion": agentSandboxGroup,
		"kind":       "SandboxTemplate",
		"metadata":   kubeMeta(c, c.Name),
		"spec": map[string]any{
			// Not the Deployment's app.kubernetes.io/name: its Service
			// would send clients to sandboxes in the same namespace.
			"podTemplate": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{
					"app.kubernetes.io/instance":  c.Name,
					"app.kubernetes.io/component": "sandbox",
					"app.kubernetes.io/part-of":   "glovebox",
				}},
				"spec": kubePodSpec(c),
			},
			"service":                 true,
			"networkPolicyManagement": "Managed",
			"networkPolicy": map[string]any{
				"ingress": []any{map[string]any{"ports": []any{map[string]any{"protocol": "TCP", "port": Port}}}},
				"egress":  egress,
			},
		},
	}
	if persists(c) {
		// Each sandbox claims a volume of its own from the template, as
		// a StatefulSet's pods do; the controller adds it to the pod.
		spec := template["spec"].(map[string]any)
		mountData(spec["podTemplate"].(map[string]any)["spec"].(map[string]any))
		spec["volumeClaimTemplates"] = []any{map[string]any{"metadata": map[string]any{"name": "data"}, "spec": kubeClaimSpec()}}
	}
	pool := map[string]any{
		"apiVersion": agentSandboxGroup,
		"kind":       "SandboxWarmPool",
		"metadata":   kubeMeta(c, c.Name),
		"spec": map[string]any{
			"replicas":           max(c.Agent.WarmSize(), 1),
			"sandboxTemplateRef": map[string]any{"name": c.Name},
		},
	}
	return map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{template, pool}}
}

// quantityValue is a Kubernetes quantity (one quantityRE matches) as a
// number: "500m" is 0.5, "1Gi" 1073741824, "1e3" 1000.
func quantityValue(q string) float64 {
	i := strings.IndexFunc(q, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	num, suffix := q, ""
	if i >= 0 {
		num, suffix = q[:i], q[i:]
	}
	n, _ := strconv.ParseFloat(num, 64)
	if len(suffix) > 1 && (suffix[0] == 'e' || suffix[0] == 'E') && suffix != "Ei" {
		exp, _ := strconv.ParseFloat(suffix[1:], 64)
		return n * math.Pow(10, exp)
	}
	mult := map[string]float64{
		"": 1, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
		"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
	}[suffix]
	return n * mult
}

// kubeRequestsWithinLimits reports a request above its limit, which the
// API server would refuse: [deploy.kubernetes] requests against its
// limits, else [limits].
func (d *doc) kubeRequestsWithinLimits(c *Config) {
	limits := kubeLimits(c)
	for r, q := range c.Deploy.Kubernetes.Limits {
		limits[r] = q
	}
	for _, r := range kubeResources {
		req, ok := c.Deploy.Kubernetes.Requests[r]
		lim, limited := limits[r].(string)
		if ok && limited && quantityValue(req) > quantityValue(lim) {
			d.errorf("deploy.kubernetes.requests."+r, "requests %s = %q is more than its limit %q, which Kubernetes refuses: lower the request or raise the limit ([deploy.kubernetes] limits, else [limits])", r, req, lim)
		}
	}
}
