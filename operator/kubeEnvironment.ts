// Whether a Kubernetes API is configured for this process (a kubeconfig file as the operator's
// loader finds it, or the in-cluster service account), answered without loading
// @kubernetes/client-node: `conveyor api` loads the client (tens of MiB) only when there is a
// cluster to read.
import { kubeConfigFiles } from "./kube/kubeConfig.ts";

export function kubernetesConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return kubeConfigFiles(env).length > 0 || Boolean(env.KUBERNETES_SERVICE_HOST);
}
