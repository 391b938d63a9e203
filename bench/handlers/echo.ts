// The contract bench's Conveyor handler: returns the job's data as its result, so a result
// contract checks a document as large as the data's.
export default async function echo(job: { data: unknown }): Promise<unknown> {
  return job.data;
}
