// The shapes of the Kubernetes objects the WorkerPool controller reads and writes, as far as it
// looks into them (objects pass through untouched otherwise). A leaf: imports no sibling.
import type { V1PodSpec } from "@kubernetes/client-node";
import type { KubeObject } from "../kube/client.ts";

interface ObjectCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

export interface Deployment extends KubeObject {
  spec?: {
    replicas?: number;
    selector?: { matchLabels?: Record<string, string> };
    template?: {
      metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
      spec?: V1PodSpec;
    };
    [k: string]: unknown;
  };
  status?: {
    replicas?: number;
    readyReplicas?: number;
    availableReplicas?: number;
    updatedReplicas?: number;
    observedGeneration?: number;
    conditions?: ObjectCondition[];
  };
}

export interface HPA extends KubeObject {
  spec?: {
    scaleTargetRef: { apiVersion: string; kind: string; name: string };
    minReplicas?: number;
    maxReplicas: number;
    metrics?: unknown[];
    behavior?: unknown;
  };
  status?: {
    currentReplicas?: number;
    desiredReplicas?: number;
    lastScaleTime?: string;
    currentMetrics?: { external?: { current?: { averageValue?: string; value?: string } } }[];
    conditions?: ObjectCondition[];
  };
}

export interface Pod extends KubeObject {
  status?: { phase?: string; conditions?: ObjectCondition[] };
}
