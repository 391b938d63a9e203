// The reconcile's contract step: spec.contract into the queue's Redis — resolved (inline, or its
// ConfigMap, watched), compiled, and published when the hash in force differs or another source
// set it; an invalid or missing one is a problem and leaves the one in force. spec.contract
// removed: the contract this pool published is deleted. Before the Deployment, so the first pod
// finds it.
import { compileContract, contractHash, type Contract } from "../../queue/index.ts";
import { rfc3339 } from "../../lib/time.ts";
import type { WorkerPoolSpec, WorkerPoolStatus } from "../apis/v1alpha1/types.ts";
import { Result } from "../kube/result.ts";
import { resolveContract } from "./contractSource.ts";
import type { PoolPass, StepDeps } from "./poolPass.ts";
import { Reason } from "./reasons.ts";

/** Re-check a pool whose contract could not be resolved, read or published (besides the ConfigMap's watch). */
const CONTRACT_RETRY_MS = 15_000;

type Published = NonNullable<WorkerPoolStatus["contract"]>;

export async function publishContract(deps: StepDeps, pass: PoolPass): Promise<void> {
  const { spec, pool, key } = pass;
  if (!spec) return;
  const { namespace, name } = pool.metadata;
  const ref = spec.contract?.configMapRef;
  deps.configMaps.reference(key, ref ? { namespace, name: ref.name } : undefined);
  const published = pool.status?.contract;
  if (!spec.contract && !published) return;
  // (Redis unreachable: RedisUnreachable says so; the next good poll re-checks)
  if (pass.sample?.error) return;
  const owner = `operator:${namespace}/${name}`;
  try {
    if (!spec.contract) await deleteContract(deps, pass, spec, owner, published!);
    else await publishSpecContract(deps, pass, spec, owner, published);
  } catch (err) {
    deps.ctx.log.warn({ pool: key, queue: spec.queue, err: String(err) }, "cannot publish the contract yet");
    pass.result = Result.sooner(pass.result, Result.requeueAfter(CONTRACT_RETRY_MS));
  }
}

/** spec.contract removed: the contract this pool published goes, unless someone else set one since. */
async function deleteContract(
  deps: StepDeps,
  pass: PoolPass,
  spec: WorkerPoolSpec,
  owner: string,
  published: Published,
): Promise<void> {
  const { pool, key } = pass;
  const { namespace, name } = pool.metadata;
  const deleted = await deps.poller.deleteContractOf(key, owner);
  if (deleted === undefined) return; // not polled: its Redis Secret is the problem reported
  pass.contract = null;
  pass.state.contractChecked = undefined;
  if (!deleted) return;
  deps.ctx.metrics.contractPublishes.inc({ namespace, workerpool: name, action: "deleted" });
  deps.ctx.log.info({ pool: key, queue: spec.queue, hash: published.hash }, "contract deleted");
  await deps.ctx.events.record(
    pool,
    "Normal",
    Reason.ContractDeleted,
    `contract ${published.hash} deleted from queue ${spec.queue} (spec.contract removed)`,
  );
}

/** spec.contract resolved and checked, then published unless this pool's copy is in force. */
async function publishSpecContract(
  deps: StepDeps,
  pass: PoolPass,
  spec: WorkerPoolSpec,
  owner: string,
  published: Published | undefined,
): Promise<void> {
  const { pool, key } = pass;
  const { namespace, name } = pool.metadata;
  const resolved = resolveContract(spec, namespace, deps.configMaps);
  if (!resolved || resolved.pending) return;
  if (resolved.problem) {
    pass.problems.push(resolved.problem);
    pass.result = Result.sooner(pass.result, Result.requeueAfter(CONTRACT_RETRY_MS));
    return;
  }
  const hash = contractHash(resolved.contract as Contract);
  const invalid = checkedContract(pass, resolved.contract, hash);
  if (invalid !== undefined) {
    pass.problems.push({
      reason: Reason.ContractInvalid,
      message: `spec.contract (${resolved.source}): ${invalid}; the queue's contract in force is unchanged`,
    });
    return;
  }
  const inForce = await deps.poller.contractInForce(key);
  if (inForce === undefined) return; // not polled: its Redis Secret is the problem reported
  const status = { hash, source: resolved.source };
  if (inForce?.hash === hash && inForce.source === owner) {
    if (published?.hash !== hash || published.source !== resolved.source)
      pass.contract = { ...status, publishedAt: published?.publishedAt ?? rfc3339(pass.now) };
    return;
  }
  await deps.poller.publishContract(key, resolved.contract as Contract, owner);
  pass.contract = { ...status, publishedAt: rfc3339(Date.now()) };
  deps.ctx.metrics.contractPublishes.inc({ namespace, workerpool: name, action: "published" });
  const replaced = inForce ? ` (replacing ${inForce.hash} set by ${inForce.source || "unknown"})` : "";
  deps.ctx.log.info(
    { pool: key, queue: spec.queue, hash, source: resolved.source, replaced: inForce?.hash },
    "contract published",
  );
  await deps.ctx.events.record(
    pool,
    "Normal",
    Reason.ContractPublished,
    `contract ${hash} (${resolved.source}) published to queue ${spec.queue}${replaced}`,
  );
}

/** The contract's compile error, undefined when it compiles; compiled once per hash. */
function checkedContract(pass: PoolPass, contract: unknown, hash: string): string | undefined {
  const { state } = pass;
  if (state.contractChecked?.hash !== hash) {
    let error: string | undefined;
    try {
      compileContract(contract as Contract, hash);
    } catch (err) {
      error = (err as Error).message;
    }
    state.contractChecked = { hash, error };
  }
  return state.contractChecked.error;
}
