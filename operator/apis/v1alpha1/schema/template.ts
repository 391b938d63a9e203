// spec.template: what is merged into the worker Deployment's pod template.
import type {
  V1Affinity,
  V1Container,
  V1EnvFromSource,
  V1EnvVar,
  V1LocalObjectReference,
  V1PodSecurityContext,
  V1ResourceRequirements,
  V1Toleration,
  V1TopologySpreadConstraint,
  V1Volume,
  V1VolumeMount,
} from "@kubernetes/client-node";
import { WORKER_ENV } from "../../../../lib/workerContract.ts";
import { typed, type JSONSchemaProps } from "../../jsonschema.ts";

/** Environment variables the operator sets on the worker container; `template.env` may not set them. */
export const RESERVED_ENV = [
  WORKER_ENV.redisUrl,
  WORKER_ENV.redisPassword,
  WORKER_ENV.databaseUrl,
  WORKER_ENV.podName,
] as const;
export const RESERVED_ENV_PREFIX = "CONVEYOR_";
/** The worker container's name in the pod; sidecars may not take it. */
export const WORKER_CONTAINER = "worker";

const reservedEnvList = `[${RESERVED_ENV.map((n) => `'${n}'`).join(", ")}]`;

/** A free-form Kubernetes object (validated by the API server when the Deployment is applied). */
const k8sObject = { type: "object", "x-kubernetes-preserve-unknown-fields": true } as const;

export const templateSchema = {
  type: "object",
  default: {},
  description: "Merged into the worker Deployment's pod template.",
  properties: {
    image: {
      type: "string",
      minLength: 1,
      maxLength: 1024,
      description:
        "Worker image (default: the operator's --worker-image; for a python handler its --python-worker-image).",
    },
    imagePullPolicy: { type: "string", enum: ["Always", "IfNotPresent", "Never"] },
    imagePullSecrets: typed<V1LocalObjectReference[]>()({
      type: "array",
      "x-kubernetes-list-type": "atomic",
      items: { type: "object", required: ["name"], properties: { name: { type: "string" } } },
    }),
    labels: {
      type: "object",
      additionalProperties: { type: "string" },
      description: "Extra pod labels.",
    },
    annotations: {
      type: "object",
      additionalProperties: { type: "string" },
      description: "Extra pod annotations.",
    },
    env: typed<V1EnvVar[]>()({
      type: "array",
      maxItems: 200,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["name"],
      description: `Extra environment of the worker container. ${RESERVED_ENV.join(", ")} and ${RESERVED_ENV_PREFIX}* are set by the operator.`,
      items: { ...k8sObject, required: ["name"], properties: { name: { type: "string", minLength: 1 } } },
      "x-kubernetes-validations": [
        {
          rule: `self.all(e, !(e.name in ${reservedEnvList}) && !e.name.startsWith('${RESERVED_ENV_PREFIX}'))`,
          message: `template.env may not set ${RESERVED_ENV.join(", ")} or ${RESERVED_ENV_PREFIX}* (the operator sets them from the spec)`,
        },
      ],
    }),
    envFrom: typed<V1EnvFromSource[]>()({
      type: "array",
      "x-kubernetes-list-type": "atomic",
      items: k8sObject,
    }),
    resources: typed<V1ResourceRequirements>()({
      ...k8sObject,
      description: "Requests and limits of the worker container.",
    }),
    volumeMounts: typed<V1VolumeMount[]>()({
      type: "array",
      "x-kubernetes-list-type": "atomic",
      description: "Extra mounts of the worker container (/tmp is always a writable emptyDir).",
      items: k8sObject,
    }),
    volumes: typed<V1Volume[]>()({ type: "array", "x-kubernetes-list-type": "atomic", items: k8sObject }),
    containers: typed<V1Container[]>()({
      type: "array",
      maxItems: 20,
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["name"],
      description: "Sidecar containers (e.g. the server of an http handler).",
      items: { ...k8sObject, required: ["name"], properties: { name: { type: "string", minLength: 1 } } },
      "x-kubernetes-validations": [
        {
          rule: `self.all(c, c.name != '${WORKER_CONTAINER}')`,
          message: `a sidecar may not be named '${WORKER_CONTAINER}'`,
        },
      ],
    }),
    nodeSelector: { type: "object", additionalProperties: { type: "string" } },
    tolerations: typed<V1Toleration[]>()({
      type: "array",
      "x-kubernetes-list-type": "atomic",
      items: k8sObject,
    }),
    affinity: typed<V1Affinity>()(k8sObject),
    topologySpreadConstraints: typed<V1TopologySpreadConstraint[]>()({
      type: "array",
      "x-kubernetes-list-type": "atomic",
      items: k8sObject,
    }),
    serviceAccountName: {
      type: "string",
      maxLength: 253,
      description: "Default: none, and no API token is mounted.",
    },
    priorityClassName: { type: "string", maxLength: 253 },
    securityContext: typed<V1PodSecurityContext>()({
      ...k8sObject,
      description: "Pod security context (default: non-root uid 65532, seccomp RuntimeDefault).",
    }),
  },
} as const satisfies JSONSchemaProps;
