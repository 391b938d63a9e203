// Whether a Kubernetes API is configured for this process (KUBECONFIG, the in-cluster service
// account, or ~/.kube/config), answered without loading @kubernetes/client-node: `conveyor api`
// loads the client (tens of MiB) only when there is a cluster to read.
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export function kubernetesConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return (
    Boolean(env.KUBECONFIG) ||
    Boolean(env.KUBERNETES_SERVICE_HOST) ||
    existsSync(join(env.HOME ?? homedir(), ".kube", "config"))
  );
}
