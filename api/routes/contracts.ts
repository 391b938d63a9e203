// A queue's contract over HTTP: GET, PUT (the Contract itself as the body), DELETE.
import { deleteContract, getContract, setContract } from "../../queue/contracts.ts";
import type { ApiContext } from "../context.ts";
import { HttpError } from "../http.ts";
import type { Handlers } from "../router.ts";

export function contractHandlers(ctx: ApiContext): Handlers {
  return {
    async getContract({ params }) {
      const queue = params.queue!;
      const stored = await getContract(ctx.redis, queue);
      if (!stored) throw new HttpError(404, `queue ${queue} has no contract`);
      return { body: { queue, ...stored } };
    },
    async putContract({ params, body }) {
      const queue = params.queue!;
      // (a ContractError, naming what is wrong, answers 400: api/server.ts)
      const stored = await setContract(ctx.redis, queue, body, "api");
      return { body: { queue, ...stored } };
    },
    async deleteContract({ params }) {
      const queue = params.queue!;
      return { body: { queue, deleted: await deleteContract(ctx.redis, queue) } };
    },
  };
}
