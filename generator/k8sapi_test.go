package generator

// The Kubernetes core schemas kubernetes.json is checked against, written
// here from the Kubernetes v1.32 API reference
// (kubernetes.io/docs/reference/kubernetes-api/: workload-resources/deployment-v1,
// workload-resources/pod-v1, service-resources/service-v1; read
// 2026-11-26), not copied from any published schema file. Each covers the
// fields a box's manifests may use, strictly (additionalProperties false),
// with the API's types, required fields and enums, so a misspelt field, a
// wrong type, a missing required field or a value outside an enum fails.
// Fields the generator never writes are left out: a manifest that gained
// one would fail here until it is added from the reference.

var (
	int32Type   = map[string]any{"type": "integer"}
	quantityMap = map[string]any{"type": "object", "additionalProperties": intOrStr}
	enumOf      = func(vs ...string) map[string]any {
		e := make([]any, len(vs))
		for i, v := range vs {
			e[i] = v
		}
		return map[string]any{"type": "string", "enum": e}
	}
)

// seccompProfile is core/v1 SeccompProfile.
var seccompProfile = obj([]string{"type"}, map[string]any{
	"type":             enumOf("Localhost", "RuntimeDefault", "Unconfined"),
	"localhostProfile": str,
})

// containerSecurityContext is core/v1 SecurityContext (Linux fields).
var containerSecurityContext = obj(nil, map[string]any{
	"allowPrivilegeEscalation": boolean,
	"privileged":               boolean,
	"capabilities":             obj(nil, map[string]any{"add": arr(str), "drop": arr(str)}),
	"readOnlyRootFilesystem":   boolean,
	"runAsNonRoot":             boolean,
	"runAsUser":                int32Type,
	"runAsGroup":               int32Type,
	"procMount":                str,
	"seccompProfile":           seccompProfile,
})

// podSecurityContext is core/v1 PodSecurityContext (Linux fields).
var podSecurityContext = obj(nil, map[string]any{
	"runAsNonRoot":        boolean,
	"runAsUser":           int32Type,
	"runAsGroup":          int32Type,
	"fsGroup":             int32Type,
	"fsGroupChangePolicy": enumOf("Always", "OnRootMismatch"),
	"supplementalGroups":  arr(int32Type),
	"seccompProfile":      seccompProfile,
	"sysctls":             arr(obj([]string{"name", "value"}, map[string]any{"name": str, "value": str})),
})

// probe is core/v1 Probe with an httpGet handler.
var probe = obj(nil, map[string]any{
	"httpGet": obj([]string{"port"}, map[string]any{
		"path": str, "port": intOrStr, "host": str, "scheme": enumOf("HTTP", "HTTPS"),
		"httpHeaders": arr(obj([]string{"name", "value"}, map[string]any{"name": str, "value": str})),
	}),
	"initialDelaySeconds":           int32Type,
	"periodSeconds":                 int32Type,
	"timeoutSeconds":                int32Type,
	"successThreshold":              int32Type,
	"failureThreshold":              int32Type,
	"terminationGracePeriodSeconds": int32Type,
})

// container is core/v1 Container.
var container = obj([]string{"name"}, map[string]any{
	"name":            str,
	"image":           str,
	"imagePullPolicy": enumOf("Always", "IfNotPresent", "Never"),
	"command":         arr(str),
	"args":            arr(str),
	"workingDir":      str,
	"ports": arr(obj([]string{"containerPort"}, map[string]any{
		"name": str, "containerPort": int32Type, "hostPort": int32Type, "hostIP": str, "protocol": enumOf("TCP", "UDP", "SCTP"),
	})),
	"env": arr(obj([]string{"name"}, map[string]any{
		"name":  str,
		"value": str,
		"valueFrom": obj(nil, map[string]any{
			"secretKeyRef":    obj([]string{"key"}, map[string]any{"name": str, "key": str, "optional": boolean}),
			"configMapKeyRef": obj([]string{"key"}, map[string]any{"name": str, "key": str, "optional": boolean}),
		}),
	})),
	"envFrom": arr(obj(nil, map[string]any{
		"prefix":       str,
		"secretRef":    obj(nil, map[string]any{"name": str, "optional": boolean}),
		"configMapRef": obj(nil, map[string]any{"name": str, "optional": boolean}),
	})),
	"resources":       obj(nil, map[string]any{"limits": quantityMap, "requests": quantityMap}),
	"readinessProbe":  probe,
	"livenessProbe":   probe,
	"startupProbe":    probe,
	"securityContext": containerSecurityContext,
	"volumeMounts":    arr(obj([]string{"name", "mountPath"}, map[string]any{"name": str, "mountPath": str, "readOnly": boolean, "subPath": str})),
})

