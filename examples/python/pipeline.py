"""Enqueue texts into the two-stage pipeline of handlers.py and print each one's summary.

    PYTHONPATH=clients/python python3 examples/python/pipeline.py redis://127.0.0.1:6379 [count]

A job keeps its id from stage to stage: its record says which stage it is at (`queue`).
"""

import sys
import time

from conveyor import Client

TEXT = "Stage handlers in Python. Python handlers run in one process per worker. Workers lease jobs!"


def main(url: str, count: int) -> int:
    client = Client.from_url(url)
    jobs = client.enqueue_many("docs/extract", [{"data": {"text": f"{TEXT} Document {i}."}} for i in range(count)])
    print(f"enqueued {len(jobs)} into docs/extract")
    deadline = time.monotonic() + 120
    pending = {j.id for j in jobs}
    while pending and time.monotonic() < deadline:
        for job_id in list(pending):
            job = client.get_job(job_id, "docs/extract")
            if job and job.queue == "docs/summarize" and job.state in ("completed", "dead"):
                pending.discard(job_id)
                print(f"{job_id}: {job.state} {job.result if job.state == 'completed' else job.error}")
        time.sleep(0.1)
    client.close()
    return 1 if pending else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379", int(sys.argv[2]) if len(sys.argv) > 2 else 3))
