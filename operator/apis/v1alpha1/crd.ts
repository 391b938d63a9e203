// The CustomResourceDefinition object, built from the schema. genCrd.ts writes it to crds/.
import { stringify } from "yaml";
import {
  GROUP,
  KIND,
  PLURAL,
  SHORT_NAMES,
  SINGULAR,
  VERSION,
  printerColumns,
  workerPoolSchema,
} from "./schema.ts";

export const CRD_NAME = `${PLURAL}.${GROUP}`;
export const CRD_FILE = `crds/${GROUP}_${PLURAL}.yaml`;
/** Helm installs the CRDs in a chart's crds/ folder: the same generated file. */
export const CHART_CRD_FILE = `charts/conveyor/crds/${GROUP}_${PLURAL}.yaml`;

export function workerPoolCRD() {
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: {
      name: CRD_NAME,
      labels: { "app.kubernetes.io/name": "conveyor", "app.kubernetes.io/component": "crd" },
    },
    spec: {
      group: GROUP,
      scope: "Namespaced",
      names: {
        kind: KIND,
        listKind: `${KIND}List`,
        plural: PLURAL,
        singular: SINGULAR,
        shortNames: [...SHORT_NAMES],
        categories: ["conveyor"],
      },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: workerPoolSchema },
          subresources: {
            status: {},
            // `kubectl scale wp/x --replicas=N` pins spec.replicas (autoscaling off while set);
            // status.selector lets `kubectl get --subresource=scale`, PDB tooling and external
            // autoscalers find the pool's pods. The operator's own HPA targets the Deployment.
            scale: {
              specReplicasPath: ".spec.replicas",
              statusReplicasPath: ".status.replicas",
              labelSelectorPath: ".status.selector",
            },
          },
          additionalPrinterColumns: printerColumns,
        },
      ],
    },
  };
}

const HEADER = [
  "# GENERATED from operator/apis/v1alpha1/schema.ts by `npm run gen:crds` — do not edit by hand.",
  "# The WorkerPool API: see docs/workerpool.md.",
].join("\n");

export function workerPoolCRDYaml(): string {
  return `${HEADER}\n${stringify(workerPoolCRD(), { lineWidth: 0 })}`;
}