// podSpec is core/v1 PodSpec.
var podSpecSchema = obj([]string{"containers"}, map[string]any{
	"containers":                    arr(container),
	"initContainers":                arr(container),
	"securityContext":               podSecurityContext,
	"automountServiceAccountToken":  boolean,
	"serviceAccountName":            str,
	"terminationGracePeriodSeconds": map[string]any{"type": "integer"},
	"hostNetwork":                   boolean,
	"hostPID":                       boolean,
	"hostIPC":                       boolean,
	"nodeSelector":                  strMap,
	"restartPolicy":                 enumOf("Always", "OnFailure", "Never"),
	"volumes":                       arr(map[string]any{"type": "object", "required": []any{"name"}}),
})

// podTemplateSpec is core/v1 PodTemplateSpec.
var podTemplateSpec = obj(nil, map[string]any{
	"metadata": obj(nil, map[string]any{"labels": strMap, "annotations": strMap}),
	"spec":     podSpecSchema,
})

// deploymentSchema is apps/v1 Deployment.
var deploymentSchema = obj(nil, map[string]any{
	"apiVersion": enumOf("apps/v1"),
	"kind":       enumOf("Deployment"),
	"metadata":   objectMeta,
	"spec": obj([]string{"selector", "template"}, map[string]any{
		"replicas":                int32Type,
		"selector":                labelSelector,
		"template":                podTemplateSpec,
		"minReadySeconds":         int32Type,
		"revisionHistoryLimit":    int32Type,
		"progressDeadlineSeconds": int32Type,
		"strategy": obj(nil, map[string]any{
			"type":          enumOf("Recreate", "RollingUpdate"),
			"rollingUpdate": obj(nil, map[string]any{"maxSurge": intOrStr, "maxUnavailable": intOrStr}),
		}),
	}),
})

// serviceSchema is core/v1 Service.
// pvcSchema: PersistentVolumeClaim (core/v1), the fields a
// PersistentVolumeClaimSpec takes.
var pvcSchema = obj(nil, map[string]any{
	"apiVersion": enumOf("v1"),
	"kind":       enumOf("PersistentVolumeClaim"),
	"metadata":   objectMeta,
	"spec": obj(nil, map[string]any{
		"accessModes":      arr(enumOf("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")),
		"resources":        obj(nil, map[string]any{"requests": quantityMap, "limits": quantityMap}),
		"storageClassName": str,
		"volumeMode":       enumOf("Filesystem", "Block"),
		"volumeName":       str,
	}),
})

var serviceSchema = obj(nil, map[string]any{
	"apiVersion": enumOf("v1"),
	"kind":       enumOf("Service"),
	"metadata":   objectMeta,
	"spec": obj(nil, map[string]any{
		"type":     enumOf("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"),
		"selector": strMap,
		"ports": arr(obj([]string{"port"}, map[string]any{
			"name": str, "port": int32Type, "targetPort": intOrStr, "nodePort": int32Type, "protocol": enumOf("TCP", "UDP", "SCTP"), "appProtocol": str,
		})),
		"sessionAffinity":       enumOf("ClientIP", "None"),
		"sessionAffinityConfig": obj(nil, map[string]any{"clientIP": obj(nil, map[string]any{"timeoutSeconds": int32Type})}),
		"clusterIP":             str,
	}),
})
